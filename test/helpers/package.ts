/**
 * The npm package as a user gets it, for the tests of the packaged CLI and construct
 * (test/integration/cli/package*.test.ts): `npm pack` of this checkout (prepack builds dist/
 * whole: test/tools/build-package.ts), and the files it must hold.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
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
 * The folder one vitest run packs into: its test files run in forks of the one vitest process
 * (vitest.config.ts `pool: 'forks'`), so they share its pid as their parent's.
 */
const sharedDir = (): string => join(tmpdir(), `cre-package-${process.ppid}`);
/** How often a file that did not pack looks for the tarball another one is making. */
const WAIT_POLL_MS = 250;

/**
 * The tarball of this checkout, packed once per vitest run for every test file that asks: the
 * first packs (20 s or more: prepack builds dist/), the others wait for it. Call
 * {@link releaseSharedPack} in afterAll: the last file to release removes it.
 */
export async function sharedPack(): Promise<Packed> {
  const dir = sharedDir();
  const result = join(dir, 'packed.json');
  const user = join(dir, `user-${process.pid}`);
  let packer = true;
  try {
    await mkdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    packer = false;
  }
  await writeFile(user, '');
  if (packer) {
    const packed = await packInto(dir);
    await writeFile(`${result}.partial`, JSON.stringify(packed));
    await rename(`${result}.partial`, result);
    return packed;
  }
  const deadline = Date.now() + PACK_TIMEOUT_MS;
  for (;;) {
    const text = await readFile(result, 'utf8').catch(() => undefined);
    if (text !== undefined) return JSON.parse(text) as Packed;
    if (Date.now() > deadline)
      throw new Error(`no tarball in ${dir} after ${PACK_TIMEOUT_MS} ms: did its packer fail?`);
    await sleep(WAIT_POLL_MS);
  }
}

/** This file is done with the shared tarball; the last one removes its folder. */
export async function releaseSharedPack(): Promise<void> {
  const dir = sharedDir();
  await rm(join(dir, `user-${process.pid}`), { force: true });
  const users = (await readdir(dir).catch(() => [])).filter((f) => f.startsWith('user-'));
  if (users.length === 0) await rm(dir, { recursive: true, force: true });
}

/**
 * Exactly what the package ships (package.json `files`, plus what npm always adds): the CLI's
 * entry and bundle, the construct and its types, each function's prebuilt code and source map
 * (the functions run with --enable-source-maps), the docs the README links, the changelog.
 */
export function expectedPackageFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split(sep).join('/'));
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
