/**
 * One export-reports unit of the unit-memory bench, in a process of its own: unit-memory.ts
 * bundles this file as the functions are bundled and starts it with export-reports' own
 * NODE_OPTIONS and glibc setting at a given memory (scale-bundle.ts). It runs `exportUnit` on
 * the unit of `<config.json>`, as the handler does for each message, and prints one JSON line of
 * figures: peak RSS (VmHWM) overall and when the unit's last report was in, CPU and wall time of
 * the fetches and of the wrap-up after them (encoding, staging, summary). With `--baseline`:
 * loads its modules, prints `{"baseline_rss_mb"}` and exits.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { cliDeps } from '../../functions/cli/deps.js';
import { exportUnit } from '../../shared/export/run/export-unit.js';
import type { Unit } from '../../shared/export/state/records.js';
import { silentLog } from '../../shared/log.js';

export interface UnitChildConfig {
  baseUrl: string;
  apiKey: string;
  /** The folder the run was started and planned in. */
  out: string;
  unit: Unit;
  /** Requests in flight at most (export-reports: REPORT_CONCURRENCY). */
  concurrency: number;
  /** Requests per second at most: the pace one invocation gets (10,000: unpaced). */
  maxRate: number;
}

export interface UnitChildFigures {
  exported: number;
  rss_before_mb: number;
  /** VmHWM once the unit's last report was in (fetched, flattened, its raw line compressed). */
  rss_fetched_mb: number;
  /** VmHWM at the end: the unit's peak, encoding and staging included. */
  peak_rss_mb: number;
  peak_heap_mb: number;
  fetch_seconds: number;
  fetch_cpu_seconds: number;
  wrap_up_seconds: number;
  wrap_up_cpu_seconds: number;
  staged_bytes: number;
}

/** VmHWM (MB), read synchronously: it is taken inside a report's callback. */
const rssHighWaterMb = (): number =>
  Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) / 1024;

const cpuSeconds = (since?: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

async function child(configPath: string): Promise<void> {
  const config = JSON.parse(await readFile(configPath, 'utf8')) as UnitChildConfig;
  const { baseUrl, apiKey, out, concurrency, maxRate, unit } = config;
  const deps = cliDeps({ baseUrl, apiKey, out, concurrency, maxRate, log: silentLog });
  let heap = 0;
  const sampler = setInterval(() => {
    heap = Math.max(heap, process.memoryUsage().heapUsed);
  }, 20);
  const before = rssHighWaterMb();
  const cpu = process.cpuUsage();
  const t = performance.now();
  let left = unit.jobs.length;
  let fetched = { seconds: 0, cpu: 0, rss: 0 };
  const onReport = () => {
    heap = Math.max(heap, process.memoryUsage().heapUsed);
    if (--left === 0)
      fetched = { seconds: (performance.now() - t) / 1000, cpu: cpuSeconds(cpu), rss: rssHighWaterMb() };
  };
  try {
    const summary = await exportUnit(deps, unit, { resume: true, concurrency, onReport });
    const seconds = (performance.now() - t) / 1000;
    const used = cpuSeconds(cpu);
    const figures: UnitChildFigures = {
      exported: Object.values(summary.jobs).filter((r) => r.outcome === 'exported').length,
      rss_before_mb: before,
      rss_fetched_mb: fetched.rss,
      peak_rss_mb: rssHighWaterMb(),
      peak_heap_mb: Math.max(heap, process.memoryUsage().heapUsed) / 2 ** 20,
      fetch_seconds: fetched.seconds,
      fetch_cpu_seconds: fetched.cpu,
      wrap_up_seconds: seconds - fetched.seconds,
      wrap_up_cpu_seconds: used - fetched.cpu,
      staged_bytes: summary.staged.reduce((sum, f) => sum + f.bytes, 0),
    };
    process.stdout.write(`${JSON.stringify(figures)}\n`);
  } finally {
    clearInterval(sampler);
  }
}

/** This module run as a process (its source under tsx, or its bundle), not imported. */
const MAIN = /unit-memory-child\.(ts|c?js)$/;

const [configPath] = process.argv.slice(2);
if (configPath && MAIN.test(process.argv[1] ?? '')) {
  const run =
    configPath === '--baseline'
      ? Promise.resolve(process.stdout.write(`${JSON.stringify({ baseline_rss_mb: rssHighWaterMb() })}\n`))
      : child(configPath);
  run.catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
