/**
 * plan-campaign's handler near its timeout (issue 31): the listing stops starting pages in time
 * to end within half its timeout, is checkpointed and handed on to a new plan message, not handed
 * back as a batch item failure (which would count towards the queue's maxReceiveCount), and the
 * next delivery lists from the page reached.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PlanMessage, PlanMessageSchema, UnitSchema } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { listAll } from '../../../../shared/storage/storage.js';
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

type PlanCampaign = (event: SQSEvent, ctx: Context) => Promise<SQSBatchResponse>;

/** Four pages of jobs (100 a page). */
const JOBS = 350;
/** plan-campaign's timeout. */
const TIMEOUT_MS = 300_000;
/** A slow API: each page of jobs takes 30 s of the invocation's time. */
const PAGE_MS = 30_000;
const UNIT_SIZE = 5;

describe('plan-campaign near its timeout', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let planCampaign: PlanCampaign;

  const sentTo = (queueUrl: string) => sentBodies(sqs, queueUrl);

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

  it('stops at the page that keeps it within half its timeout, checkpoints, sends the message again to the plan queue, and the next delivery lists from the page reached', async () => {
    const campaign = bed.sim.dataset.campaigns[0]!.id;
    const message: PlanMessage = { run_id: RUN_ID, dt: '2026-11-22', mode: 'full', campaign_id: campaign };
    bed.sim.resetStats();
    // Its time runs out as the simulator serves pages: 30 s each. After page 1 (30 s) it goes
    // on; after page 2 (60 s) it is past the 55 s after which no page starts: a third page
    // could take 65 s, and the wrap-up 30 s, past 150 s.
    const slowApi = {
      ...context('plan-campaign'),
      getRemainingTimeInMillis: () => TIMEOUT_MS - bed.sim.stats.byEndpoint.jobs * PAGE_MS,
    };

    const first = await planCampaign(
      sqsEvent([{ body: message, receiveCount: 3 }], QUEUE_URLS.plan),
      slowApi,
    );

    expect(first).toEqual({ batchItemFailures: [] });
    const [continuation, ...more] = sentTo(QUEUE_URLS.plan);
    expect(more).toEqual([]);
    expect(PlanMessageSchema.parse(continuation)).toEqual(message);
    expect(sentTo(QUEUE_URLS.report)).toEqual([]);
    expect(bed.sim.stats.byEndpoint.jobs).toBe(2);
    expect(await listAll(bed.storage, STATE_KEYS.listingPrefix(RUN_ID, campaign))).toHaveLength(1);

    // The continuation is a new message: its first delivery, with a whole invocation ahead.
    const second = await planCampaign(
      sqsEvent([{ body: continuation }], QUEUE_URLS.plan),
      context('plan-campaign'),
    );

    expect(second).toEqual({ batchItemFailures: [] });
    expect(bed.sim.stats.byEndpoint.jobs).toBe(4);
    expect(sentTo(QUEUE_URLS.plan)).toHaveLength(1);
    const units = sentTo(QUEUE_URLS.report).map((u) => UnitSchema.parse(u));
    const listed = bed.sim.dataset.campaign(campaign)?.jobs.map((j) => j.id) ?? [];
    expect(units.flatMap((u) => u.jobs.map((j) => j.job_id)).sort()).toEqual([...listed].sort());
    expect(units).toHaveLength(JOBS / UNIT_SIZE);
  });
});
