/**
 * Fixed windows on virtual time (test/unit/api/limiter-sim.ts): Laravel's whole-second headers
 * over windows of 1 s, 5 s and 60 s that turn on the second named (file stores), where a Redis
 * key expires (up to a second later) or up to a second before it (a reset rounded up), 100 ms of
 * latency (each one-way delay 25-50 ms), 128 callers, seeds 1-5. Figures from window 4 on (the
 * turns before it are the limiter's to learn): utilisation (answered requests over the allowed
 * rate), 429s per window; the same from window 2 on, the learning included; the whole run's
 * utilisation (from the first window's start) and share of 429s. Then windows named only by
 * Retry-After (no rate-limit fields; a window opened by its first request): runs of about 2,000
 * requests (12,000 at 60 s), figures of the whole run, the learning included (utilisation, share
 * of 429s), and from window 4 on where the run has windows enough. Deterministic: the same
 * figures on any machine.
 *
 *     npx tsx test/bench/windows.ts
 */
import { pathToFileURL } from 'node:url';
import type { WindowFacts } from '../../shared/api/window-facts.js';
import {
  afterWindows,
  LEARNING_WINDOWS,
  simulate,
  simulateWindows,
  type WindowLimit,
} from '../unit/api/limiter-sim.js';

const SEEDS = [1, 2, 3, 4, 5];
const TURN_NAMES = { exact: 'Redis turn', ceil: 'reset rounded up', second: 'whole-second turn' } as const;
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
  for (const turn of ['exact', 'ceil', 'second'] as const) {
    for (const { windowRequests, windowMs, windows } of WINDOWS) {
      const limit: WindowLimit = { windowRequests, windowMs, headers: 'laravel', turn };
      const runs = [];
      for (const seed of SEEDS) {
        const result = await simulateWindows(limit, windows, seed);
        const early = afterWindows(result, limit, 2);
        runs.push({
          ...afterWindows(result, limit),
          all429: result.throttled,
          whole: result.utilisation,
          share429: result.share429,
          fromWindow2: early.refusalsPerWindow,
          utilisationFrom2: early.utilisation,
        });
      }
      const utilisation = runs.map((r) => r.utilisation).sort((a, b) => a - b);
      const name = `${windowRequests}/${windowMs / 1000} s, ${TURN_NAMES[turn]}`;
      figures[`${name}: utilisation min`] = utilisation[0] ?? Number.NaN;
      figures[`${name}: utilisation median`] = utilisation[Math.floor(utilisation.length / 2)] ?? Number.NaN;
      figures[`${name}: 429 per window max`] = Math.max(...runs.map((r) => r.refusalsPerWindow));
      figures[`${name}: 429s of the run max`] = Math.max(...runs.map((r) => r.all429));
      figures[`${name}: whole run, utilisation min`] = Math.min(...runs.map((r) => r.whole));
      figures[`${name}: whole run, 429 share max`] = Math.max(...runs.map((r) => r.share429));
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

/** Windows' worth of requests in a short run: what a scheduled incremental run may last. */
const SHORT_RUN_WINDOWS = 3;

/** A run of `windows` windows' worth through `limit`, as simulateWindows, started from `facts`; with what the limiter knew at its end. */
async function shortRun(limit: WindowLimit, windows: number, seed: number, facts?: WindowFacts) {
  let learnt: WindowFacts | undefined;
  const result = await simulate({
    limit,
    items: limit.windowRequests * windows,
    workers: 128,
    latencyMs: 100,
    seed,
    limiter: { concurrency: 128, ...(facts && { windowFacts: facts }) },
    onAnswer: (_, limiter) => {
      learnt = limiter.windowFacts() ?? learnt;
    },
  });
  return { result, learnt };
}

/**
 * What the learning costs a run of 3 windows' worth of requests (issue 29, item 4), and what the
 * facts kept in the output's state (state/api-windows.json) save: the same run fresh, and started
 * from what an earlier run of 10 windows learnt (on another seed). Utilisation over the whole run
 * (answered requests over the allowed rate, first window to last), its 429s, its duration.
 */
export async function benchShortRuns(): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  for (const turn of ['exact', 'ceil', 'second', 'Retry-After only'] as const) {
    for (const { windowRequests, windowMs } of WINDOWS) {
      const limit: WindowLimit =
        turn === 'Retry-After only'
          ? { windowRequests, windowMs, headers: 'none' }
          : { windowRequests, windowMs, headers: 'laravel', turn };
      const kind = turn === 'Retry-After only' ? turn : TURN_NAMES[turn];
      const name = `${SHORT_RUN_WINDOWS} windows of ${windowRequests}/${windowMs / 1000} s, ${kind}`;
      const runs = { fresh: [] as SimulationFigures[], kept: [] as SimulationFigures[] };
      let learnt = 0;
      for (const seed of SEEDS) {
        const earlier = await shortRun(limit, 10, seed + 100);
        if (earlier.learnt) learnt++;
        runs.fresh.push(figuresOf((await shortRun(limit, SHORT_RUN_WINDOWS, seed)).result));
        runs.kept.push(figuresOf((await shortRun(limit, SHORT_RUN_WINDOWS, seed, earlier.learnt)).result));
      }
      figures[`${name}: earlier runs that learnt facts (of ${SEEDS.length})`] = learnt;
      for (const [kind, list] of Object.entries(runs)) {
        figures[`${name}, ${kind}: utilisation min`] = Math.min(...list.map((r) => r.utilisation));
        figures[`${name}, ${kind}: 429s max`] = Math.max(...list.map((r) => r.throttled));
        const durations = list.map((r) => r.durationS).sort((a, b) => a - b);
        figures[`${name}, ${kind}: duration s median`] =
          durations[Math.floor(durations.length / 2)] ?? Number.NaN;
        figures[`${name}, ${kind}: duration s max`] = durations.at(-1) ?? Number.NaN;
      }
    }
  }
  return figures;
}

interface SimulationFigures {
  utilisation: number;
  throttled: number;
  durationS: number;
}
const figuresOf = ({ utilisation, throttled, durationS }: SimulationFigures): SimulationFigures => ({
  utilisation,
  throttled,
  durationS,
});

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const table = (figures: Record<string, number>) =>
    console.table(
      Object.entries(figures).map(([name, value]) => ({ name, value: Number(value.toFixed(3)) })),
    );
  table(await benchWindows());
  table(await benchShortRuns());
}
