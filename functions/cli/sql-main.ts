/**
 * `npm run sql -- --out DIR|s3://bucket/prefix [-c SQL] [--format table|csv|json]`: the sql
 * command run from the repository (sql-command.ts).
 */
import { describeError } from '../../shared/errors.js';
import { npmCallerFolder } from './config.js';
import { sqlCommand } from './sql-command.js';

sqlCommand(process.argv.slice(2), process.env, { cwd: npmCallerFolder(process.env) }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${describeError(error)}\n`);
    process.exitCode = 1;
  },
);
