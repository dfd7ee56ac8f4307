/**
 * export-reports near its timeout (issue 31): an invocation sends requests for the first part
 * of its time only (`exportSendMs`), so that it ends within half its timeout; a unit cut short
 * by that is sent again as a new message (not handed back, which would count towards the
 * queue's maxReceiveCount), and the next delivery fetches only the reports left.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ChangeMessageVisibilityCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_TIMEOUT_MS } from '../../../../shared/api/client.js';
import { EXPORT_WRAP_UP_MS, exportSendMs } from '../../../../shared/export/run/export-unit.js';
import { MAX_TIMEOUT_SHARE } from '../../../../shared/export/run/time-budget.js';
import { type Unit, UnitSchema, UnitSummarySchema } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import {
  context,
  type ExportReports,
  loadExportReports,
  openRun,
  QUEUE_URLS,
  RUN_ID,
  sentBodies,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

const JOBS = 10;
/** export-reports' timeout. */
const TIMEOUT_MS = 300_000;
/** A slow API: each report takes 30 s of the invocation's time. */
const REPORT_MS = 30_000;

describe('export-reports near its timeout', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let exportReports: ExportReports;

  const sentTo = (queueUrl: string) => sentBodies(sqs, queueUrl);

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 2 * JOBS, unpublishedShare: 0, tryLaterJobs: 0 },
      // One report at a time, so that the time each takes is the invocation's, in order.
      env: { REPORT_CONCURRENCY: '1' },
    });
    await openRun(bed.storage);
    exportReports = await loadExportReports(bed, secrets, sqs);
  });

  afterAll(async () => {
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  it('sends no request past its time for them, hands the unit on in a new message, and the next delivery fetches only the rest', async () => {
    const jobs = bed.sim.dataset.campaigns[0]!.jobs.filter((j) => j.state === 'published').slice(0, JOBS);
    expect(jobs).toHaveLength(JOBS);
    const unit: Unit = {
      run_id: RUN_ID,
      dt: '2026-11-22',
      mode: 'full',
      campaign_id: jobs[0]!.campaignId,
      unit: 'c1-u0',
      jobs: jobs.map((j) => ({ job_id: j.id, fp: `fp-${j.id}` })),
    };
    bed.sim.resetStats();
    // Its time runs out as the simulator serves reports, 30 s each: requests go until 100 s of
    // the 300 (a request then may take 30 s, the unit's wrap-up 20 s, and the invocation still
    // ends by 150 s), so the fourth, sent at 90 s, is the last.
    const slowApi = {
      ...context('export-reports'),
      getRemainingTimeInMillis: () => TIMEOUT_MS - bed.sim.stats.byEndpoint.report * REPORT_MS,
    };
    const sentBefore = Math.ceil(exportSendMs(TIMEOUT_MS) / REPORT_MS);
    expect(sentBefore).toBe(4);
    const lastSentAt = (sentBefore - 1) * REPORT_MS;
    expect(lastSentAt + DEFAULT_TIMEOUT_MS + EXPORT_WRAP_UP_MS).toBeLessThanOrEqual(
      MAX_TIMEOUT_SHARE * TIMEOUT_MS,
    );

    const first = await exportReports(sqsEvent([{ body: unit, receiveCount: 4 }]), slowApi);

    expect(first).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.byEndpoint.report).toBe(sentBefore);
    // Handed on, not handed back: a new message, and no visibility change on this one.
    expect(sentTo(QUEUE_URLS.report).map((m) => UnitSchema.parse(m))).toEqual([unit]);
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand)).toEqual([]);
    const key = STATE_KEYS.unit(RUN_ID, unit.unit);
    const summary = UnitSummarySchema.parse(
      JSON.parse(Buffer.from((await bed.storage.get(key))!.body).toString()),
    );
    const outcomes = Object.values(summary.jobs).map((r) => r.outcome);
    expect(outcomes.filter((o) => o === 'exported')).toHaveLength(sentBefore);
    expect(outcomes.filter((o) => o === 'pending')).toHaveLength(JOBS - sentBefore);

    // The new message's first delivery, with a whole invocation ahead.
    const second = await exportReports(sqsEvent([{ body: unit }]), context('export-reports'));

    expect(second).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.byEndpoint.report).toBe(JOBS);
    expect(sentTo(QUEUE_URLS.report)).toHaveLength(1);
    const done = UnitSummarySchema.parse(
      JSON.parse(Buffer.from((await bed.storage.get(key))!.body).toString()),
    );
    expect(Object.values(done.jobs).every((r) => r.outcome === 'exported')).toBe(true);
    for (const job of jobs) expect(bed.sim.stats.reportRequestsByJob.get(job.id)).toBe(1);
  });

  it('hands on a unit its batch reached after the time for requests, without a request and without counting a failure', async () => {
    const jobs = bed.sim.dataset.campaigns[0]!.jobs.filter((j) => j.state === 'published').slice(
      JOBS,
      2 * JOBS,
    );
    const unitOf = (name: string, part: typeof jobs): Unit => ({
      run_id: RUN_ID,
      dt: '2026-11-22',
      mode: 'full',
      campaign_id: part[0]!.campaignId,
      unit: name,
      jobs: part.map((j) => ({ job_id: j.id, fp: `fp-${j.id}` })),
    });
    const slow = unitOf('c1-u1', jobs.slice(0, 6));
    const late = unitOf('c1-u2', jobs.slice(6, 8));
    sqs.resetHistory();
    bed.sim.resetStats();
    const slowApi = {
      ...context('export-reports'),
      getRemainingTimeInMillis: () => TIMEOUT_MS - bed.sim.stats.byEndpoint.report * REPORT_MS,
    };

    const result = await exportReports(sqsEvent([{ body: slow }, { body: late, receiveCount: 4 }]), slowApi);

    expect(result).toEqual({ batchItemFailures: [] });
    // The first unit used the time (four reports); the second sent nothing, and both go on.
    expect(bed.sim.stats.byEndpoint.report).toBe(4);
    expect(sentTo(QUEUE_URLS.report).map((m) => UnitSchema.parse(m).unit)).toEqual(['c1-u1', 'c1-u2']);
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand)).toEqual([]);
  });
});
