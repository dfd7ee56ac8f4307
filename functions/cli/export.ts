/**
 * `npm run export -- --out DIR|s3://bucket/prefix [--date YYYY-MM-DD] [--full]`: the export
 * command run from the repository (export-command.ts).
 */
import { npmCallerFolder } from './config.js';
import { exitWith } from './exit-with.js';
import { exportCommand } from './export-command.js';
import { boundCliHeap } from './heap.js';

boundCliHeap();
exitWith(exportCommand(process.argv.slice(2), process.env, { cwd: npmCallerFolder(process.env) }));
