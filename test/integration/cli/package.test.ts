/**
 * The packaged CLI as a user gets it: `npm pack` (prepack bundles dist/cli-main.mjs and writes
 * its entry dist/cli.mjs, which checks the Node version first), the tarball
 * extracted into a temporary folder outside the repository, and the `bin` file run with Node
 * alone: no node_modules beside it, no TypeScript compiler.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { isBuiltin } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI_MALLOC_ENV, CLI_START_FLAGS } from '../../../functions/cli/reexec.js';
import { tempDir } from '../../helpers/export.js';
import {
  expectedPackageFiles,
  PACK_TIMEOUT_MS,
  releaseSharedPack,
  sharedPack,
} from '../../helpers/package.js';

const run = promisify(execFile);

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

let work: string;
let packageDir: string;
let bin: string;
let packed: string[];
let version: string;

/** Runs the packaged bin with `args` from the extracted package; never rejects. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  return run(process.execPath, [bin, ...args], {
    cwd: packageDir,
    // Nothing of the developer's environment: no NODE_OPTIONS, no tsx loader.
    env: { PATH: process.env.PATH ?? '', ...env },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      stdout: error.stdout,
      stderr: error.stderr,
    }),
  );
}

/** Every module specifier of the bundle's static imports and of its literal dynamic imports. */
function importedModules(bundle: string): string[] {
  const staticImports = bundle.matchAll(/(?:^|[;}\n])import\s*(?:[\w$*{},\s]+?from\s*)?["']([^"']+)["']/g);
  const dynamicImports = bundle.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g);
  return [...new Set([...staticImports, ...dynamicImports].map((m) => m[1]!))].sort();
}

beforeAll(async () => {
  work = await tempDir('cli-package');
  const { tarball, files } = await sharedPack();
  packed = files;
  await run('tar', ['-xzf', tarball, '-C', work]);
  packageDir = join(work, 'package');
  const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as {
    version: string;
    bin: Record<string, string>;
  };
  version = manifest.version;
  bin = join(packageDir, manifest.bin['campaign-report-exporter']!);
}, PACK_TIMEOUT_MS);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
  await releaseSharedPack();
});

describe('the packed CLI', () => {
  it('ships the CLI, the construct, the prebuilt functions, the README, the docs it links, the changelog and package.json, and none of the sources', () => {
    expect(packed.sort()).toEqual(expectedPackageFiles());
  });

  it("installs nothing beside itself: no dependencies, and the construct's peers (aws-cdk-lib, constructs) optional", async () => {
    // dist/cli-main.mjs bundles what it uses; a listed dependency would be fetched by `npm install -g`,
    // and so would a peer that is not optional (npm 7 and later install peers).
    const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    for (const field of ['dependencies', 'optionalDependencies', 'bundleDependencies'])
      expect(manifest[field], field).toBeUndefined();
    expect(Object.keys(manifest.peerDependencies as object).sort()).toEqual(['aws-cdk-lib', 'constructs']);
    expect(manifest.peerDependenciesMeta).toEqual({
      'aws-cdk-lib': { optional: true },
      constructs: { optional: true },
    });
  });

  it('is an entry and one bundle that need only Node: a node shebang, Node built-ins, no TypeScript or tsx', async () => {
    const entry = await readFile(bin, 'utf8');
    expect(entry.startsWith('#!/usr/bin/env node\n')).toBe(true);
    // The entry imports nothing, statically or by a literal: an older Node runs its check before
    // anything is linked, and only then is the bundle beside it loaded.
    expect(importedModules(entry)).toEqual([]);
    expect(entry).toContain('"./cli-main.mjs"');
    const bundle = await readFile(join(packageDir, 'dist', 'cli-main.mjs'), 'utf8');
    const modules = importedModules(bundle);
    expect(modules).toContain('node:zlib');
    // DuckDB alone is left out, for `sql`, found or installed when it runs (duckdb-install.test.ts).
    expect(modules.filter((m) => !isBuiltin(m))).toEqual(['@duckdb/node-api']);
    // Matches, not the bundle, in a failure message: the bundle is 900 KB.
    expect(
      bundle.match(/(?:from|import\(|require\()\s*["'](?:typescript|tsx)(?:\/[^"']*)?["']/)?.[0],
    ).toBeUndefined();
  });

  it('lists its commands on --help and -h', async () => {
    for (const flag of ['--help', '-h']) {
      const { code, stdout } = await cli([flag]);
      expect(code).toBe(0);
      expect(stdout).toMatch(/^Usage: campaign-report-exporter <command>/);
      expect(stdout).toMatch(/^ {2}export\s+\S/m);
      expect(stdout).toMatch(/^ {2}aws\s+\S/m);
      expect(stdout).toMatch(/^ {2}simulator\s+\S/m);
    }
  });

  it("prints package.json's version on --version and -V", async () => {
    for (const flag of ['--version', '-V']) {
      const { code, stdout } = await cli([flag]);
      expect(code, flag).toBe(0);
      expect(stdout, flag).toBe(`${version}\n`);
    }
  });

  it('exits 2 naming the commands on an unknown command, and on none', async () => {
    const unknown = await cli(['exprot']);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toContain(
      'unknown command "exprot"; the commands are export, sql, aws, simulator',
    );
    const inherited = await cli(['toString']);
    expect(inherited.code).toBe(2);
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('no command given');
  });

  it("passes a command's flags to it: export --help is the export usage", async () => {
    const { code, stdout } = await cli(['export', '--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('INTEGRATION_API_KEY');
    expect(stdout).toContain('--out');
  });

  it('bundles the aws command with its AWS clients: a flag error exits 2 before any AWS call', async () => {
    const help = await cli(['aws', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: campaign-report-exporter aws <start\|status\|runs>/);
    const wrong = await cli(['aws', 'runs', '--limit', '0']);
    expect(wrong).toMatchObject({ code: 2, stdout: '' });
    expect(wrong.stderr).toBe('error: --limit takes a whole number from 1 to 1000 (see --help)\n');
  });

  it.skipIf(process.platform !== 'linux')(
    "runs export in Node started again in the same process, with glibc's settings and V8's flags; Ctrl-C still stops it with 130",
    async () => {
      // An API that takes each request and never answers: the run waits on its first one while
      // the process is looked at, then Ctrl-C stops it.
      let arrived: () => void = () => {};
      const requested = new Promise<void>((resolve) => {
        arrived = resolve;
      });
      const api = createServer(() => arrived());
      api.listen(0, '127.0.0.1');
      await once(api, 'listening');
      const { port } = api.address() as AddressInfo;
      try {
        const child = spawn(process.execPath, [bin, 'export', '--out', join(work, 'held'), '--full'], {
          cwd: packageDir,
          env: {
            PATH: process.env.PATH ?? '',
            INTEGRATION_API_BASE_URL: `http://127.0.0.1:${port}`,
            INTEGRATION_API_KEY: 'held-key',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        child.stdout!.resume();
        const exited = once(child, 'exit');
        await requested;

        // The process the shell started (same pid), now running the command line and environment
        // of the restart; no second process beside or under it.
        const cmdline = (await readFile(`/proc/${child.pid}/cmdline`, 'utf8')).split('\0');
        const environ = (await readFile(`/proc/${child.pid}/environ`, 'utf8')).split('\0');
        const children = (await readFile(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8')).trim();
        child.kill('SIGINT');
        const [code] = await exited;

        expect(cmdline.slice(1)).toEqual([
          ...CLI_START_FLAGS,
          bin,
          'export',
          '--out',
          join(work, 'held'),
          '--full',
          '',
        ]);
        for (const [name, value] of Object.entries(CLI_MALLOC_ENV))
          expect(environ).toContain(`${name}=${value}`);
        expect(children).toBe('');
        expect(code, stderr).toBe(130);
        expect(stderr).toMatch(/^error: interrupted by SIGINT: /);
        expect(stderr).not.toMatch(/Warning/);
      } finally {
        api.closeAllConnections();
        api.close();
      }
    },
  );

  describe('against the packaged simulator', () => {
    let simulator: ChildProcess | undefined;
    afterEach(() => {
      if (simulator && simulator.exitCode === null) simulator.kill('SIGKILL');
    });

    it('exports into a folder and writes the run manifest; the simulator stops on SIGTERM with 0', async () => {
      simulator = spawn(
        process.execPath,
        [bin, 'simulator', '--port', '0', '--seed', '3', '--campaigns', '2', '--jobs', '5'],
        { cwd: packageDir, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const [line] = (await once(createInterface({ input: simulator.stdout! }), 'line')) as [string];
      const { url, keys } = JSON.parse(line) as { url: string; keys: { valid: string } };
      const out = join(work, 'out');

      const exported = await cli(['export', '--out', out, '--date', '2026-01-02'], {
        INTEGRATION_API_BASE_URL: url,
        INTEGRATION_API_KEY: keys.valid,
      });

      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout).toMatch(/status\s+succeeded/);
      const manifests = await readdir(join(out, 'runs', 'dt=2026-01-02'));
      expect(manifests).toHaveLength(1);
      const manifest = JSON.parse(
        await readFile(join(out, 'runs', 'dt=2026-01-02', manifests[0]!), 'utf8'),
      ) as {
        run_id: string;
        status: string;
        counts: { campaigns: number; jobs: number };
      };
      expect(manifests[0]).toBe(`${manifest.run_id}.json`);
      expect(manifest.status).toBe('succeeded');
      expect(manifest.counts).toMatchObject({ campaigns: 2, jobs: 10 });
      expect(exported.stdout + exported.stderr).not.toContain(keys.valid);

      simulator.kill('SIGTERM');
      const [code] = await once(simulator, 'exit');
      expect(code).toBe(0);
    });
  });
});
