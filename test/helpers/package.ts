/**
 * The npm package as a user gets it, for the tests of the packaged CLI and construct
 * (test/integration/cli/package*.test.ts): `npm pack` of this checkout (prepack builds dist/
 * whole: test/tools/build-package.ts), and the files it must hold.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { FUNCTION_NAMES } from '../../infra/constructs/functions.js';

const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** npm pack runs prepack (the CLI, the construct and four Lambda bundles) first: 20 s here, more when busy. */
export const PACK_TIMEOUT_MS = 180_000;

export interface Packed {
  /** The tarball's path. */
  tarball: string;
  /** The files npm put in it, as `npm pack --json` lists them. */
  files: string[];
}

/** Packs this checkout into `destination`. */
export async function packInto(destination: string): Promise<Packed> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: ROOT,
    maxBuffer: 1 << 20,
  });
  const [result] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
  return { tarball: join(destination, result.filename), files: result.files.map((f) => f.path) };
}

/**
 * Exactly what the package ships (package.json `files`, plus what npm always adds): the CLI's
 * entry and bundle, the construct and its types, each function's prebuilt code and source map
 * (the functions run with --enable-source-maps), the docs the README links, the changelog.
 */
export function expectedPackageFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`);
  const lambdas = FUNCTION_NAMES.flatMap((n) => [
    `dist/lambda/${n}/index.js`,
    `dist/lambda/${n}/index.js.map`,
  ]);
  return [
    'CHANGELOG.md',
    'README.md',
    'package.json',
    'dist/cli.mjs',
    'dist/cli-main.mjs',
    'dist/construct.mjs',
    'dist/construct.d.ts',
    ...lambdas,
    ...docs,
  ].sort();
}
