/**
 * The API windows a Lambda container keeps in the output's state (state/api-windows.json):
 * export-reports writes what its limiter learnt after a unit, and a new container reads it once,
 * before its first request, so that its limiter meets the API's windows without learning them.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiWindowsRecord, readWindowFacts } from '../../../../shared/export/state/api-windows.js';
import type { Unit } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import type { SimJob } from '../../../simulator/index.js';
import {
  context,
  type ExportReports,
  loadExportReports,
  openRun,
  RUN_ID,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

/** Reports per unit: four windows' worth of the API's limit, enough for a limiter to learn the turn. */
const LIMIT = 10;
const UNIT_JOBS = 4 * LIMIT;

describe('export-reports and the API windows kept in the output state', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let published: SimJob[];

  const unit = (index: number): Unit => ({
    run_id: RUN_ID,
    dt: '2026-11-22',
    mode: 'full',
    campaign_id: published[0]?.campaignId ?? 0,
    unit: `c1-u${index}`,
    jobs: published
      .slice(index * UNIT_JOBS, (index + 1) * UNIT_JOBS)
      .map((j) => ({ job_id: j.id, fp: `fp-${j.id}` })),
  });
  const throttled = () => bed.sim.stats.byStatus['429'] ?? 0;

  /** A new container (a fresh module registry) exports unit `index`; with its debug lines and 429s. */
  async function inNewContainer(index: number) {
    vi.resetModules();
    const exportReports: ExportReports = await loadExportReports(bed, secrets, sqs);
    const runtime = await import('../../../../functions/aws/runtime.js');
    const debug = vi.spyOn(runtime.logger, 'debug');
    const before = throttled();
    const response = await exportReports(sqsEvent([{ body: unit(index) }]), context('export-reports'));
    expect(response).toEqual({ batchItemFailures: [] });
    const debugLines = debug.mock.calls.map((call) => call as unknown[]);
    debug.mockRestore();
    return { throttled: throttled() - before, debugLines };
  }

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 2 * UNIT_JOBS, unpublishedShare: 0, tryLaterJobs: 0 },
    });
    await openRun(bed.storage);
    published = bed.sim.dataset.campaigns[0]?.jobs.filter((j) => j.state === 'published') ?? [];
    bed.sim.setRateLimit({ windowRequests: LIMIT, windowMs: 1_000, headers: 'laravel', turn: 'exact' });
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  let learning = 0;

  it('keeps what a container learnt after its unit, under the API it learnt from', async () => {
    expect(await bed.storage.get(STATE_KEYS.apiWindows)).toBeUndefined();
    learning = (await inNewContainer(0)).throttled;
    const found = await bed.storage.get(STATE_KEYS.apiWindows);
    const record = JSON.parse(Buffer.from(found!.body).toString()) as ApiWindowsRecord;
    expect(record).toMatchObject({
      base_url: bed.sim.url,
      facts: { limit: LIMIT, turn: 'first-request', source: 'headers' },
    });
    expect(Buffer.from(found!.body).toString()).not.toContain(bed.sim.keys.valid);
  });

  it('starts a new container from them: it reads them before its first request and meets fewer 429s', async () => {
    const kept = await readWindowFacts(bed.storage, bed.sim.url, silentLog);
    const { throttled: after, debugLines } = await inNewContainer(1);
    expect(debugLines).toContainEqual([
      'the limiter starts from the API windows learnt before',
      expect.objectContaining({ ...kept }),
    ]);
    expect(after).toBeLessThan(learning);
  });
});
