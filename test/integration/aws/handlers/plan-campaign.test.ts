import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PlanMessage, UnitSchema } from '../../../../shared/export/state/records.js';
import {
  context,
  openRun,
  QUEUE_URLS,
  RUN_ID,
  sentBodies,
  sqsEvent,
  startTestbed,
  type Testbed,
} from './testbed.js';

type PlanCampaign = (event: SQSEvent, ctx: ReturnType<typeof context>) => Promise<SQSBatchResponse>;

const JOBS = 60;
const UNIT_SIZE = 5;

describe('plan-campaign', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let planCampaign: PlanCampaign;
  let message: (campaign: number) => PlanMessage;

  const sentUnits = () => sentBodies(sqs).map((body) => UnitSchema.parse(body));

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 2, jobsPerCampaign: JOBS },
      env: { UNIT_SIZE: String(UNIT_SIZE) },
    });
    await openRun(bed.storage);
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    planCampaign = (await import('../../../../functions/aws/plan-campaign.js'))
      .handler as unknown as PlanCampaign;
    message = (campaign) => ({ run_id: RUN_ID, dt: '2026-11-22', mode: 'full', campaign_id: campaign });
  });

  afterEach(() => sqs.reset());

  afterAll(async () => {
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  const campaignIds = () => bed.sim.dataset.campaigns.map((c) => c.id);

  it("cuts a campaign's jobs into units of UNIT_SIZE and sends them ten per batch", async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const [campaign] = campaignIds();

    const response = await planCampaign(
      sqsEvent([{ body: message(campaign ?? 0) }], QUEUE_URLS.plan),
      context('plan-campaign'),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    const batches = sqs.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input);
    expect(batches.map((b) => b.Entries?.length)).toEqual([10, 2]);
    expect(batches.every((b) => b.QueueUrl === QUEUE_URLS.report)).toBe(true);
    const units = sentUnits();
    expect(
      units.every((u) => u.jobs.length === UNIT_SIZE && u.run_id === RUN_ID && u.campaign_id === campaign),
    ).toBe(true);
    expect(new Set(units.map((u) => u.unit)).size).toBe(JOBS / UNIT_SIZE);
    const listed = bed.sim.dataset.campaign(campaign ?? 0)?.jobs.map((j) => j.id) ?? [];
    expect(units.flatMap((u) => u.jobs.map((j) => j.job_id)).sort()).toEqual([...listed].sort());
  });

  it("hands the run's schema contract on to every unit it sends, and none to a frozen run's", async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const [campaign] = campaignIds();
    const plan = (body: PlanMessage) =>
      planCampaign(sqsEvent([{ body }], QUEUE_URLS.plan), context('plan-campaign'));

    await plan({ ...message(campaign ?? 0), schema_contract: 'evolve' });
    const evolving = sentUnits();
    sqs.resetHistory();
    await plan(message(campaign ?? 0));
    const frozen = sentBodies(sqs) as Record<string, unknown>[];

    expect(evolving).toHaveLength(JOBS / UNIT_SIZE);
    for (const unit of evolving) expect(unit.schema_contract, unit.unit).toBe('evolve');
    expect(frozen).toHaveLength(JOBS / UNIT_SIZE);
    for (const unit of frozen) expect(unit, String(unit.unit)).not.toHaveProperty('schema_contract');
  });

  it('reports only the records it could not handle as batch item failures', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const [, campaign] = campaignIds();
    const event = sqsEvent(
      [
        { body: '{"run_id": "unfinished' },
        { body: message(campaign ?? 0) },
        { body: { ...message(campaign ?? 0), campaign_id: 'seven' } },
      ],
      QUEUE_URLS.plan,
    );

    const response = await planCampaign(event, context('plan-campaign'));

    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }, { itemIdentifier: 'm2' }] });
    expect(new Set(sentUnits().map((u) => u.campaign_id))).toEqual(new Set([campaign]));
  });

  it('hands the message back when SQS refuses a unit, so the campaign is planned again', async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [],
      Failed: [{ Id: '4', Code: 'InternalError', SenderFault: false }],
    });
    const [campaign] = campaignIds();

    const response = await planCampaign(
      sqsEvent([{ body: message(campaign ?? 0) }], QUEUE_URLS.plan),
      context('plan-campaign'),
    );

    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }] });
  });
});
