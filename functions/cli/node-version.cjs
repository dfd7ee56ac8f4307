// Whether this Node can run the project, and the one line to print when it cannot. Plain
// CommonJS in syntax every Node since 10 parses, with no import: it runs before anything else
// is loaded, in the packaged CLI's entry (functions/cli/bin.ts) and in the npm scripts'
// pre-script (test/tools/ensure-deps.cjs), both on whatever Node the machine has.
'use strict';

/** `>=22.15` → [22, 15, 0]; package.json `engines.node` must read `>=X[.Y[.Z]]`. */
function minimumOf(range) {
  const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(String(range).trim());
  if (!match) throw new Error(`package.json engines.node must read ">=X.Y", got ${JSON.stringify(range)}`);
  return [Number(match[1]), Number(match[2] || 0), Number(match[3] || 0)];
}

/** Whether Node `version` (`20.20.2` or `v20.20.2`) meets `range` (`>=22.15`). */
function satisfies(version, range) {
  const found = String(version).replace(/^v/, '').split('.').map(Number);
  const needed = minimumOf(range);
  for (let i = 0; i < 3; i++) {
    const part = found[i] || 0;
    if (part !== needed[i]) return part > needed[i];
  }
  return true;
}

/**
 * undefined when Node `version` meets `range`; otherwise the error line (no newline): the
 * version found, the one needed and `howToGet`, the caller's way to a newer Node.
 */
function nodeVersionProblem(version, range, howToGet) {
  if (satisfies(version, range)) return undefined;
  const found = `v${String(version).replace(/^v/, '')}`;
  return `error: Node ${found} is too old: this needs Node ${range} (package.json engines); ${howToGet}`;
}

/** How to get a Node that meets `range` for a `command` run by hand: nvm, nodejs.org or npx. */
function howToGetNode(range, command) {
  const major = minimumOf(range)[0];
  return (
    `install Node ${major} or later (\`nvm install ${major}\`, or https://nodejs.org/en/download), ` +
    `or run it once with \`npx -p node@${major} ${command}\``
  );
}

module.exports = { satisfies, nodeVersionProblem, howToGetNode };
