/**
 * What the handlers write to CloudWatch (EMF lines on stdout): nothing, and no warning, for an
 * invocation that put no metric; a run's metrics when finish-run closes it; and finish-run's
 * heartbeat on every look, for the NoFinishedRun alarm.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { METRIC } from '../../../../shared/metrics.js';
import {
  type ConsoleCapture,
  captureConsole,
  context,
  METRICS_ON,
  QUEUE_URLS,
  RUN_ID,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

type Handler<E, R> = (event: E, ctx: ReturnType<typeof context>) => Promise<R>;
type SqsHandler = Handler<SQSEvent, SQSBatchResponse>;

const EMPTY_METRICS_WARNING = 'No application metrics to publish';

describe('metrics of the handlers', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  const events = mockClient(EventBridgeClient);
  let bed: Testbed;
  let output: ConsoleCapture;
  let startRun: Handler<unknown, Record<string, unknown>>;
  let planCampaign: SqsHandler;
  let exportReports: SqsHandler;
  let finishRun: Handler<unknown, { finished: string[] }>;

  /** The bodies sent to a queue since the last reset. */
  const sent = (queueUrl: string) =>
    sqs
      .commandCalls(SendMessageBatchCommand)
      .filter((c) => c.args[0].input.QueueUrl === queueUrl)
      .flatMap((c) => c.args[0].input.Entries ?? [])
      .map((e) => ({ body: e.MessageBody ?? '' }));
  const warnings = () => output.lines.filter((line) => line.includes(EMPTY_METRICS_WARNING));

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 4, unpublishedShare: 0, tryLaterJobs: 0 },
      env: METRICS_ON,
    });
    output = captureConsole();
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    sqs.on(GetQueueAttributesCommand).resolves({ Attributes: { ApproximateNumberOfMessages: '1' } });
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    startRun = (await import('../../../../functions/aws/start-run.js')).handler as unknown as typeof startRun;
    planCampaign = (await import('../../../../functions/aws/plan-campaign.js'))
      .handler as unknown as SqsHandler;
    exportReports = (await import('../../../../functions/aws/export-reports.js'))
      .handler as unknown as SqsHandler;
    finishRun = (await import('../../../../functions/aws/finish-run.js'))
      .handler as unknown as typeof finishRun;
  });

  afterEach(() => output.clear());

  afterAll(async () => {
    vi.restoreAllMocks();
    secrets.restore();
    sqs.restore();
    events.restore();
    await bed?.close();
  });

  it('writes neither metrics nor a warning for an invocation that put no metric', async () => {
    // A plan message of a run that has finished (it has no record): dropped, nothing counted.
    const message = { run_id: RUN_ID, dt: '2026-11-22', mode: 'full', campaign_id: 1 };

    const response = await planCampaign(sqsEvent([{ body: message }], QUEUE_URLS.plan), context('plan'));

    expect(response).toEqual({ batchItemFailures: [] });
    expect(output.metrics()).toEqual({});
    expect(warnings()).toEqual([]);
  });

  it("puts finish-run's heartbeat on every look, also when it closes no run", async () => {
    const result = await finishRun({}, context('finish-run'));

    expect(result).toEqual({ finished: [] });
    const hours = output.metrics()[METRIC.hoursSinceFinishedRun];
    // No run has finished yet: counted from this first look.
    expect(hours).toHaveLength(1);
    expect(hours?.[0]).toBeGreaterThanOrEqual(0);
    expect(hours?.[0]).toBeLessThan(0.01);
    expect(warnings()).toEqual([]);
  });

  it("puts a run's metrics when finish-run closes it, and no warning on the way", async () => {
    sqs.resetHistory();
    const started = await startRun({ mode: 'full' }, context('start-run'));
    await planCampaign(sqsEvent(sent(QUEUE_URLS.plan), QUEUE_URLS.plan), context('plan'));
    const units = sent(QUEUE_URLS.report);
    expect(units.length).toBeGreaterThan(0);
    await exportReports(sqsEvent(units), context('export-reports'));
    expect(output.metrics()).toEqual({});

    const result = await finishRun({}, context('finish-run'));

    expect(result).toEqual({ finished: [started.run_id] });
    const metrics = output.metrics();
    expect(metrics[METRIC.runsSucceeded]).toEqual([1]);
    const [entry] = events.commandCalls(PutEventsCommand).flatMap((c) => c.args[0].input.Entries ?? []);
    const { counts } = JSON.parse(entry?.Detail ?? '{}');
    expect(counts.reports_exported).toBeGreaterThan(0);
    expect(metrics[METRIC.reportsExported]).toEqual([counts.reports_exported]);
    expect(metrics[METRIC.reportsNotReady]).toEqual([counts.reports_not_ready]);
    expect(metrics[METRIC.apiRequests]?.[0]).toBeGreaterThan(counts.reports_exported);
    expect(metrics[METRIC.hoursSinceFinishedRun]).toEqual([0]);
    expect(warnings()).toEqual([]);
  });
});
