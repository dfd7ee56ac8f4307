/**
 * What a newcomer tripped on with the export command (issue 30), each reproduced in-process
 * against a scripted API on 127.0.0.1: an --out that cannot hold files, a signal before any run
 * started, an Iceberg output's format carried on, a wrong base path, a host name that does not
 * resolve, and a wait for another run's lock that says it waits.
 */

import { lookup } from 'node:dns/promises';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import { type CliIo, exportCommand } from '../../../functions/cli/export-command.js';
import type { SignalSource, StopSignal } from '../../../functions/cli/interrupt.js';
import { API_PATH_PREFIX } from '../../../shared/api/base-url.js';
import { newRunId } from '../../../shared/export/run/context.js';
import { OutputLock } from '../../../shared/export/state/lock.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { Captured } from '../../helpers/cli.js';
import { tempDir } from '../../helpers/export.js';
import { scriptedApi, scriptedRoute } from '../../helpers/scripted-api.js';
import { errorReply, startServer } from '../api/server.js';

const KEY = 'sk_test_4f1c9a7e2b';
const onLinux = process.platform === 'linux' && existsSync('/proc/self');

const undo: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of undo.splice(0)) await step();
});

interface Ran {
  code: number;
  stdout: string;
  /** stderr's lines. */
  errors: string[];
  ms: number;
}

async function run(argv: string[], env: NodeJS.ProcessEnv, io: Partial<CliIo> = {}): Promise<Ran> {
  const stdout = new Captured();
  const stderr = new Captured();
  const startedAt = performance.now();
  const code = await exportCommand(argv, env, { stdout, stderr, cwd: await tempDir('cwd'), ...io });
  return { code, stdout: stdout.text, errors: stderr.lines(), ms: performance.now() - startedAt };
}

const envOf = (url: string): NodeJS.ProcessEnv => ({
  INTEGRATION_API_BASE_URL: url,
  INTEGRATION_API_KEY: KEY,
});

/** A small API: campaign 7 with jobs 101 and 102. */
const scripted = () => scriptedApi({ campaignIds: [7], jobIds: [101, 102] });

/** Signals a test sends; `exits` records what the command asked the process to exit with. */
class TestSignals extends EventEmitter implements SignalSource {
  readonly exits: number[] = [];
  exit(code: number): void {
    this.exits.push(code);
  }
  send(signal: StopSignal): void {
    this.emit(signal);
  }
}

describe('--out on a file system that holds no files', () => {
  // Node's recursive mkdir never settled there (ENOENT although /proc is a folder): a hang at
  // full CPU, before this check. A failure here on the old code is the test's timeout.
  it.runIf(onLinux).each(['/proc/x', '/proc/x/y/z', '/proc/self/exports', '/sys/x'])(
    'exits 1 at once for %s with one line naming --out and the file system, before any request',
    async (out) => {
      const server = await scripted();
      const r = await run(['--out', out], envOf(server.url));
      expect(r.code).toBe(1);
      const fs = out.startsWith('/sys') ? 'sysfs' : 'proc';
      expect(r.errors).toEqual([
        `error: --out ${out} is on ${fs}, a file system of the kernel, which holds no files of its own. pass a folder on a disk, or s3://bucket/prefix`,
      ]);
      expect(r.ms).toBeLessThan(5_000);
      expect(existsSync(out)).toBe(false);
      expect(server.requests).toEqual([]);
    },
    10_000,
  );

  it('still says a path under a file is one (/dev/null/x as a newcomer compared it)', async () => {
    const server = await scripted();
    const r = await run(['--out', '/dev/null/x'], envOf(server.url));
    expect(r.code).toBe(1);
    expect(r.errors).toEqual([
      'error: --out /dev/null/x cannot be a folder: a part of its path is a file. pass a folder, or s3://bucket/prefix',
    ]);
  });

  it('creates a missing folder several levels deep, as before', async () => {
    const server = await scripted();
    const out = join(await tempDir('deep'), 'a', 'b', 'c');
    const r = await run(['--out', out], envOf(server.url));
    expect(r.code).toBe(0);
    expect(existsSync(join(out, 'state', 'lock.json'))).toBe(true);
  });
});

describe('a signal before any run started', () => {
  it('stops a check of --out that does not answer at once, saying no run started', async () => {
    const server = await scripted();
    const signals = new TestSignals();
    // A storage whose writes never settle: a hung network mount, as /proc/x was to mkdir -p.
    const stalled = (storage: Storage): Storage =>
      new Proxy(storage, {
        get: (target, name) => {
          if (name === 'put') return () => new Promise(() => {});
          const value = Reflect.get(target, name, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const running = run(['--out', await tempDir('stalled')], envOf(server.url), {
      signals,
      deps: (options) => {
        const deps = cliDeps(options);
        return { ...deps, storage: stalled(deps.storage) };
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    signals.send('SIGINT');
    const r = await running;
    expect(r.code).toBe(130);
    expect(r.errors).toEqual([
      'error: interrupted by SIGINT while checking --out, before a run started; nothing to close, the next export to --out starts afresh',
    ]);
    expect(server.requests).toEqual([]);
  });
});

describe('a second signal', () => {
  it('exits at once, with one line, when the first cannot end the run (a write that never settles)', async () => {
    const server = await scripted();
    const signals = new TestSignals();
    const stderr = new Captured();
    let stalled = false;
    // The run's staged writes never settle once it is under way: a hung network mount, which
    // the first signal cannot cut short.
    const stalling = (storage: Storage): Storage =>
      new Proxy(storage, {
        get: (target, name) => {
          if (name === 'put')
            return (key: string, ...rest: unknown[]) => {
              if (!key.includes('/staged/')) return Reflect.apply(target.put, target, [key, ...rest]);
              stalled = true;
              return new Promise(() => {});
            };
          const value = Reflect.get(target, name, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    void exportCommand(['--out', await tempDir('stalled-run'), '-q'], envOf(server.url), {
      stdout: new Captured(),
      stderr,
      cwd: await tempDir('cwd'),
      signals,
      deps: (options) => {
        const deps = cliDeps(options);
        return { ...deps, storage: stalling(deps.storage) };
      },
    });
    await expect.poll(() => stalled, { timeout: 20_000 }).toBe(true);
    signals.send('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(signals.exits).toEqual([]); // the first asks the run to stop; the write holds it

    signals.send('SIGINT');

    expect(signals.exits).toEqual([130]);
    // Staged before the run's first progress event: the run is named by what the next one does.
    expect(stderr.lines()).toEqual([
      'error: interrupted by SIGINT again: stopped at once, before the run published; the next export to --out closes what it left and starts afresh',
    ]);
  });
});

describe('an output keeps its table format', () => {
  it('continues an Iceberg output without --table-format, and still refuses an explicit other format', async () => {
    const server = await scripted();
    const out = await tempDir('iceberg');
    const env = envOf(server.url);
    const first = await run(['--out', out, '--full', '--table-format', 'iceberg', '-q'], env);
    expect(first.code, first.errors.join('\n')).toBe(0);

    const plain = await run(['--out', out, '-q'], env);
    expect(plain.code, plain.errors.join('\n')).toBe(0);
    // Both runs published Iceberg tables: each manifest says so.
    const names = (await readdir(join(out, 'runs'), { recursive: true })).filter((n) => n.endsWith('.json'));
    expect(names).toHaveLength(2);
    for (const name of names) {
      const manifest = JSON.parse(await readFile(join(out, 'runs', name), 'utf8')) as {
        table_format?: string;
      };
      expect(manifest.table_format).toBe('iceberg');
    }

    const hive = await run(['--out', out, '--table-format', 'hive', '-q'], env);
    expect(hive.code).toBe(1);
    expect(hive.errors).toHaveLength(1);
    expect(hive.errors[0]).toMatch(
      /^error: .* holds iceberg tables and this run would write hive: an incremental run would leave out/,
    );
  });
});

describe('a base URL that leads elsewhere', () => {
  it('names the whole URL verify asked and the variable to check, never the key', async () => {
    const server = await scripted();
    const base = `${server.url}/wrong`;
    const r = await run(['--out', await tempDir('out')], envOf(base));
    expect(r.code).toBe(1);
    expect(r.errors).toEqual([
      `error: GET ${base}${API_PATH_PREFIX}/verify answered HTTP 404 (NOT_FOUND): Resource not found. ` +
        `no Integration API answers under ${base}: check that INTEGRATION_API_BASE_URL is the API's base URL, ` +
        `with the path the API lives under if it has one (the exporter appends ${API_PATH_PREFIX}/…)`,
    ]);
    expect(r.errors.join('\n') + r.stdout).not.toContain(KEY);
  });
});

describe('a host name that does not resolve', () => {
  it('fails in about a second after one retry, naming DNS and the variable', async (context) => {
    // .invalid never resolves (RFC 6761); a machine without any DNS answers EAI_AGAIN instead,
    // which is retried like any passing failure: this test is about ENOTFOUND.
    const code = await lookup('api.exporter-test.invalid').then(
      () => 'resolved',
      (error: NodeJS.ErrnoException) => error.code,
    );
    if (code !== 'ENOTFOUND') context.skip(`this machine's DNS answers ${code} for .invalid`);
    const r = await run(['--out', await tempDir('out'), '-v'], envOf('https://api.exporter-test.invalid'));
    expect(r.code).toBe(1);
    const verifies = r.errors.filter((l) => l.startsWith(`debug: GET ${API_PATH_PREFIX}/verify -> error`));
    expect(verifies).toHaveLength(2);
    expect(r.errors.at(-1)).toMatch(
      /^error: GET \S+\/verify failed: network: getaddrinfo ENOTFOUND api\.exporter-test\.invalid; gave up after 2 attempts\. the host name api\.exporter-test\.invalid does not resolve \(DNS\): check it in INTEGRATION_API_BASE_URL/,
    );
    expect(r.ms).toBeLessThan(5_000);
  });
});

describe('--wait-lock says it waits', () => {
  const holdLock = async (out: string) => {
    const held = await OutputLock.acquire(new LocalStorage(out), {
      ttlMs: 60_000,
      newRunId: (at) => newRunId(at),
    });
    undo.push(() => held.release());
    return held;
  };

  it('prints a line when the wait starts (holder, until when) and one when --out is free, without a terminal', async () => {
    const server = await scripted();
    const out = await tempDir('wait');
    const held = await holdLock(out);
    setTimeout(() => void held.release(), 500);
    const r = await run(['--out', out, '--wait-lock', '30'], envOf(server.url));
    expect(r.code, r.errors.join('\n')).toBe(0);
    const waiting = r.errors.findIndex((l) => l.startsWith('waiting up to 30s'));
    expect(r.errors[waiting]).toMatch(
      new RegExp(
        `^waiting up to 30s \\(--wait-lock, until \\d\\d:\\d\\d:\\d\\dZ\\) for run ${held.runId} \\(\\d+@[^,]+, since \\d\\d:\\d\\d:\\d\\dZ\\) to release --out; its lock lasts until \\d\\d:\\d\\d:\\d\\dZ unless it renews it$`,
      ),
    );
    expect(r.errors[waiting + 1]).toMatch(/^--out is free after \ds of waiting: this run starts$/);
  });

  it('ends a wait that runs out with the one error line after the waiting line', async () => {
    const server = await scripted();
    const out = await tempDir('wait-out');
    const held = await holdLock(out);
    const r = await run(['--out', out, '--wait-lock', '1'], envOf(server.url));
    expect(r.code).toBe(1);
    expect(r.errors).toHaveLength(2);
    expect(r.errors[0]).toMatch(/^waiting up to 1s \(--wait-lock/);
    expect(r.errors[1]).toMatch(new RegExp(`^error: run ${held.runId} .* is writing to `));
    expect(server.requests).toEqual([]);
  });

  it('says nothing with --quiet', async () => {
    const server = await scripted();
    const out = await tempDir('wait-quiet');
    const held = await holdLock(out);
    setTimeout(() => void held.release(), 300);
    const r = await run(['--out', out, '--wait-lock', '30', '-q'], envOf(server.url));
    expect(r.code).toBe(0);
    expect(r.errors).toEqual([]);
  });
});

describe('a long wait before the run starts, without a terminal', () => {
  it('is said in a line of its own: a Retry-After of 3 s on verify', async () => {
    let throttled = false;
    const route = scriptedRoute({ campaignIds: [7], jobIds: [101] });
    const server = await startServer((request) => {
      if (!throttled && request.path === `${API_PATH_PREFIX}/verify`) {
        throttled = true;
        return { ...errorReply(429, 'RATE_LIMITED', 'Too many requests'), headers: { 'retry-after': '3' } };
      }
      return route(request);
    });
    undo.push(() => server.close());
    const r = await run(['--out', await tempDir('out')], envOf(server.url));
    expect(r.code, r.errors.join('\n')).toBe(0);
    expect(r.errors[0]).toBe(`GET ${API_PATH_PREFIX}/verify -> 429: attempt 2 in 3s`);
  });
});
