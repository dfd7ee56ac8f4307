/**
 * finish-run: which open runs it closes (complete; drained and past the grace period; overdue)
 * and which it leaves open, and the ExportRunFinished event it puts for a closed run. Runs are
 * made by the core's steps against the simulator and the local S3; the queues' depth is mocked.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ExportDeps } from '../../../../shared/export/run/context.js';
import { exportUnit } from '../../../../shared/export/run/export-unit.js';
import { planCampaign } from '../../../../shared/export/run/plan-campaign.js';
import { startRun } from '../../../../shared/export/run/start-run.js';
import type { DriftEntry } from '../../../../shared/export/schema-drift.js';
import { ManifestSchema } from '../../../../shared/export/state/manifest.js';
import { encodeRecord, UnitSummarySchema } from '../../../../shared/export/state/records.js';
import type { SchemaContract } from '../../../../shared/export/tables.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { METRIC } from '../../../../shared/metrics.js';
import { openRunKeys } from '../../../helpers/records.js';
import { BUCKET, context, keysUnder, PREFIX, QUEUE_URLS, startTestbed, type Testbed } from './testbed.js';

type FinishRun = (event: unknown, ctx: ReturnType<typeof context>) => Promise<{ finished: string[] }>;

const MINUTE = 60_000;
const DT = '2026-11-22';

describe('finish-run', () => {
  const sqs = mockClient(SQSClient);
  const events = mockClient(EventBridgeClient);
  let bed: Testbed;
  let finishRun: FinishRun;
  let addMetric: ReturnType<typeof vi.spyOn>;
  let depsAt: (ageMs: number) => ExportDeps;

  /** Queue depth as GetQueueAttributes reports it, for both queues. */
  const queuesHold = (visible: number) =>
    sqs.on(GetQueueAttributesCommand).resolves({
      Attributes: {
        ApproximateNumberOfMessages: String(visible),
        ApproximateNumberOfMessagesNotVisible: '0',
        ApproximateNumberOfMessagesDelayed: '0',
      },
    });

  /** A run started `ageMs` ago, planned; `exported` says whether its units ran. */
  async function makeRun(ageMs: number, exported: boolean, schemaContract?: SchemaContract): Promise<string> {
    const deps = depsAt(ageMs);
    const started = await startRun(deps, {
      mode: 'full',
      dt: DT,
      driver: 'queues',
      lock: 'unlocked',
      ...(schemaContract && { schemaContract }),
    });
    for (const campaignId of started.record.campaign_ids) {
      const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId }, 5);
      if (exported) for (const unit of planned.units) await exportUnit(deps, unit, { resume: true });
    }
    return started.run.run_id;
  }

  /** Runs with records and no tombstone. */
  const openRunIds = async () =>
    new Set(openRunKeys(await keysUnder(bed.storage, STATE_KEYS.runsPrefix)).map((k) => k.split('/')[2]));
  const announced = () => events.commandCalls(PutEventsCommand).flatMap((c) => c.args[0].input.Entries ?? []);

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 2, jobsPerCampaign: 6 },
      env: { RUN_DEADLINE_MINUTES: '10' },
    });
    finishRun = (await import('../../../../functions/aws/finish-run.js')).handler as unknown as FinishRun;
    const runtime = await import('../../../../functions/aws/runtime.js');
    addMetric = vi.spyOn(runtime.metrics, 'addMetric');
    depsAt = (ageMs) => ({
      ...runtime.exportDeps({ apiKey: bed.sim.keys.valid }),
      now: () => new Date(Date.now() - ageMs),
    });
  });

  afterEach(() => {
    sqs.reset();
    events.reset();
    addMetric.mockClear();
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    sqs.restore();
    events.restore();
    await bed?.close();
  });

  it('closes a complete run: manifest, metrics, and an ExportRunFinished event naming the manifest', async () => {
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    const runId = await makeRun(0, true);

    const result = await finishRun({}, context('finish-run'));

    expect(result).toEqual({ finished: [runId] });
    expect(sqs.commandCalls(GetQueueAttributesCommand)).toHaveLength(0); // complete: no need to look
    const [entry, ...more] = announced();
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      Source: 'campaign-report-exporter',
      DetailType: 'ExportRunFinished',
      EventBusName: 'exporter-bus',
    });
    const detail = JSON.parse(entry?.Detail ?? '{}');
    const manifestKey = `runs/dt=${DT}/${runId}.json`;
    const stored = await bed.storage.get(manifestKey);
    const manifest = ManifestSchema.parse(JSON.parse(Buffer.from(stored?.body ?? []).toString()));
    expect(detail).toEqual({
      // The stack sets STAGE; this testbed leaves it to its default.
      stage: 'prod',
      run_id: runId,
      dt: DT,
      mode: 'full',
      status: manifest.status,
      bucket: BUCKET,
      manifest_key: `${PREFIX}${manifestKey}`,
      counts: manifest.counts,
      files: manifest.files.map((f) => ({ ...f, key: `${PREFIX}${f.key}` })),
    });
    // One file per table and raw entity that has rows, published before the manifest.
    expect(manifest.files.map((f) => `${f.format}:${f.table_or_entity}`)).toEqual(
      expect.arrayContaining(['jsonl:campaigns', 'jsonl:jobs', 'jsonl:reports', 'parquet:reports']),
    );
    for (const file of manifest.files) {
      expect(file.key).toMatch(new RegExp(`^(parquet|raw)/${file.table_or_entity}/dt=${DT}/${runId}-0\\.`));
      expect((await bed.storage.get(file.key))?.body.byteLength).toBe(file.bytes);
    }
    expect(manifest.counts.jobs).toBe(12);
    expect(addMetric).toHaveBeenCalledWith(METRIC.reportsExported, 'Count', manifest.counts.reports_exported);
    expect(await openRunIds()).not.toContain(runId);
  });

  it("puts an evolve run's drift metrics and its drift in short in the event; the run still succeeds", async () => {
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    const runId = await makeRun(0, true, 'evolve');
    // An evolve run whose every unit saw an unlisted job_status (export-reports fills `drift`).
    const unitKeys = (await keysUnder(bed.storage, `${STATE_KEYS.runsPrefix}${runId}/units/`)).filter((k) =>
      k.endsWith('.json'),
    );
    expect(unitKeys.length).toBeGreaterThan(1);
    for (const [i, key] of unitKeys.entries()) {
      const unit = UnitSummarySchema.parse(
        JSON.parse(Buffer.from((await bed.storage.get(key))!.body).toString()),
      );
      const drift: DriftEntry[] = [
        {
          path: 'job.job_status',
          kind: 'unlisted_value',
          count: 1,
          reports: 1,
          first_job_id: 100 + i,
          seen: ['9'],
        },
      ];
      await bed.storage.put(key, encodeRecord({ ...unit, drift }));
    }

    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [runId] });

    const stored = await bed.storage.get(`runs/dt=${DT}/${runId}.json`);
    const manifest = ManifestSchema.parse(JSON.parse(Buffer.from(stored?.body ?? []).toString()));
    expect(manifest.status).toBe('succeeded');
    expect(manifest.schema_drift).toEqual([
      {
        path: 'job.job_status',
        kind: 'unlisted_value',
        count: unitKeys.length,
        reports: unitKeys.length,
        first_job_id: 100,
        seen: ['9'],
      },
    ]);
    expect(addMetric).toHaveBeenCalledWith(METRIC.schemaDriftPaths, 'Count', 1);
    expect(addMetric).toHaveBeenCalledWith(METRIC.schemaDriftReports, 'Count', unitKeys.length);
    // The first run to have it: new, what the SchemaDrift alarm watches (a later run with it puts 0).
    expect(addMetric).toHaveBeenCalledWith(METRIC.schemaDriftNewPaths, 'Count', 1);
    const detail = JSON.parse(announced()[0]?.Detail ?? '{}');
    expect(detail).toMatchObject({
      schema_contract: 'evolve',
      schema_drift: [
        {
          kind: 'unlisted_value',
          paths: 1,
          count: unitKeys.length,
          top: [
            { path: 'job.job_status', reports: unitKeys.length, count: unitKeys.length, first_job_id: 100 },
          ],
        },
      ],
    });
  });

  it('leaves an incomplete run open while its queues still hold messages', async () => {
    queuesHold(3);
    const runId = await makeRun(3 * MINUTE, false);

    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [] });
    expect(sqs.commandCalls(GetQueueAttributesCommand)[0]?.args[0].input.QueueUrl).toBe(QUEUE_URLS.plan);
    expect(announced()).toEqual([]);
    expect(await openRunIds()).toContain(runId);
  });

  it('closes a run whose queues look empty on two looks in a row, counting the jobs it never reached as failed', async () => {
    queuesHold(0);
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-2' }] });
    const young = await makeRun(0, false);
    const open = await openRunIds();
    const [old] = [...open].filter((id) => id !== young);

    // SQS counts lag: one empty look only marks the runs.
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [] });
    expect(await openRunIds()).toEqual(open);
    const result = await finishRun({}, context('finish-run'));

    expect(new Set(result.finished)).toEqual(open);
    const details = announced().map((e) => JSON.parse(e.Detail ?? '{}'));
    expect(details.find((d) => d.run_id === old)).toMatchObject({
      status: 'partial',
      counts: { jobs: 12, reports_failed: 12 },
    });
    expect(await openRunIds()).toEqual(new Set());
  });

  it('keeps a marked run open when its queues fill again', async () => {
    queuesHold(0);
    const run = await makeRun(0, false);
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [] });
    queuesHold(3);
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [] });
    queuesHold(0);
    // The mark was cleared when the queues filled: the next empty look marks again.
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [] });
    expect(await openRunIds()).toContain(run);
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-9' }] });
    expect((await finishRun({}, context('finish-run'))).finished).toEqual([run]);
  });

  it('closes an overdue run even while its queues hold messages, and counts it unfinished', async () => {
    queuesHold(5);
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-3' }] });
    const overdue = await makeRun(11 * MINUTE, false);

    const result = await finishRun({}, context('finish-run'));

    expect(result).toEqual({ finished: [overdue] });
    expect(addMetric).toHaveBeenCalledWith(METRIC.runsUnfinished, 'Count', 1);
  });

  it('fails the invocation when EventBridge refuses the event, and keeps the run to announce it again', async () => {
    queuesHold(1);
    events
      .on(PutEventsCommand)
      .resolves({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'InternalFailure' }] });
    const run = await makeRun(0, true);

    const failed = finishRun({}, context('finish-run'));
    await expect(failed).rejects.toThrow(/1 run\(s\) could not be finished/);
    await expect(failed).rejects.toHaveProperty(
      'cause.message',
      expect.stringMatching(/EventBridge refused/),
    );
    expect(await openRunIds()).toContain(run);
  });
});
