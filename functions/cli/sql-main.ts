/**
 * `npm run sql -- --out DIR|s3://bucket/prefix [-c SQL] [--format table|csv|json]`: the sql
 * command run from the repository (sql-command.ts).
 */
import { npmCallerFolder } from './config.js';
import { exitWith } from './exit-with.js';
import { sqlCommand } from './sql-command.js';

exitWith(sqlCommand(process.argv.slice(2), process.env, { cwd: npmCallerFolder(process.env) }));
