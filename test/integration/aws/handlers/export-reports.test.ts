/**
 * export-reports, one unit through its deliveries: exported at once, or handed back with a
 * longer visibility when reports are rate limited, resumed on redelivery without fetching or
 * writing a report twice; poison messages and a revoked key. The tests run in order.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ChangeMessageVisibilityCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Unit, UnitSummarySchema } from '../../../../shared/export/state/records.js';
import { STATE_KEYS, stagedStepKey } from '../../../../shared/layout.js';
import { METRIC } from '../../../../shared/metrics.js';
import { readRange } from '../../../../shared/storage/storage.js';
import { type DuckDb, openDuckDb, readParquet } from '../../../helpers/duckdb.js';
import type { SimJob } from '../../../simulator/index.js';
import {
  context,
  dataFiles,
  type ExportReports,
  keysUnder,
  openRun,
  QUEUE_URLS,
  RUN_ID,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

describe('export-reports', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let db: DuckDb;
  let exportReports: ExportReports;
  let addMetric: ReturnType<typeof vi.spyOn>;
  let published: SimJob[];

  const unit = (name: string, jobs: readonly SimJob[]): Unit => ({
    run_id: RUN_ID,
    dt: '2026-11-22',
    mode: 'full',
    campaign_id: jobs[0]?.campaignId ?? 0,
    unit: name,
    jobs: jobs.map((j) => ({ job_id: j.id, fp: `fp-${j.id}` })),
  });
  const summaryOf = async (name: string) => {
    const found = await bed.storage.get(STATE_KEYS.unit(RUN_ID, name));
    return found ? UnitSummarySchema.parse(JSON.parse(Buffer.from(found.body).toString())) : undefined;
  };
  const handBacks = () => sqs.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input);
  const requestsFor = (job: SimJob | undefined) => bed.sim.stats.reportRequestsByJob.get(job?.id ?? -1) ?? 0;

  /** A new container: its own limiter (the modules loaded afresh), the metrics spied on again. */
  const freshContainer = async () => {
    addMetric?.mockRestore();
    vi.resetModules();
    exportReports = (await import('../../../../functions/aws/export-reports.js'))
      .handler as unknown as ExportReports;
    const runtime = await import('../../../../functions/aws/runtime.js');
    addMetric = vi.spyOn(runtime.metrics, 'addMetric');
  };

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 12, unpublishedShare: 0, tryLaterJobs: 0 },
    });
    await openRun(bed.storage);
    db = await openDuckDb();
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    await freshContainer();
    published = bed.sim.dataset.campaigns[0]?.jobs.filter((j) => j.state === 'published') ?? [];
  });

  afterEach(() => {
    sqs.resetHistory();
    addMetric.mockClear();
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    secrets.restore();
    sqs.restore();
    await db?.close();
    await bed?.close();
  });

  it('stages one raw file and one Parquet file per table for a unit, and lets the message go', async () => {
    const response = await exportReports(
      sqsEvent([{ body: unit('c1-u0', published.slice(0, 3)) }]),
      context('export-reports'),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    expect(handBacks()).toEqual([]);
    // Staged, and listed in the unit's summary: nothing is visible before the run is published.
    expect(await dataFiles(bed.storage)).toEqual([]);
    const staged = (await summaryOf('c1-u0'))?.staged ?? [];
    // Named by unit, attempt and delivery: two deliveries at once never write one key.
    const stem = staged[0]?.key.replace(/^.*\//, '').replace(/\..*$/, '') ?? '';
    expect(stem).toMatch(/^c1-u0-a1-[0-9a-f]{8}$/);
    // One object for the delivery, its files one after another: the raw lines, then each table.
    expect(new Set(staged.map((f) => f.key))).toEqual(new Set([stagedStepKey(RUN_ID, 'reports', stem)]));
    expect(staged.map((f) => `${f.format}:${f.table_or_entity}`).slice(0, 2)).toEqual([
      'jsonl:reports',
      'parquet:reports',
    ]);
    expect(staged.map((f) => f.offset)).toEqual(
      staged.map((_, i) => staged.slice(0, i).reduce((n, f) => n + f.bytes, 0)),
    );
    const stagedKeys = await keysUnder(bed.storage, STATE_KEYS.staged(RUN_ID, ''));
    expect(stagedKeys.filter((key) => key.includes(stem))).toEqual([staged[0]?.key]);
    const summary = await summaryOf('c1-u0');
    expect(Object.values(summary?.jobs ?? {}).map((r) => r.outcome)).toEqual([
      'exported',
      'exported',
      'exported',
    ]);
  });

  it('hands a unit with a rate-limited report back with a longer visibility instead of sleeping', async () => {
    // One token, then 429 with a Retry-After of 10 s: longer than a Lambda waits (5 s).
    bed.sim.setRateLimit({ ratePerSecond: 0.1, burst: 1 });
    const jobs = published.slice(3, 5);

    const response = await exportReports(
      sqsEvent([{ body: unit('c1-u1', jobs), receiveCount: 3 }]),
      context('export-reports'),
    );

    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }] });
    const [handBack, ...more] = handBacks();
    expect(more).toEqual([]);
    expect(handBack).toMatchObject({ QueueUrl: QUEUE_URLS.report, ReceiptHandle: 'rh0' });
    // The third delivery: 30 s × 2², jittered between half and all of it.
    expect(handBack?.VisibilityTimeout).toBeGreaterThanOrEqual(60);
    expect(handBack?.VisibilityTimeout).toBeLessThanOrEqual(120);
    const outcomes = Object.values((await summaryOf('c1-u1'))?.jobs ?? {}).map((r) => r.outcome);
    expect(outcomes.sort()).toEqual(['exported', 'pending']);
    expect(requestsFor(jobs[0]) + requestsFor(jobs[1])).toBe(2); // the 429 was not retried in the Lambda
  });

  it('fetches only the pending report when the unit comes back, and writes no row twice', async () => {
    bed.sim.setRateLimit(null);
    // Back on another container: the one before holds every request for the API's 10 s
    // Retry-After (a Retry-After of more than a second holds them all).
    await freshContainer();
    const jobs = published.slice(3, 5);
    const before = jobs.map(requestsFor);

    const response = await exportReports(
      sqsEvent([{ body: unit('c1-u1', jobs), receiveCount: 4 }]),
      context('export-reports'),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    expect(jobs.map(requestsFor).reduce((a, b) => a + b) - before.reduce((a, b) => a + b)).toBe(1);
    const ids: bigint[] = [];
    const files = ((await summaryOf('c1-u1'))?.staged ?? []).filter(
      (f) => f.format === 'parquet' && f.table_or_entity === 'reports',
    );
    expect(files.map((f) => f.key.replace(/^.*-(a\d)-[0-9a-f]{8}\.staged$/, '$1'))).toEqual(['a1', 'a2']);
    for (const { key, offset = 0, bytes } of files) {
      const file = await readRange(bed.storage, key, offset, offset + bytes);
      for (const row of await readParquet(db, file ?? new Uint8Array())) ids.push(row.job_id as bigint);
    }
    expect(ids.map(Number).sort()).toEqual(jobs.map((j) => j.id).sort());
  });

  it('sends no request and writes no file for a unit delivered again after it was done', async () => {
    const filesBefore = await dataFiles(bed.storage);
    const requestsBefore = bed.sim.stats.total;

    const response = await exportReports(
      sqsEvent([{ body: unit('c1-u0', published.slice(0, 3)), receiveCount: 2 }]),
      context('export-reports'),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.total).toBe(requestsBefore);
    expect(await dataFiles(bed.storage)).toEqual(filesBefore);
  });

  it('fails only the poison records of a batch', async () => {
    const event = sqsEvent([
      { body: 'not json at all' },
      { body: unit('c1-u2', published.slice(5, 6)) },
      { body: { ...unit('c1-u3', published.slice(6, 7)), jobs: [] } },
    ]);

    const response = await exportReports(event, context('export-reports'));

    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }, { itemIdentifier: 'm2' }] });
    expect(await summaryOf('c1-u2')).toBeDefined();
    expect(handBacks()).toEqual([]);
  });

  it('stops a unit on a revoked key, counts an auth failure, and does not hand it back', async () => {
    bed.sim.revokeKey(bed.sim.keys.valid);

    const response = await exportReports(
      sqsEvent([{ body: unit('c1-u4', published.slice(7, 9)) }]),
      context('export-reports'),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    expect(handBacks()).toEqual([]);
    expect(addMetric).toHaveBeenCalledWith(METRIC.authFailures, 'Count', 1);
    expect((await summaryOf('c1-u4'))?.fatal).toMatchObject({ status: 401, error_code: 'INVALID_API_KEY' });
  });
});
