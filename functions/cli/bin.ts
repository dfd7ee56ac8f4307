/**
 * The packaged CLI's entry (package.json `bin`, dist/cli.mjs): checks the Node version, starts
 * `export` once more in the same process with the memory settings only a start can give
 * (reexec.ts), then loads the bundle of main.ts beside it. A separate file because an ES module's static imports
 * are linked before any of its code runs: on an older Node the bundle fails at `import
 * { zstdCompressSync } from "node:zlib"` with a SyntaxError and a screen of minified code,
 * before a check inside it could say anything. This file imports nothing that may be missing.
 */
import { howToGetNode, nodeVersionProblem } from './node-version.cjs';
import { restartWithStartSettings } from './reexec.js';

/** package.json `engines.node`, set by the build (test/tools/build-cli.ts). */
declare const NODE_ENGINES: string;
/** The bundle of main.ts, beside this file; a variable, so that the build leaves it a file. */
const BUNDLE = './cli-main.mjs';

const problem = nodeVersionProblem(
  process.versions.node,
  NODE_ENGINES,
  howToGetNode(NODE_ENGINES, 'campaign-report-exporter …'),
);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exitCode = 2;
} else {
  // Returns only where it does not restart: Node started again with the memory settings of a
  // process's start (reexec.ts), this same file then runs once more and loads the bundle.
  restartWithStartSettings(import.meta.url);
  import(BUNDLE).catch((error: unknown) => {
    process.stderr.write(`error: could not load ${BUNDLE}: ${String(error)}\n`);
    process.exitCode = 1;
  });
}
