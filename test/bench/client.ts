/**
 * Client benchmark: how close the adaptive rate limiter keeps to a limit it is not told about.
 * The simulator enforces a 50 req/s token bucket with burst 10 (answering 429 with Retry-After,
 * as it does); a fresh client fetches ~2,000 reports with 8 workers. Figures: the achieved
 * rate of answered (non-429) requests, its share of the 50 req/s, and the share of 429s.
 *
 *     npx tsx test/bench/client.ts
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { IntegrationApiClient } from '../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../shared/api/limiter.js';
import { startSimulator } from '../simulator/index.js';

const LIMIT = { ratePerSecond: 50, burst: 10 };
const CAMPAIGNS = 20;
const JOBS_PER_CAMPAIGN = 100;
const WORKERS = 8;

export async function benchClient(): Promise<Record<string, number>> {
  const sim = await startSimulator({
    seed: 11,
    campaigns: CAMPAIGNS,
    jobsPerCampaign: JOBS_PER_CAMPAIGN,
    reportSize: 'tiny',
  });
  try {
    const jobs = sim.dataset.campaigns.flatMap((campaign) =>
      campaign.jobs.map((job) => ({ campaignId: campaign.id, jobId: job.id })),
    );
    // Every bucket starts full when the limit is set: the client meets the burst, then the rate.
    sim.setRateLimit(LIMIT);
    const client = new IntegrationApiClient({
      baseUrl: sim.url,
      apiKey: sim.keys.valid,
      limiter: new AdaptiveRateLimiter({ concurrency: WORKERS }),
    });
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        for (let job = jobs[next++]; job !== undefined; job = jobs[next++]) {
          const outcome = await client.getReport(job.campaignId, job.jobId);
          if (outcome.kind === 'failed') throw outcome.error;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const stats = client.stats();
    const throttled = stats.byStatus['429'] ?? 0;
    const answered = stats.total - throttled;
    return {
      achieved_rate: answered / seconds,
      utilisation: answered / seconds / LIMIT.ratePerSecond,
      share_429: throttled / stats.total,
      requests: stats.total,
      duration_s: seconds,
    };
  } finally {
    await sim.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const figures = await benchClient();
  console.table(
    Object.fromEntries(Object.entries(figures).map(([name, value]) => [name, Number(value.toFixed(3))])),
  );
}
