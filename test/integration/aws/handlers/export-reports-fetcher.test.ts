/**
 * export-reports with fetcher slots (REPORT_FETCHERS, shared/api/fetcher-slots.ts) on a local
 * DynamoDB: an invocation that finds the slot taken fetches nothing, writes nothing and hands
 * each unit on in a new message with a DelaySeconds (no delivery counted, nothing handed back);
 * one that gets the slot fetches and releases it.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FETCHER_WAIT_SECONDS, fetcherKey } from '../../../../shared/api/fetcher-slots.js';
import type { Unit } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { type LocalDynamo, startDynalite } from '../../../helpers/dynalite.js';
import {
  context,
  type ExportReports,
  loadExportReports,
  openRun,
  QUEUE_URLS,
  RUN_ID,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

const TABLE = 'exporter-budget';
const STAGE = 'prod';
const SLOT = { pk: { S: fetcherKey(STAGE, 0) } };

describe('export-reports with one fetcher slot', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let dynamo: LocalDynamo;
  let exportReports: ExportReports;
  let units: Unit[];

  beforeAll(async () => {
    dynamo = await startDynalite();
    await dynamo.createBudgetTable(TABLE);
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 6, unpublishedShare: 0, tryLaterJobs: 0 },
      env: {
        REQUEST_BUDGET_TABLE: TABLE,
        AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
        REPORT_FETCHERS: '1',
        STAGE,
      },
    });
    await openRun(bed.storage);
    exportReports = await loadExportReports(bed, secrets, sqs);
    const jobs = bed.sim.dataset.campaigns[0]!.jobs.filter((j) => j.state === 'published');
    units = [jobs.slice(0, 3), jobs.slice(3, 6)].map((part, i) => ({
      run_id: RUN_ID,
      dt: '2026-11-22',
      mode: 'full',
      campaign_id: part[0]!.campaignId,
      unit: `c1-u${i}`,
      jobs: part.map((j) => ({ job_id: j.id, fp: `fp-${j.id}` })),
    }));
  });

  afterAll(async () => {
    secrets.restore();
    sqs.restore();
    await bed?.close();
    await dynamo?.close();
    delete process.env.REQUEST_BUDGET_TABLE;
    delete process.env.AWS_ENDPOINT_URL_DYNAMODB;
    delete process.env.REPORT_FETCHERS;
  });

  it('hands every unit on with a delay, fetching, writing and handing back nothing, while another invocation holds the slot', async () => {
    const admin = dynamo.client();
    // Another invocation holds the slot for the next minute.
    await admin.send(
      new PutItemCommand({
        TableName: TABLE,
        Item: { ...SLOT, holder: { S: 'other' }, until: { N: String(Date.now() + 60_000) } },
      }),
    );
    bed.sim.resetStats();
    sqs.resetHistory();

    const result = await exportReports(
      sqsEvent([{ body: units[0] }, { body: units[1], receiveCount: 4 }]),
      context('export-reports'),
    );

    // Both messages succeed (Lambda deletes each once), each unit in a new message, delayed.
    expect(result).toEqual({ batchItemFailures: [] });
    const entries = sqs
      .commandCalls(SendMessageBatchCommand)
      .filter((c) => c.args[0].input.QueueUrl === QUEUE_URLS.report)
      .flatMap((c) => c.args[0].input.Entries ?? []);
    expect(entries.map((e) => JSON.parse(e.MessageBody ?? ''))).toEqual(units);
    for (const e of entries) {
      expect(e.DelaySeconds).toBeGreaterThanOrEqual(FETCHER_WAIT_SECONDS / 2);
      expect(e.DelaySeconds).toBeLessThanOrEqual(FETCHER_WAIT_SECONDS);
    }
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand)).toEqual([]);
    expect(sqs.commandCalls(DeleteMessageCommand)).toEqual([]);
    expect(sqs.commandCalls(DeleteMessageBatchCommand)).toEqual([]);
    expect(bed.sim.stats.total).toBe(0);
    for (const unit of units)
      expect(await bed.storage.get(STATE_KEYS.unit(RUN_ID, unit.unit))).toBeUndefined();
    // The other holder's item is left as it was.
    const item = await admin.send(new GetItemCommand({ TableName: TABLE, Key: SLOT, ConsistentRead: true }));
    expect(item.Item?.holder?.S).toBe('other');
    await admin.send(new DeleteItemCommand({ TableName: TABLE, Key: SLOT }));
  });

  it('fetches once the slot is free, and releases it at the end', async () => {
    bed.sim.resetStats();
    sqs.resetHistory();

    const result = await exportReports(sqsEvent([{ body: units[0] }]), context('export-reports'));

    expect(result).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.byEndpoint.report).toBe(units[0]!.jobs.length);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toEqual([]);
    expect(await bed.storage.get(STATE_KEYS.unit(RUN_ID, units[0]!.unit))).toBeDefined();
    const item = await dynamo
      .client()
      .send(new GetItemCommand({ TableName: TABLE, Key: SLOT, ConsistentRead: true }));
    expect(item.Item).toBeUndefined();
  });
});
