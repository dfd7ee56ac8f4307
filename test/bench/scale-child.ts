/**
 * One finish-run invocation of the scale bench, in a process of its own (scale.ts starts it with
 * the heap limit finish-run's memory gives): by default bundled as the functions are and run as
 * `node --max-old-space-size=<MB> scale-child.js <config.json>` with their NODE_OPTIONS
 * (scale-bundle.ts), or `node --max-old-space-size=<MB> --import tsx test/bench/scale-child.ts
 * <config.json>` (SCALE_LOADER=tsx). Prints one JSON line of figures. Imports only what finishing
 * needs. With `--baseline` instead of a config: loads its modules, prints `{"baseline_rss_mb"}`
 * and exits (what the loader and the modules cost before any work).
 */

import { readFile } from 'node:fs/promises';
import { closeRuns } from '../../shared/export/run/close-runs.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { finishRun } from '../../shared/export/run/finish-run.js';
import { finisherLimits } from '../../shared/export/run/publish-closing.js';
import { silentLog } from '../../shared/log.js';
import { LocalStorage } from '../../shared/storage/local.js';
import { S3Storage } from '../../shared/storage/s3.js';
import type { Storage } from '../../shared/storage/storage.js';
import { loopbackS3Client } from '../helpers/loopback-s3.js';

export type Target =
  | { kind: 'folder'; root: string }
  | { kind: 's3'; endpoint: string; bucket: string; prefix: string };

export interface ChildConfig {
  target: Target;
  runId: string;
  /** `close-runs`: as the finish-run Lambda does (closeRuns); `finish-run`: finishRun(force) on the run. */
  via: 'close-runs' | 'finish-run';
  /** The invocation's time (Lambda's timeout), for a finisher that watches its remaining time. */
  timeoutMs: number;
}

export interface ChildFigures {
  /** This call closed the run (false: it stopped, or another invocation must go on). */
  closed: boolean;
  seconds: number;
  cpu_seconds: number;
  /** CPU of the whole process, module loading included. */
  process_cpu_seconds: number;
  rss_before_mb: number;
  peak_rss_mb: number;
  peak_heap_mb: number;
  reads: number;
  writes: number;
  lists: number;
  deletes: number;
}

/** A run older than any deadline would never be closed for it: the run is complete anyway. */
const RUN_DEADLINE_MS = 6 * 3_600_000;
/** finish-run's timeout (infra/constructs/functions.ts), when SCALE_TIMEOUT_S does not set one. */
const FINISH_TIMEOUT_MS = 900_000;

/**
 * The one call of an invocation: what the scheduler's look does. Kept alone so that the
 * finisher's new options (a deadline from `timeoutMs`, a partial return) go in here only.
 * Returns true when this call closed the run.
 */
export async function invokeFinish(deps: ExportDeps, config: ChildConfig): Promise<boolean> {
  const announce = async () => {};
  if (config.via === 'finish-run') {
    return (await finishRun(deps, config.runId, { force: true, announce })) !== undefined;
  }
  const now = deps.now().getTime();
  const { closed, failures } = await closeRuns(deps, {
    now,
    // As the Lambda does: hand on at FINISH_HAND_ON_SHARE of its timeout, under the closing lease.
    ...finisherLimits(now, config.timeoutMs > 0 ? config.timeoutMs : FINISH_TIMEOUT_MS),
    deadlineMs: RUN_DEADLINE_MS,
    queuesDrained: async () => true,
    announce,
  });
  if (failures.length > 0) throw failures[0]!.error;
  return closed.some((c) => c.manifest.run_id === config.runId);
}

function storageOf(target: Target): Storage {
  if (target.kind === 'folder') return new LocalStorage(target.root);
  const client = loopbackS3Client(target.endpoint);
  return new S3Storage({ bucket: target.bucket, prefix: target.prefix, client });
}

/**
 * The process's RSS high-water mark (VmHWM). Not `resourceUsage().maxRSS`: Linux carries that
 * over from the forked copy of the parent (publish.ts measures the same way).
 */
export async function rssHighWaterMb(pid: number | 'self' = 'self'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
}

async function child(configPath: string): Promise<void> {
  const config = JSON.parse(await readFile(configPath, 'utf8')) as ChildConfig;
  const storage = storageOf(config.target);
  const deps: ExportDeps = {
    api: () => {
      throw new Error('finishing a run sends no API request');
    },
    storage,
    log: silentLog,
    now: () => new Date(),
  };
  let heap = 0;
  const sampler = setInterval(() => {
    heap = Math.max(heap, process.memoryUsage().heapUsed);
  }, 20);
  const before = await rssHighWaterMb();
  const cpu = process.cpuUsage();
  const t = performance.now();
  let closed: boolean;
  try {
    closed = await invokeFinish(deps, config);
  } finally {
    // Or the timer keeps a failed invocation's process alive.
    clearInterval(sampler);
  }
  const seconds = (performance.now() - t) / 1000;
  const used = process.cpuUsage(cpu);
  const all = process.cpuUsage();
  heap = Math.max(heap, process.memoryUsage().heapUsed);
  const figures: ChildFigures = {
    closed,
    seconds,
    cpu_seconds: (used.user + used.system) / 1e6,
    process_cpu_seconds: (all.user + all.system) / 1e6,
    rss_before_mb: before,
    peak_rss_mb: await rssHighWaterMb(),
    peak_heap_mb: heap / 2 ** 20,
    ...storage.stats(),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
}

/** This module run as a process (its source under tsx, or its bundle), not imported by scale.ts. */
const MAIN = /scale-child\.(ts|c?js)$/;

const [configPath] = process.argv.slice(2);
if (configPath === '--baseline' && MAIN.test(process.argv[1] ?? '')) {
  // Static imports are all loaded (and a bundle's modules evaluated) before this line runs.
  void rssHighWaterMb().then((mb) => process.stdout.write(`${JSON.stringify({ baseline_rss_mb: mb })}\n`));
} else if (configPath && MAIN.test(process.argv[1] ?? '')) {
  child(configPath).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
