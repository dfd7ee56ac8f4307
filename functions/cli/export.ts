/**
 * `npm run export -- --out DIR|s3://bucket/prefix [--date YYYY-MM-DD] [--full]`: the export
 * command run from the repository (export-command.ts).
 */
import { describeError } from '../../shared/errors.js';
import { npmCallerFolder } from './config.js';
import { exportCommand } from './export-command.js';

exportCommand(process.argv.slice(2), process.env, { cwd: npmCallerFolder(process.env) }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${describeError(error)}\n`);
    process.exitCode = 1;
  },
);
