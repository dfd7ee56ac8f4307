/**
 * `npm run build:cli [-- --outfile FILE]`: bundles the CLI (functions/cli/main.ts) with its
 * dependencies into one ESM file, dist/cli.mjs by default, run by `node` alone: no TypeScript
 * compiler and no node_modules at run time. `npm pack` runs it first (prepack).
 */
import { readFileSync, renameSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ROOT = new URL('../../', import.meta.url);
const CLI_ENTRY = fileURLToPath(new URL('functions/cli/main.ts', ROOT));
/** Where package.json's `bin` points. */
export const CLI_BUNDLE = fileURLToPath(new URL('dist/cli.mjs', ROOT));

/**
 * The first line makes the file executable as `bin`. The second gives bundled CommonJS code the
 * `require` an ES module lacks, as the Lambda bundles do (infra/constructs/functions.ts): no
 * module calls it today (the SDK comes in its ES module builds), but a CommonJS dependency that
 * requires a Node built-in would otherwise fail only at run time ("Dynamic require of ... is
 * not supported").
 */
const BANNER = [
  '#!/usr/bin/env node',
  "import { createRequire as __cli_createRequire } from 'node:module'; const require = __cli_createRequire(import.meta.url);",
].join('\n');

/** esbuild's target from package.json `engines.node` (">=22.15" → "node22.15"): one source of truth. */
function nodeTarget(engines: string | undefined): string {
  const match = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(engines?.trim() ?? '');
  if (!match) throw new Error(`package.json engines.node must read ">=X.Y", got ${JSON.stringify(engines)}`);
  return `node${match[1]}`;
}

export interface CliBuild {
  outfile: string;
  bytes: number;
}

/** Bundles the CLI into `outfile`; resolves to its size. */
export async function buildCli(outfile: string = CLI_BUNDLE): Promise<CliBuild> {
  const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
    engines?: { node?: string };
  };
  // Written beside, then renamed over the bundle: two builds at once (`npm pack` in two test
  // files) never let a reader see a half-written file.
  const partial = `${outfile}.${process.pid}.partial`;
  await build({
    entryPoints: [CLI_ENTRY],
    outfile: partial,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: nodeTarget(pkg.engines?.node),
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
  renameSync(partial, outfile);
  return { outfile, bytes: statSync(outfile).size };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { outfile: { type: 'string' } }, strict: true });
  const { outfile, bytes } = await buildCli(values.outfile);
  // On stderr: `npm pack --json` (prepack runs this) keeps its stdout for the JSON.
  process.stderr.write(`${outfile}  ${(bytes / 1024).toFixed(0)} KB\n`);
}
