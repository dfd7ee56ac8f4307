/**
 * The client against the simulator's fixed windows and latency, over real HTTP and the real
 * clock: what the rate-limit headers and Little's law buy, measured on the wire.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IntegrationApiClient, type ReportOutcome } from '../../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

describe('the client against fixed windows and latency', () => {
  let sim: Simulator;
  let jobs: Array<{ campaignId: number; jobId: number }>;

  beforeAll(async () => {
    sim = await startSimulator({
      seed: 9,
      campaigns: 2,
      jobsPerCampaign: 60,
      reportSize: 'tiny',
      unpublishedShare: 0,
    });
    jobs = sim.dataset.campaigns.flatMap((c) => c.jobs.map((j) => ({ campaignId: c.id, jobId: j.id })));
  });
  afterAll(() => sim.close());
  beforeEach(() => {
    sim.setRateLimit(null);
    sim.setLatency(0);
    sim.resetStats();
  });

  /** Fetches `count` reports with `workers` at once; the outcomes and the limiter. */
  async function fetchReports(count: number, workers: number, options: { maxRetryAfterMs?: number } = {}) {
    const limiter = new AdaptiveRateLimiter({ initialRate: 100, maxRate: 200 });
    const client = new IntegrationApiClient({
      baseUrl: sim.url,
      apiKey: sim.keys.valid,
      limiter,
      ...(options.maxRetryAfterMs === undefined
        ? {}
        : { retry: { maxRetryAfterMs: options.maxRetryAfterMs } }),
    });
    const outcomes: ReportOutcome[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: workers }, async () => {
        for (let job = jobs[next++]; job !== undefined && next <= count; job = jobs[next++]) {
          outcomes.push(await client.getReport(job.campaignId, job.jobId));
        }
      }),
    );
    return { outcomes, limiter, client };
  }

  it('sends no request the IETF RateLimit fields say will be refused', async () => {
    sim.setRateLimit({ windowRequests: 25, windowMs: 1_500, headers: 'ietf' });

    const { outcomes } = await fetchReports(60, 16);

    expect(outcomes.filter((o) => o.kind === 'ok')).toHaveLength(60);
    expect(sim.stats.byStatus['429'] ?? 0).toBe(0);
    expect(sim.stats.windowStarts.length).toBe(3);
  });

  it("against Laravel's headers (reset only on a 429) is refused once per window at most", async () => {
    sim.setRateLimit({ windowRequests: 25, windowMs: 1_000, headers: 'laravel' });

    const { outcomes } = await fetchReports(60, 16);

    expect(outcomes.filter((o) => o.kind === 'ok')).toHaveLength(60);
    expect(sim.stats.byStatus['429'] ?? 0).toBeLessThanOrEqual(sim.stats.windowStarts.length);
  });

  it('keeps rate x latency in flight: 250 ms answers at 40 req/s need ~10 at once, not a fixed 4', async () => {
    sim.setLatency(250);
    sim.setRateLimit({ ratePerSecond: 40, burst: 40 });
    const limiter = new AdaptiveRateLimiter({ initialRate: 40, maxRate: 40 });
    const client = new IntegrationApiClient({ baseUrl: sim.url, apiKey: sim.keys.valid, limiter });

    await Promise.all(jobs.slice(0, 80).map((job) => client.getReport(job.campaignId, job.jobId)));

    // At 4 in flight: 80 x 0.25 s / 4 = 5 s; at 40 req/s, 2 s needs 40 x 0.25 = 10 at once. The
    // count in flight is the claim; a wall-clock bound would test this machine's load instead.
    expect(limiter.state().peakInFlight).toBeGreaterThanOrEqual(8);
    expect(sim.stats.byStatus['429'] ?? 0).toBe(0);
  });

  it('fails the calls at once, without sending them, when the window resets later than the caller waits', async () => {
    sim.setRateLimit({ windowRequests: 5, windowMs: 60_000, headers: 'laravel' });
    const started = performance.now();

    const { outcomes } = await fetchReports(8, 1, { maxRetryAfterMs: 5_000 });

    expect(outcomes.map((o) => o.kind)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'failed', 'failed', 'failed']);
    const failed = outcomes[5];
    expect(failed?.kind === 'failed' && failed.retryable).toBe(true);
    expect(failed?.kind === 'failed' && failed.error.message).toMatch(
      /longer than the 5000 ms this caller waits/,
    );
    // One probe learned the reset; the two calls after it sent nothing.
    expect(sim.stats.byStatus['429']).toBe(1);
    expect(sim.stats.total).toBe(6);
    // Nothing waited for the 5 s this caller allows (a wait would take at least that long).
    expect(performance.now() - started).toBeLessThan(4_500);
  });
});
