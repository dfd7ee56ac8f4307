/** Whether Node `version` (`20.20.2` or `v20.20.2`) meets `range` (`>=22.15`). */
export function satisfies(version: string, range: string): boolean;
/** undefined when Node `version` meets `range`; otherwise the error line: found, needed, `howToGet`. */
export function nodeVersionProblem(version: string, range: string, howToGet: string): string | undefined;
/** How to get a Node that meets `range` for a `command` run by hand: nvm, nodejs.org or npx. */
export function howToGetNode(range: string, command: string): string;
