/**
 * plan-campaign's handler near its timeout (issue 31): the listing is checkpointed and handed
 * on to a new plan message, not handed back as a batch item failure (which would count towards
 * the queue's maxReceiveCount), and the next delivery lists from the page reached.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATE_KEYS } from '../../../../shared/export/layout.js';
import { HAND_ON_RESERVE_MS } from '../../../../shared/export/run/job-listing.js';
import { type PlanMessage, PlanMessageSchema, UnitSchema } from '../../../../shared/export/state/records.js';
import { listAll } from '../../../../shared/storage/storage.js';
import { context, openRun, QUEUE_URLS, RUN_ID, sqsEvent, startTestbed, type Testbed } from './testbed.js';

type PlanCampaign = (event: SQSEvent, ctx: Context) => Promise<SQSBatchResponse>;

/** Two pages of jobs (100 a page). */
const JOBS = 150;
const UNIT_SIZE = 5;

describe('plan-campaign near its timeout', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let planCampaign: PlanCampaign;

  const sentTo = (queueUrl: string) =>
    sqs
      .commandCalls(SendMessageBatchCommand)
      .filter((c) => c.args[0].input.QueueUrl === queueUrl)
      .flatMap((c) => c.args[0].input.Entries ?? [])
      .map((e) => JSON.parse(e.MessageBody ?? '') as unknown);

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: JOBS },
      env: { UNIT_SIZE: String(UNIT_SIZE) },
    });
    await openRun(bed.storage);
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    planCampaign = (await import('../../../../functions/aws/plan-campaign.js'))
      .handler as unknown as PlanCampaign;
  });

  afterAll(async () => {
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  it('checkpoints, sends the message again to the plan queue, and the next delivery lists from the page reached', async () => {
    const campaign = bed.sim.dataset.campaigns[0]!.id;
    const message: PlanMessage = { run_id: RUN_ID, dt: '2026-11-22', mode: 'full', campaign_id: campaign };
    // Less left than a page may take: the listing stops after its first page.
    const late = { ...context('plan-campaign'), getRemainingTimeInMillis: () => HAND_ON_RESERVE_MS - 1 };
    bed.sim.resetStats();

    const first = await planCampaign(sqsEvent([{ body: message, receiveCount: 3 }], QUEUE_URLS.plan), late);

    expect(first).toEqual({ batchItemFailures: [] });
    const [continuation, ...more] = sentTo(QUEUE_URLS.plan);
    expect(more).toEqual([]);
    expect(PlanMessageSchema.parse(continuation)).toEqual(message);
    expect(sentTo(QUEUE_URLS.report)).toEqual([]);
    expect(bed.sim.stats.byEndpoint.jobs).toBe(1);
    expect(await listAll(bed.storage, STATE_KEYS.listingPrefix(RUN_ID, campaign))).toHaveLength(1);

    // The continuation is a new message: its first delivery, with a whole invocation ahead.
    const second = await planCampaign(
      sqsEvent([{ body: continuation }], QUEUE_URLS.plan),
      context('plan-campaign'),
    );

    expect(second).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.byEndpoint.jobs).toBe(2);
    expect(sentTo(QUEUE_URLS.plan)).toHaveLength(1);
    const units = sentTo(QUEUE_URLS.report).map((u) => UnitSchema.parse(u));
    const listed = bed.sim.dataset.campaign(campaign)?.jobs.map((j) => j.id) ?? [];
    expect(units.flatMap((u) => u.jobs.map((j) => j.job_id)).sort()).toEqual([...listed].sort());
    expect(units).toHaveLength(JOBS / UNIT_SIZE);
  });
});
