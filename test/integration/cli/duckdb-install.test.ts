/**
 * The packaged CLI's DuckDB, which it does not bundle: the bundle built into a temporary folder
 * outside the repository (no node_modules to resolve from), run with Node alone, and npm
 * pointed at a registry on 127.0.0.1 that serves the DuckDB packages of this checkout's
 * node_modules (packed with `npm pack`): the first `sql` installs the pinned version into the
 * cache folder, the next ones use it, a failed install says what to run, and `export` never
 * installs anything. No internet needed.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DUCKDB_DIR_VARIABLE,
  DUCKDB_DOWNLOAD_MB,
  DUCKDB_INSTALLED_MB,
  DUCKDB_VERSION,
} from '../../../functions/cli/duckdb-loader.js';
import { tempDir } from '../../helpers/export.js';
import { buildCli } from '../../tools/build-cli.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** npm pack of DuckDB's 25 MB native package, the bundle and a real npm install: seconds each. */
const SETUP_TIMEOUT_MS = 120_000;
const INSTALL_TIMEOUT_MS = 60_000;

interface Packed {
  manifest: Record<string, unknown> & { name: string; version: string };
  tarball: Buffer;
}

let work: string;
let bin: string;
/** The bundle the entry `bin` loads. */
let bundleFile: string;
let lake: string;
let registry: Server;
let registryUrl: string;
let requests: string[] = [];
/** The bytes of the tarballs the registry serves: what npm downloads. */
let tarballBytes = 0;

/** DuckDB's packages as installed here (the platform ones present), packed as npm would fetch them. */
async function packDuckDb(into: string): Promise<Map<string, Packed>> {
  const names = ['@duckdb/node-api', '@duckdb/node-bindings', 'detect-libc'];
  for (const entry of await readdir(join(ROOT, 'node_modules/@duckdb')))
    if (entry.startsWith('node-bindings-')) names.push(`@duckdb/${entry}`);
  const packed = new Map<string, Packed>();
  for (const name of names) {
    const folder = join(ROOT, 'node_modules', name);
    const { stdout } = await run('npm', ['pack', folder, '--json', '--pack-destination', into], {
      maxBuffer: 1 << 20,
    });
    const [{ filename }] = JSON.parse(stdout) as [{ filename: string }];
    const manifest = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as Packed['manifest'];
    packed.set(name, { manifest, tarball: await readFile(join(into, filename)) });
  }
  return packed;
}

/** A registry of `packed` alone: packuments (other platforms' optional packages left out) and tarballs. */
function serveRegistry(packed: Map<string, Packed>): Promise<Server> {
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname).slice(1);
    requests.push(path);
    const tarball = /^(.+)\/-\/[^/]+\.tgz$/.exec(path);
    const found = packed.get(tarball ? tarball[1]! : path);
    if (!found) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    if (tarball) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(found.tarball);
      return;
    }
    const { manifest } = found;
    const optional = Object.fromEntries(
      Object.entries((manifest.optionalDependencies ?? {}) as Record<string, string>).filter(([n]) =>
        packed.has(n),
      ),
    );
    const base = manifest.name.split('/').pop();
    const version = {
      ...manifest,
      optionalDependencies: optional,
      dist: {
        tarball: `${registryUrl}${manifest.name}/-/${base}-${manifest.version}.tgz`,
        integrity: `sha512-${createHash('sha512').update(found.tarball).digest('base64')}`,
      },
    };
    const packument = {
      name: manifest.name,
      'dist-tags': { latest: manifest.version },
      versions: { [manifest.version]: version },
    };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  work = await tempDir('duckdb-install');
  ({ outfile: bin, bundle: bundleFile } = await buildCli(join(work, 'bin', 'cli.mjs')));
  const packed = await packDuckDb(await tempDir('duckdb-packs'));
  for (const { tarball } of packed.values()) tarballBytes += tarball.byteLength;
  registry = await serveRegistry(packed);
  registryUrl = `http://127.0.0.1:${(registry.address() as AddressInfo).port}/`;
  // An export with no run yet: every view is there, empty.
  lake = join(work, 'lake');
  await mkdir(join(lake, 'runs'), { recursive: true });
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  await new Promise((resolve) => registry?.close(resolve));
  if (work) await rm(work, { recursive: true, force: true });
});

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the bundle as a user would, npm's registry and cache and the user's cache folder in `work`. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  return run(process.execPath, [bin, ...args], {
    cwd: work,
    env: {
      // The Node running the tests first: npm runs its install scripts with it.
      PATH: [dirname(process.execPath), process.env.PATH ?? ''].join(':'),
      HOME: join(work, 'home'),
      XDG_CACHE_HOME: join(work, 'cache'),
      npm_config_registry: registryUrl,
      npm_config_cache: join(work, 'npm-cache'),
      npm_config_update_notifier: 'false',
      ...env,
    },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: Outcome) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
}

/** The bytes of the files under `dir`, as `du -sb` counts them (the folders' own entries aside). */
async function folderBytes(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes;
}

const CACHE_DIR = () => join(work, 'cache', 'campaign-report-exporter', `duckdb-${DUCKDB_VERSION}`);
const QUERY = ['sql', '--out', 'lake', '--format', 'csv', '-c', 'SELECT count(*) AS n FROM reports_latest'];

describe('DuckDB for the packaged sql command', () => {
  it('is not in the bundle: one dynamic import, resolved at run time', async () => {
    // The bundle beside the entry (dist/cli-main.mjs), which the entry loads after its Node check.
    const bundle = await readFile(bundleFile, 'utf8');
    expect(bundle.match(/import\(\s*["']@duckdb\/node-api["']\s*\)/g)).toHaveLength(1);
    expect(bundle).not.toMatch(/from\s*["']@duckdb\//);
    expect(bundle).not.toContain('duckdb_connect');
  });

  it('never installs anything for export', async () => {
    const r = await cli(['export', '--out', 'lake']);
    expect(r.code).toBe(2);
    expect(existsSync(join(work, 'cache'))).toBe(false);
    expect(requests).toEqual([]);
  });

  it(
    'installs the pinned version into the cache folder on first use, saying so on stderr, then answers',
    async () => {
      const r = await cli(QUERY);
      expect(r.stderr).toBe(
        `DuckDB is needed once: installing @duckdb/node-api@${DUCKDB_VERSION} into ${CACHE_DIR()} (npm: about ${DUCKDB_DOWNLOAD_MB} MB to download, ${DUCKDB_INSTALLED_MB} MB on disk)…\n`,
      );
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('n\r\n0\r\n');
      const installed = JSON.parse(
        await readFile(join(CACHE_DIR(), 'node_modules/@duckdb/node-api/package.json'), 'utf8'),
      ) as { version: string };
      expect(installed.version).toBe(DUCKDB_VERSION);
    },
    INSTALL_TIMEOUT_MS,
  );

  // The figures are linux-x64's (other platforms' native builds differ): measured where they apply.
  it.runIf(process.platform === 'linux' && process.arch === 'x64')(
    'takes the download and the disk space the install line and docs/query.md say, within 10%',
    async () => {
      const installed = await folderBytes(CACHE_DIR());
      expect(installed / 1e6).toBeGreaterThan(DUCKDB_INSTALLED_MB * 0.9);
      expect(installed / 1e6).toBeLessThan(DUCKDB_INSTALLED_MB * 1.1);
      expect(tarballBytes / 1e6).toBeGreaterThan(DUCKDB_DOWNLOAD_MB * 0.9);
      expect(tarballBytes / 1e6).toBeLessThan(DUCKDB_DOWNLOAD_MB * 1.1);
      const docs = await readFile(join(ROOT, 'docs/query.md'), 'utf8');
      expect(docs).toContain(`${DUCKDB_DOWNLOAD_MB} MB to download and ${DUCKDB_INSTALLED_MB} MB on disk`);
    },
  );

  it('uses the installed copy the next time, asking npm nothing', async () => {
    requests = [];
    const r = await cli(QUERY);
    expect(r).toEqual({ code: 0, stdout: 'n\r\n0\r\n', stderr: '' });
    expect(requests).toEqual([]);
  });

  it(
    `installs into the folder ${DUCKDB_DIR_VARIABLE} names; when npm fails, one line with the command to run`,
    async () => {
      const dir = join(work, 'chosen duckdb');
      // Port 9 (discard) refuses; no retries, which would wait 10 s and more each.
      const r = await cli(QUERY, {
        [DUCKDB_DIR_VARIABLE]: dir,
        npm_config_registry: 'http://127.0.0.1:9/',
        npm_config_fetch_retries: '0',
      });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      const [announce, error, ...rest] = r.stderr.split('\n');
      expect(announce).toContain(`into ${dir} (npm`);
      expect(error).toMatch(
        new RegExp(
          `^error: DuckDB could not be installed into ${dir} \\(.*ECONNREFUSED.*\\)\\. install it by hand with ` +
            `\`npm install --prefix '${dir}' @duckdb/node-api@${DUCKDB_VERSION.replaceAll('.', '\\.')}\`, or set ${DUCKDB_DIR_VARIABLE}`,
        ),
      );
      expect(rest).toEqual(['']);
    },
    INSTALL_TIMEOUT_MS,
  );
});
