/**
 * plan-campaign (plan queue): list one campaign's jobs, write them, compare with the state,
 * and send one report-queue message per unit of reports to fetch. A listing too long for one
 * invocation is checkpointed and handed on to a new message on the plan queue.
 */
import type { Context, SQSEvent } from 'aws-lambda';
import { planCampaignStep } from '../../shared/export/run/plan-campaign.js';
import { runStep } from '../../shared/export/run/step.js';
import { PlanMessageSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { eachMessage, sendAll } from './queue.js';
import { apiDeps, clients, coreLog, countFatal, env, lambdaHandler, logger } from './runtime.js';

export async function planCampaignHandler(event: SQSEvent, context: Context) {
  // The invocation's whole time, taken first: the listing stops starting pages in time to end
  // within half of it (job-listing.ts `listingStopMs`).
  const deadline = {
    remainingMs: () => context.getRemainingTimeInMillis(),
    timeoutMs: context.getRemainingTimeInMillis(),
  };
  const deps = await apiDeps();
  const planQueueUrl = required(env, 'PLAN_QUEUE_URL');
  const source = { sqs: clients.sqs, queueUrl: planQueueUrl, log: coreLog };
  return eachMessage(event, source, async (record) => {
    const message = PlanMessageSchema.parse(JSON.parse(record.body));
    // A listing out of retries (5xx, 429) throws retryable: the message comes back later.
    const planned = await runStep(deps, message.run_id, (d) =>
      planCampaignStep(d, message, { unitSize: env.UNIT_SIZE, deadline }),
    );
    if (!planned.ran) {
      logger.warn('plan message of a finished run dropped', { run_id: message.run_id });
      return;
    }
    const step = planned.value;
    if (step.kind === 'handed-on') {
      // The rest goes on in a new message, not this one handed back as a batch item failure:
      // each hand-back would count towards the queue's maxReceiveCount, and a listing of more
      // invocations than that would end in the DLQ. A new message starts at one delivery, and
      // each hands on only after a page of progress, so the chain ends with the listing. Sent
      // before this one is deleted: a crash in between leaves two deliveries of one message,
      // which resume from the same pieces.
      await sendAll(clients.sqs, planQueueUrl, [message]);
      return;
    }
    const { record: plan, units } = step;
    countFatal(plan.fatal);
    // If sending fails, the message comes back and the stored plan's units are sent again.
    await sendAll(clients.sqs, required(env, 'REPORT_QUEUE_URL'), units);
    logger.info('campaign planned', {
      run_id: message.run_id,
      campaign_id: message.campaign_id,
      units: units.length,
    });
  });
}

export const handler = lambdaHandler(planCampaignHandler);
