import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IntegrationApiClient, type ReportOutcome } from '../../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { AccessDeniedError, AuthError } from '../../../shared/errors.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { SkippingClock } from '../../unit/api/fake-clock.js';
import { collect } from './harness.js';

describe('IntegrationApiClient against the simulator', () => {
  let sim: Simulator;

  beforeAll(async () => {
    sim = await startSimulator({
      seed: 5,
      campaigns: 3,
      jobsPerCampaign: 30,
      tryLaterJobs: 2,
      tryLaterAttempts: 2,
      invalidReportJobs: 2,
      forbiddenReportJobs: 1,
    });
  });
  afterAll(() => sim.close());
  beforeEach(() => {
    sim.setFaults({});
    sim.setRateLimit(null);
    sim.resetStats();
  });

  /** A client whose backoff sleeps are skipped (the simulator's answers still come over real sockets). */
  function client(
    apiKey = sim.keys.valid,
    extra: Partial<ConstructorParameters<typeof IntegrationApiClient>[0]> = {},
  ) {
    const clock = new SkippingClock();
    return new IntegrationApiClient({
      baseUrl: sim.url,
      apiKey,
      clock,
      limiter: new AdaptiveRateLimiter({ initialRate: 2_000, maxRate: 2_000, clock: new SkippingClock() }),
      ...extra,
    });
  }

  async function exportAll(api: IntegrationApiClient) {
    const outcomes = new Map<number, ReportOutcome>();
    for await (const campaign of api.campaigns()) {
      if (campaign.kind !== 'item') throw new Error(`not a campaign: ${JSON.stringify(campaign)}`);
      for await (const job of api.jobs(campaign.item.id)) {
        if (job.kind !== 'item') throw new Error(`not a job: ${JSON.stringify(job)}`);
        outcomes.set(job.item.id, await api.getReport(campaign.item.id, job.item.id));
      }
    }
    return outcomes;
  }

  it('lists every campaign and job and gets the outcome the dataset says for every report', async () => {
    const api = client();

    expect(await api.verify()).toEqual({ companyName: sim.dataset.company });
    const outcomes = await exportAll(api);

    const jobs = sim.dataset.campaigns.flatMap((c) => c.jobs);
    expect(outcomes.size).toBe(jobs.length);
    for (const job of jobs) {
      const outcome = outcomes.get(job.id);
      if (job.state === 'unpublished')
        expect(outcome).toMatchObject({ kind: 'not_ready', reason: 'not_published' });
      else if (job.state === 'survey_missing')
        expect(outcome).toMatchObject({ kind: 'not_ready', reason: 'survey_missing' });
      else if (job.state === 'no_sections')
        expect(outcome).toMatchObject({ kind: 'not_ready', reason: 'no_sections' });
      else if (job.forbidden) expect(outcome).toMatchObject({ kind: 'failed', retryable: false });
      else if (job.invalid) expect(outcome?.kind).toBe('invalid');
      else {
        expect(outcome?.kind, `job ${job.id}`).toBe('ok');
        if (outcome?.kind === 'ok') expect(outcome.raw).toStrictEqual(sim.dataset.reportOf(job.id));
      }
    }
    expect(api.stats().total).toBe(sim.stats.total);
  });

  it('keeps every raw list item exactly as served', async () => {
    const campaigns = await collect(client().campaigns());

    expect(campaigns.map((c) => c.raw)).toStrictEqual(sim.dataset.campaigns.map((c) => c.item));
  });

  it('gets every report through 5xx, resets and truncated bodies', async () => {
    sim.setFaults({ serverError: 0.15, reset: 0.1, truncate: 0.1 });
    const api = client();

    const outcomes = await exportAll(api);

    const failed = [...outcomes.values()].filter((o) => o.kind === 'failed' && o.retryable);
    expect(failed).toEqual([]);
    const stats = api.stats();
    expect(stats.retried).toBeGreaterThan(0);
    expect(stats.byStatus.error).toBeGreaterThan(0);
    expect(Object.keys(stats.byStatus).some((status) => status.startsWith('5'))).toBe(true);
  });

  it('retries scripted faults: 429, HTML 200, broken JSON', async () => {
    const job = sim.dataset.campaigns[0]?.jobs.find(
      (j) => j.state === 'published' && !j.invalid && !j.forbidden && j.tryLaterAttempts === 0,
    );
    if (!job) throw new Error('dataset without a plain published job');
    const path = new RegExp(`/jobs/${job.id}/report$`);
    sim.failNext(path, '429');
    sim.failNext(path, 'not_json_html');
    sim.failNext(path, 'invalid_json');
    const api = client();

    const outcome = await api.getReport(job.campaignId, job.id);

    expect(outcome.kind).toBe('ok');
    expect(api.stats()).toMatchObject({ total: 4, retried: 3 });
  });

  it('stops with the error_code on keys that are expired, restricted or revoked', async () => {
    await expect(client(sim.keys.expired).verify()).rejects.toMatchObject({
      name: 'AuthError',
      errorCode: 'API_KEY_EXPIRED',
    });
    await expect(collect(client(sim.keys.ip_restricted).campaigns())).rejects.toMatchObject({
      errorCode: 'IP_NOT_ALLOWED',
    });
    const domain = await client(sim.keys.domain_restricted)
      .getReport(1, 1)
      .catch((e: unknown) => e);
    expect(domain).toBeInstanceOf(AccessDeniedError);
    expect(domain).toMatchObject({ errorCode: 'DOMAIN_NOT_ALLOWED' });
  });

  it('follows a key rotation: the revoked key is re-read once and the new one is used', async () => {
    const sim2 = await startSimulator({ seed: 6, campaigns: 1, jobsPerCampaign: 3 });
    try {
      let current = sim2.keys.other_company;
      const api = new IntegrationApiClient({
        baseUrl: sim2.url,
        apiKey: current,
        refreshApiKey: async () => current,
      });
      expect((await api.verify()).companyName).not.toBe(sim2.dataset.company);

      sim2.revokeKey(sim2.keys.other_company);
      current = sim2.keys.valid;

      expect((await api.verify()).companyName).toBe(sim2.dataset.company);
      sim2.revokeKey(sim2.keys.valid);
      await expect(api.verify()).rejects.toBeInstanceOf(AuthError);
    } finally {
      await sim2.close();
    }
  });

  it('keeps 429s rare against a token bucket it is not told about', async () => {
    sim.setRateLimit({ ratePerSecond: 100, burst: 10 });
    const api = new IntegrationApiClient({
      baseUrl: sim.url,
      apiKey: sim.keys.valid,
      limiter: new AdaptiveRateLimiter(),
    });
    const jobs = sim.dataset.campaigns.flatMap((c) => c.jobs).slice(0, 80);
    const work = [...jobs, ...jobs, ...jobs, ...jobs];

    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let job = work[next++]; job !== undefined; job = work[next++]) {
          const outcome = await api.getReport(job.campaignId, job.id);
          expect(outcome.kind === 'failed' && outcome.retryable).toBe(false);
        }
      }),
    );

    const stats = api.stats();
    const throttled = stats.byStatus['429'] ?? 0;
    expect(stats.total - throttled).toBe(work.length);
    // Typically under 1%; generous here because this machine is shared (no timing flakes).
    expect(throttled / stats.total).toBeLessThan(0.05);
  });
});
