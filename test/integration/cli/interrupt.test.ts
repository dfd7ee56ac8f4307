/**
 * Ctrl-C and SIGTERM sent to the real CLI process (`node --import tsx functions/cli/export.ts`)
 * while it exports from a slowed simulator: the run stops with one line and 130/143, its lock
 * released and nothing of it published, and the next run closes it and succeeds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { newRunId } from '../../../shared/export/run/context.js';
import { OutputLock } from '../../../shared/export/state/lock.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { tempDir } from '../../helpers/export.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** tsx compiles the CLI on start: a few seconds on a busy machine. */
const TEST_TIMEOUT_MS = 90_000;

const simulators: Simulator[] = [];
const children: ChildProcess[] = [];
const undo: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.all(simulators.splice(0).map((s) => s.close()));
  for (const step of undo.splice(0)) await step();
});

interface Cli {
  child: ChildProcess;
  /** stderr's lines so far. */
  lines: string[];
  /** Resolves at the first stderr line that matches. */
  line(pattern: RegExp): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The export command as its own process, with --verbose: a line per API request on stderr. */
function exportCli(simulator: Simulator, out: string, args: string[] = []): Cli {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'functions/cli/export.ts', '--out', out, '--verbose', ...args],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        INTEGRATION_API_BASE_URL: simulator.url,
        INTEGRATION_API_KEY: simulator.keys.valid,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  const lines: string[] = [];
  const waiting: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => {
    lines.push(line);
    for (const w of waiting.filter((w) => w.pattern.test(line))) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve(line);
    }
  });
  child.stdout!.resume();
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  return {
    child,
    lines,
    line: (pattern) => {
      const seen = lines.find((l) => pattern.test(l));
      return seen !== undefined
        ? Promise.resolve(seen)
        : new Promise((resolve) => waiting.push({ pattern, resolve }));
    },
    exited,
  };
}

const slowSimulator = async (): Promise<Simulator> => {
  const simulator = await startSimulator({ seed: 11, campaigns: 2, jobsPerCampaign: 40, latencyMs: 150 });
  simulators.push(simulator);
  return simulator;
};

const lockOf = async (out: string) =>
  JSON.parse(await readFile(join(out, 'state', 'lock.json'), 'utf8')) as {
    run_id: string;
    released_at?: string;
  };

const manifests = async (out: string): Promise<string[]> =>
  readdir(join(out, 'runs'), { recursive: true }).then(
    (names) => names.filter((n) => n.endsWith('.json')),
    () => [],
  );

describe('a run stopped by a signal', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    'on %s ends its requests, releases --out, publishes nothing, says so in one line and exits %i; the next run closes it and succeeds',
    async (signal, exitCode) => {
      const simulator = await slowSimulator();
      const out = await tempDir('interrupt');
      const cli = exportCli(simulator, out);
      // Mid-run: reports are being fetched.
      await cli.line(/\/report -> /);
      const sentAt = performance.now();
      cli.child.kill(signal);
      const { code } = await cli.exited;
      const stopMs = performance.now() - sentAt;

      expect(code).toBe(exitCode);
      // At once: the 150 ms requests in flight were ended, not waited for one by one.
      expect(stopMs).toBeLessThan(3_000);
      const errors = cli.lines.filter((l) => l.startsWith('error:'));
      expect(errors).toHaveLength(1);
      expect(cli.lines.at(-1)).toBe(errors[0]);
      const runId = /run (\S+) stopped before it published/.exec(errors[0]!)?.[1];
      expect(errors[0]).toMatch(
        new RegExp(
          `^error: interrupted by ${signal}: run \\S+ stopped before it published, its requests ended and --out released; the next export to --out closes it, publishing what it finished, and fetches the reports it did not get$`,
        ),
      );
      const lock = await lockOf(out);
      expect(lock.run_id).toBe(runId);
      expect(lock.released_at).toBeDefined();
      expect(await manifests(out)).toEqual([]);

      const next = exportCli(simulator, out);
      const after = await next.exited;
      expect(after.code, next.lines.join('\n')).toBe(0);
      const written = await manifests(out);
      expect(written).toHaveLength(2);
      const recovered = JSON.parse(
        await readFile(join(out, 'runs', written.find((n) => n.includes(runId!))!), 'utf8'),
      ) as { recovered_by?: string; counts: { reports_failed: number } };
      expect(recovered.recovered_by).toBeDefined();
      expect(
        next.lines.some((l) =>
          l.includes(`closing a run left open by an interrupted exporter (run_id=${runId}`),
        ),
      ).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'ends a wait for another run to release --out (--wait-lock) at the first Ctrl-C, with one line: no run has started',
    async () => {
      const simulator = await slowSimulator();
      const out = await tempDir('interrupt-wait');
      const held = await OutputLock.acquire(new LocalStorage(out), {
        ttlMs: 60_000,
        newRunId: (at) => newRunId(at),
      });
      undo.push(() => held.release());
      const cli = exportCli(simulator, out, ['--wait-lock', '60']);
      // The line that says it waits: the CLI is loaded and waiting.
      await cli.line(/^waiting up to 1m 00s \(--wait-lock/);
      const sentAt = performance.now();
      cli.child.kill('SIGINT');
      const { code } = await cli.exited;
      // Not the 60 s of --wait-lock (the unit test of OutputLock holds the sleep between looks).
      expect(performance.now() - sentAt).toBeLessThan(10_000);
      expect(code).toBe(130);
      const errors = cli.lines.filter((l) => l.startsWith('error:'));
      expect(errors).toEqual([
        'error: interrupted by SIGINT while waiting for --out (--wait-lock), before a run started; nothing to close, the next export to --out starts afresh',
      ]);
      // The holder keeps its lock.
      await expect(held.check()).resolves.toBeUndefined();
    },
    TEST_TIMEOUT_MS,
  );
});
