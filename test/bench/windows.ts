/**
 * Fixed windows on virtual time (test/unit/api/limiter-sim.ts): Laravel's whole-second headers
 * over windows of 1 s, 5 s and 60 s that turn on the second named (file stores) or where a Redis
 * key expires (up to a second later), 100 ms of latency (each one-way delay 25-50 ms), 128
 * callers, seeds 1-5. Figures from window 4 on (the turns before it are the limiter's to learn):
 * utilisation (answered requests over the allowed rate), 429s per window; the same from window 2
 * on, the learning included; and the 429s of the whole run. Then windows named only by
 * Retry-After (no rate-limit fields; a window opened by its first request): runs of about 2,000
 * requests (12,000 at 60 s), figures of the whole run, the learning included (utilisation, share
 * of 429s), and from window 4 on where the run has windows enough. Deterministic: the same
 * figures on any machine.
 *
 *     npx tsx test/bench/windows.ts
 */
import { pathToFileURL } from 'node:url';
import {
  afterWindows,
  LEARNING_WINDOWS,
  simulateWindows,
  type WindowLimit,
} from '../unit/api/limiter-sim.js';

const SEEDS = [1, 2, 3, 4, 5];
const WINDOWS = [
  { windowRequests: 50, windowMs: 1_000, windows: 40 },
  { windowRequests: 200, windowMs: 5_000, windows: 20 },
  { windowRequests: 3_000, windowMs: 60_000, windows: 10 },
];

/** Retry-After only: about 2,000 requests a run (the runs), four windows at 60 s. */
const RETRY_AFTER_WINDOWS = [
  { windowRequests: 50, windowMs: 1_000, windows: 40 },
  { windowRequests: 200, windowMs: 5_000, windows: 10 },
  { windowRequests: 500, windowMs: 10_000, windows: 4 },
  { windowRequests: 3_000, windowMs: 60_000, windows: 4 },
];

/** Every variant's figures over the seeds: worst and median utilisation, worst 429s per window. */
export async function benchWindows(): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  for (const turn of ['exact', 'second'] as const) {
    for (const { windowRequests, windowMs, windows } of WINDOWS) {
      const limit: WindowLimit = { windowRequests, windowMs, headers: 'laravel', turn };
      const runs = [];
      for (const seed of SEEDS) {
        const result = await simulateWindows(limit, windows, seed);
        const early = afterWindows(result, limit, 2);
        runs.push({
          ...afterWindows(result, limit),
          all429: result.throttled,
          fromWindow2: early.refusalsPerWindow,
          utilisationFrom2: early.utilisation,
        });
      }
      const utilisation = runs.map((r) => r.utilisation).sort((a, b) => a - b);
      const name = `${windowRequests}/${windowMs / 1000} s, ${turn === 'exact' ? 'Redis' : 'whole-second'} turn`;
      figures[`${name}: utilisation min`] = utilisation[0] ?? Number.NaN;
      figures[`${name}: utilisation median`] = utilisation[Math.floor(utilisation.length / 2)] ?? Number.NaN;
      figures[`${name}: 429 per window max`] = Math.max(...runs.map((r) => r.refusalsPerWindow));
      figures[`${name}: 429s of the run max`] = Math.max(...runs.map((r) => r.all429));
      // The same from window 2 on, the learning's two turns included.
      figures[`${name}: from window 2, utilisation min`] = Math.min(...runs.map((r) => r.utilisationFrom2));
      figures[`${name}: from window 2, 429 per window max`] = Math.max(...runs.map((r) => r.fromWindow2));
    }
  }
  for (const { windowRequests, windowMs, windows } of RETRY_AFTER_WINDOWS) {
    const limit: WindowLimit = { windowRequests, windowMs, headers: 'none' };
    const runs = [];
    for (const seed of SEEDS) {
      const result = await simulateWindows(limit, windows, seed);
      // From window 4 on needs two windows after it (the last one is cut short by the end).
      const learnt = windows > LEARNING_WINDOWS + 1 ? afterWindows(result, limit) : undefined;
      runs.push({ result, learnt });
    }
    const utilisation = runs.map((r) => r.result.utilisation).sort((a, b) => a - b);
    const name = `${windowRequests}/${windowMs / 1000} s, Retry-After only`;
    figures[`${name}: utilisation min`] = utilisation[0] ?? Number.NaN;
    figures[`${name}: utilisation median`] = utilisation[Math.floor(utilisation.length / 2)] ?? Number.NaN;
    figures[`${name}: 429 share max`] = Math.max(...runs.map((r) => r.result.share429));
    figures[`${name}: 429s of the run max`] = Math.max(...runs.map((r) => r.result.throttled));
    if (runs.every((r) => r.learnt !== undefined)) {
      figures[`${name}: from window 4, utilisation min`] = Math.min(
        ...runs.map((r) => r.learnt?.utilisation ?? 0),
      );
      figures[`${name}: from window 4, 429 per window max`] = Math.max(
        ...runs.map((r) => r.learnt?.refusalsPerWindow ?? 0),
      );
    }
  }
  return figures;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.table(
    Object.entries(await benchWindows()).map(([name, value]) => ({ name, value: Number(value.toFixed(3)) })),
  );
}
