/** Counters of what the simulator received and answered, for assertions and benchmarks. */
import { performance } from 'node:perf_hooks';
import type { Route } from './routes.js';
import { pathId } from './routes.js';
import type { SimulatorStats } from './types.js';

export function emptyStats(): SimulatorStats {
  return {
    total: 0,
    byStatus: {},
    byEndpoint: { verify: 0, campaigns: 0, jobs: 0, report: 0 },
    reportRequestsByJob: new Map(),
    okTimes: [],
    throttledTimes: [],
    windowStarts: [],
  };
}

/** Clears the counters in place, so references held by callers see the reset. */
export function clearStats(stats: SimulatorStats): void {
  const fresh = emptyStats();
  stats.total = 0;
  stats.byStatus = fresh.byStatus;
  stats.byEndpoint = fresh.byEndpoint;
  stats.reportRequestsByJob.clear();
  stats.okTimes.length = 0;
  stats.throttledTimes.length = 0;
  stats.windowStarts.length = 0;
}

/** Counts a request when it arrives. */
export function countRequest(stats: SimulatorStats, route: Route | undefined): void {
  stats.total += 1;
  if (!route) return;
  stats.byEndpoint[route.endpoint] += 1;
  const jobId = route.endpoint === 'report' ? pathId(route.jobId) : undefined;
  if (jobId !== undefined)
    stats.reportRequestsByJob.set(jobId, (stats.reportRequestsByJob.get(jobId) ?? 0) + 1);
}

/** Counts how a request ended: an HTTP status, 'reset', 'truncated' or 'aborted' (client went away). */
export function countOutcome(
  stats: SimulatorStats,
  outcome: number | 'reset' | 'truncated' | 'aborted',
): void {
  const key = String(outcome);
  stats.byStatus[key] = (stats.byStatus[key] ?? 0) + 1;
  if (outcome === 200) stats.okTimes.push(performance.now());
  if (outcome === 429) stats.throttledTimes.push(performance.now());
}

/** Notes that a request opened a fixed rate-limit window. */
export function countWindowStart(stats: SimulatorStats): void {
  stats.windowStarts.push(performance.now());
}
