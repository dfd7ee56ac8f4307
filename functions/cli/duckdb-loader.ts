/**
 * Finds DuckDB (@duckdb/node-api, a native module) for the `sql` command. The packaged CLI does
 * not bundle it (test/tools/build-cli.ts marks it external: 70 MB of native code for one
 * command, and one platform's) and lists no dependency, so `npm install -g` fetches nothing and
 * `export` never needs it. On the first `sql` it is installed, at the very version the bundle
 * was built with, into a per-user cache folder with `npm install --prefix`.
 *
 * Where it is looked for, in order:
 * 1. with CAMPAIGN_REPORT_EXPORTER_DUCKDB_DIR set, only in that folder (installed there if
 *    missing);
 * 2. as this program resolves packages: a checkout's node_modules (`npm run sql`), or a
 *    global install beside the CLI;
 * 3. in `$XDG_CACHE_HOME/campaign-report-exporter/duckdb-<version>` (default `~/.cache/…`),
 *    installed there if missing.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
// The installed package's own manifest, by path: the package name itself is external to the
// bundle, and so would be its subpaths.
import duckdbPackageJson from '../../node_modules/@duckdb/node-api/package.json' with { type: 'json' };
import { ExporterError } from '../../shared/errors.js';
import type { DuckDbModule } from './sql.js';

export const DUCKDB_PACKAGE = '@duckdb/node-api';
/** Names the folder DuckDB is installed in (or is to be). */
export const DUCKDB_DIR_VARIABLE = 'CAMPAIGN_REPORT_EXPORTER_DUCKDB_DIR';

/**
 * The DuckDB version the CLI was built and tested with: the one package-lock.json installed in
 * node_modules when the bundle was made (esbuild inlines its package.json), so a user installs
 * exactly what the tests ran, not the newest release that package.json's range allows.
 */
export const DUCKDB_VERSION: string = duckdbPackageJson.version;

/**
 * What the first `sql` fetches and leaves on disk, in MB (10^6 bytes), as measured for
 * linux-x64 at 1.5.6-r.1 (@duckdb/node-api, @duckdb/node-bindings, its linux-x64 package and
 * detect-libc): the tarballs 23.9 MB, the installed folder 71.9 MB (`du -sb`), nearly all of it
 * the native library. The install line and docs/query.md say them;
 * test/integration/cli/duckdb-install.test.ts measures an install against them. Other
 * platforms' builds differ somewhat.
 */
export const DUCKDB_DOWNLOAD_MB = 24;
export const DUCKDB_INSTALLED_MB = 72;

/** The folder DuckDB is installed in: the variable's, else the per-user cache folder for `version`. */
export function duckdbDir(env: NodeJS.ProcessEnv, version: string): string {
  const chosen = env[DUCKDB_DIR_VARIABLE]?.trim();
  if (chosen) return resolve(chosen);
  const cache =
    env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)
      ? env.XDG_CACHE_HOME
      : join(env.HOME || homedir(), '.cache');
  return join(cache, 'campaign-report-exporter', `duckdb-${version}`);
}

const notFound = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
};

/** The module as installed in `dir` by `npm install --prefix dir`; undefined when it is not there. */
export async function importFrom(dir: string): Promise<DuckDbModule | undefined> {
  let path: string;
  try {
    path = createRequire(join(dir, 'package.json')).resolve(DUCKDB_PACKAGE);
  } catch (error) {
    if (notFound(error)) return undefined;
    throw error;
  }
  return (await import(pathToFileURL(path).href)) as DuckDbModule;
}

export interface LoadDuckDbOptions {
  env: NodeJS.ProcessEnv;
  /** Where the install is announced. */
  stderr: { write(text: string): unknown };
}

/** The DuckDB module, installed first when it is nowhere (see the file's comment). */
export async function loadDuckDb(options: LoadDuckDbOptions): Promise<DuckDbModule> {
  const { env, stderr } = options;
  if (!env[DUCKDB_DIR_VARIABLE]?.trim()) {
    try {
      return (await import(DUCKDB_PACKAGE)) as DuckDbModule;
    } catch (error) {
      if (!notFound(error)) throw error;
    }
  }
  const version = DUCKDB_VERSION;
  const dir = duckdbDir(env, version);
  const found = await importFrom(dir);
  if (found) return found;

  const packages = [`${DUCKDB_PACKAGE}@${version}`];
  const byHand = `npm install --prefix ${shellWord(dir)} ${packages.map(shellWord).join(' ')}`;
  stderr.write(
    `DuckDB is needed once: installing ${packages.join(' ')} into ${dir} (npm: about ${DUCKDB_DOWNLOAD_MB} MB to download, ${DUCKDB_INSTALLED_MB} MB on disk)…\n`,
  );
  try {
    await promisify(execFile)(
      'npm',
      ['install', '--prefix', dir, '--no-audit', '--no-fund', '--loglevel=error', ...packages],
      { env, maxBuffer: 16 << 20 },
    );
  } catch (error) {
    throw new ExporterError(`DuckDB could not be installed into ${dir} (${npmFailure(error)})`, {
      cause: error,
      hint: `install it by hand with \`${byHand}\`, or set ${DUCKDB_DIR_VARIABLE} to a folder where it is installed`,
    });
  }
  const installed = await importFrom(dir);
  if (!installed) {
    throw new ExporterError(`npm installed nothing that resolves as ${DUCKDB_PACKAGE} in ${dir}`, {
      hint: `install it by hand with \`${byHand}\``,
    });
  }
  return installed;
}

/** A word as a POSIX shell reads it: quoted only when it must be. */
const shellWord = (word: string): string =>
  /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * npm's reason, one line: its first error line other than the `code`, `errno` and `syscall`
 * fields (`FetchError: request to … failed, reason: connect ECONNREFUSED …`), else the first.
 */
function npmFailure(error: unknown): string {
  const lines = ((error as { stderr?: string }).stderr ?? '')
    .split('\n')
    .map((line) => line.replace(/^npm (?:error|ERR!)\s*/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('A complete log'));
  return (
    lines.find((line) => !/^(?:code|errno|syscall) \S+$/.test(line)) ??
    lines[0] ??
    String((error as Error).message).split('\n')[0]!
  );
}
