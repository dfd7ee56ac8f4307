/**
 * Client benchmark: how close the client keeps to a limit it is not told about, over real HTTP
 * against the simulator. Variants: a 50 req/s token bucket (burst 10) behind 0, 100, 250 and
 * 1,000 ms of latency; a fixed window of 500 requests per 10 s without headers (Retry-After
 * only), with Laravel's and with the IETF draft's; 200 per 5 s without headers over 2,000
 * reports; Laravel's windows of 50 per 1 s and 200 per 5 s that turn where a Redis key expires,
 * up to a second after the whole-second reset named. A fresh client fetches
 * reports with 128 callers, the CLI's default ceiling. Figures: utilisation (answered requests
 * per second over the allowed rate; for windows, from the first window's start to the last
 * one's, and `learnt_` once the turn is learnt: limiter-sim's LEARNING_WINDOWS), share of 429s,
 * the most requests in flight at once.
 *
 *     npx tsx test/bench/client.ts ["part of a variant's name"]
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { IntegrationApiClient } from '../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../shared/api/limiter.js';
import { RUN_DEFAULTS } from '../../shared/run-defaults.js';
import {
  type FixedWindowLimit,
  type RateLimit,
  type SimulatorStats,
  startSimulator,
} from '../simulator/index.js';
import { afterWindows, LEARNING_WINDOWS } from '../unit/api/limiter-sim.js';

const CALLERS = RUN_DEFAULTS.concurrency.value;

interface Variant {
  name: string;
  limit: RateLimit;
  latencyMs: number;
  /** ± ms of the latency (default ±20%). */
  jitterMs?: number;
  reports: number;
}

const BUCKET = { ratePerSecond: 50, burst: 10 };
const WINDOW = { windowRequests: 500, windowMs: 10_000 };
const VARIANTS: Variant[] = [
  ...[0, 100, 250, 1_000].map((latencyMs) => ({
    name: `bucket 50/s, ${latencyMs} ms`,
    limit: BUCKET,
    latencyMs,
    reports: latencyMs >= 1_000 ? 3_000 : 2_000,
  })),
  { name: 'bucket 50/s, 250 ± 100 ms', limit: BUCKET, latencyMs: 250, jitterMs: 100, reports: 2_000 },
  ...(['none', 'laravel', 'ietf'] as const).map((headers) => ({
    name: `window 500/10 s, ${headers} headers`,
    limit: { ...WINDOW, headers },
    latencyMs: 100,
    reports: 1_510,
  })),
  // Laravel's whole-second resets of windows that turn where a Redis key expires (the API).
  ...(
    [
      [50, 1_000, 30],
      [200, 5_000, 12],
    ] as const
  ).map(([windowRequests, windowMs, windows]) => ({
    name: `window ${windowRequests}/${windowMs / 1000} s, laravel headers, Redis turn`,
    limit: { windowRequests, windowMs, headers: 'laravel' as const, turn: 'exact' as const },
    latencyMs: 100,
    reports: windowRequests * windows,
  })),
  // The turn comes up to a second before the reset named, rounded up (express-rate-limit).
  {
    name: 'window 200/5 s, laravel headers, reset rounded up',
    limit: { windowRequests: 200, windowMs: 5_000, headers: 'laravel', turn: 'ceil' },
    latencyMs: 100,
    reports: 2_000,
  },
  // Retry-After only over a run of 2,000 requests (the runs), the learning included.
  {
    name: 'window 200/5 s, none headers, 2,000 reports',
    limit: { windowRequests: 200, windowMs: 5_000, headers: 'none' },
    latencyMs: 100,
    reports: 2_000,
  },
];

async function runVariant(variant: Variant): Promise<Record<string, number>> {
  const sim = await startSimulator({
    seed: 11,
    campaigns: Math.ceil(variant.reports / 100),
    jobsPerCampaign: 100,
    reportSize: 'tiny',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
  });
  try {
    const jobs = sim.dataset.campaigns
      .flatMap((campaign) => campaign.jobs.map((job) => ({ campaignId: campaign.id, jobId: job.id })))
      .slice(0, variant.reports);
    sim.setLatency(variant.latencyMs, variant.jitterMs);
    sim.setRateLimit(variant.limit);
    // The ceiling is above every limit here: the client must find the limit, not be held under it.
    const limiter = new AdaptiveRateLimiter({ maxRate: 100, concurrency: CALLERS });
    const client = new IntegrationApiClient({ baseUrl: sim.url, apiKey: sim.keys.valid, limiter });
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        for (let job = jobs[next++]; job !== undefined; job = jobs[next++]) {
          const outcome = await client.getReport(job.campaignId, job.jobId);
          if (outcome.kind === 'failed') throw outcome.error;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const stats = client.stats();
    const throttled = stats.byStatus['429'] ?? 0;
    const learnt = 'windowMs' in variant.limit ? afterLearning(sim.stats, variant.limit) : {};
    return {
      utilisation: utilisation(variant.limit, sim.stats.okTimes, sim.stats.windowStarts, started, seconds),
      ...learnt,
      share_429: throttled / stats.total,
      peak_in_flight: limiter.state().peakInFlight,
      requests: stats.total,
      duration_s: seconds,
    };
  } finally {
    await sim.close();
  }
}

function utilisation(
  limit: RateLimit,
  okTimes: number[],
  windowStarts: number[],
  started: number,
  seconds: number,
) {
  if ('ratePerSecond' in limit) return okTimes.length / seconds / limit.ratePerSecond;
  const allowed = (limit.windowRequests * 1000) / limit.windowMs;
  const first = windowStarts[0] ?? started;
  const last = windowStarts.at(-1) ?? started;
  const counted = okTimes.filter((t) => t >= first && t < last).length;
  return counted / ((last - first) / 1000) / allowed;
}

/**
 * A window's figures once the limiter learnt where it turns (limiter-sim's afterWindows); none
 * for a run too short to have two windows after the learning.
 */
function afterLearning(stats: SimulatorStats, limit: FixedWindowLimit): Record<string, number> {
  if (stats.windowStarts.length <= LEARNING_WINDOWS + 1) return {};
  const learnt = afterWindows(stats, limit);
  return { learnt_utilisation: learnt.utilisation, learnt_429_per_window: learnt.refusalsPerWindow };
}

/** Every variant's figures, flattened as `variant: figure` for the bench's report. */
export async function benchClient(only?: string): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  for (const variant of VARIANTS.filter((v) => only === undefined || v.name.includes(only))) {
    for (const [name, value] of Object.entries(await runVariant(variant)))
      figures[`${variant.name}: ${name}`] = value;
  }
  return figures;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.table(
    Object.entries(await benchClient(process.argv[2])).map(([name, value]) => ({
      name,
      value: Number(value.toFixed(3)),
    })),
  );
}
