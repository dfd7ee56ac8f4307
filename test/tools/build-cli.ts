/**
 * `npm run build:cli [-- --outfile FILE]`: bundles the CLI (functions/cli/main.ts) with its
 * dependencies into one ESM file, dist/cli-main.mjs, and its entry (functions/cli/bin.ts), which
 * checks the Node version before it loads the bundle, into dist/cli.mjs by default (the bundle
 * goes beside FILE). Run by `node` alone: no TypeScript compiler and no node_modules at run
 * time. `npm pack` runs it first (prepack).
 */
import { readFileSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ROOT = new URL('../../', import.meta.url);
const CLI_MAIN = fileURLToPath(new URL('functions/cli/main.ts', ROOT));
const CLI_BIN = fileURLToPath(new URL('functions/cli/bin.ts', ROOT));
/** Where package.json's `bin` points. */
export const CLI_ENTRY = fileURLToPath(new URL('dist/cli.mjs', ROOT));
/** The bundle's name beside the entry: what functions/cli/bin.ts imports. */
const BUNDLE_NAME = 'cli-main.mjs';
/**
 * The entry runs on any Node that parses an ES module with a dynamic import, so that an older
 * one gets the check's one line, not a SyntaxError.
 */
const ENTRY_TARGET = 'node14';

/**
 * Gives bundled CommonJS code the `require` an ES module lacks, as the Lambda bundles do
 * (infra/constructs/functions.ts): no module calls it today (the SDK comes in its ES module
 * builds), but a CommonJS dependency that requires a Node built-in would otherwise fail only at
 * run time ("Dynamic require of ... is not supported"). The entry, not the bundle, has the
 * `#!/usr/bin/env node` line that makes it executable as `bin`.
 */
const BANNER =
  "import { createRequire as __cli_createRequire } from 'node:module'; const require = __cli_createRequire(import.meta.url);";

/** esbuild's target from package.json `engines.node` (">=22.15" → "node22.15"): one source of truth. */
function nodeTarget(engines: string | undefined): string {
  const match = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(engines?.trim() ?? '');
  if (!match) throw new Error(`package.json engines.node must read ">=X.Y", got ${JSON.stringify(engines)}`);
  return `node${match[1]}`;
}

export interface CliBuild {
  /** The entry, `bin`. */
  outfile: string;
  /** The bundle beside it. */
  bundle: string;
  /** Both files' size. */
  bytes: number;
}

/** Bundles the CLI beside `outfile` and writes its entry to `outfile`; resolves to their size. */
export async function buildCli(outfile: string = CLI_ENTRY): Promise<CliBuild> {
  const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
    engines?: { node?: string };
  };
  const engines = pkg.engines?.node;
  const target = nodeTarget(engines);
  const bundle = join(dirname(outfile), BUNDLE_NAME);
  // Each written beside, then renamed over its file: two builds at once (`npm pack` in two test
  // files) never let a reader see a half-written file. The bundle first: the entry loads it.
  const partialBundle = `${bundle}.${process.pid}.partial`;
  const partialEntry = `${outfile}.${process.pid}.partial`;
  await build({
    entryPoints: [CLI_MAIN],
    outfile: partialBundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target,
    // The ES module builds of the SDK and others, as in the Lambda bundles.
    mainFields: ['module', 'main'],
    // Smaller and quicker to parse. No source map: the CLI reports errors as one line, not as a
    // stack, and `npm run export` runs the sources when a stack is wanted.
    minify: true,
    // DuckDB is native and for `sql` alone: installed on its first use (functions/cli/duckdb-loader.ts).
    external: ['@duckdb/node-api'],
    banner: { js: BANNER },
    logLevel: 'warning',
  });
  renameSync(partialBundle, bundle);
  await build({
    entryPoints: [CLI_BIN],
    outfile: partialEntry,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: ENTRY_TARGET,
    define: { NODE_ENGINES: JSON.stringify(engines) },
    external: [`./${BUNDLE_NAME}`],
    banner: { js: '#!/usr/bin/env node' },
    logLevel: 'warning',
  });
  renameSync(partialEntry, outfile);
  return { outfile, bundle, bytes: statSync(outfile).size + statSync(bundle).size };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { outfile: { type: 'string' } }, strict: true });
  const { outfile, bytes } = await buildCli(values.outfile);
  // On stderr: `npm pack --json` (prepack runs this) keeps its stdout for the JSON.
  process.stderr.write(`${outfile}  ${(bytes / 1024).toFixed(0)} KB\n`);
}
