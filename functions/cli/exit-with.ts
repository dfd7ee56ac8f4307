/**
 * The end of every CLI entry (the packaged CLI's main.ts, and export.ts, sql-main.ts and aws.ts
 * for the npm scripts): a command resolves to its exit code; an error it did not handle is one
 * line on stderr and exit code 1.
 */
import { describeError } from '../../shared/errors.js';

export function exitWith(result: Promise<number>): void {
  result.then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`error: ${describeError(error)}\n`);
      process.exitCode = 1;
    },
  );
}
