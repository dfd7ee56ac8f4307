/**
 * plan-campaign (plan queue): list one campaign's jobs, write them, compare with the state,
 * and send one report-queue message per unit of reports to fetch. A listing too long for one
 * invocation is checkpointed and handed on to a new message on the plan queue. The same queue
 * carries a run's start whose campaign listing start-run handed on: listed on from its pieces,
 * the run recorded and its plan messages sent, or handed on again.
 */
import type { Context, SQSEvent } from 'aws-lambda';
import { listingTimeUp } from '../../shared/export/run/campaign-listing.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { ListingDeadline } from '../../shared/export/run/job-listing.js';
import { planCampaignStep } from '../../shared/export/run/plan-campaign.js';
import { sendPlans } from '../../shared/export/run/run-plans.js';
import { continueStart } from '../../shared/export/run/start-run.js';
import { runStep } from '../../shared/export/run/step.js';
import { PlanQueueMessageSchema, type StartListingMessage } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { eachMessage, sendAll } from './queue.js';
import { countFatal, type HandlerRuntime, lambdaHandler, lambdaRuntime } from './runtime.js';

export async function planCampaignHandler(
  rt: HandlerRuntime,
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) {
  const { env, log: logger } = rt;
  // The invocation's whole time, taken first: the listing stops starting pages in time to end
  // within half of it (job-listing.ts `listingStopMs`).
  const deadline = {
    remainingMs: () => context.getRemainingTimeInMillis(),
    timeoutMs: context.getRemainingTimeInMillis(),
  };
  const deps = await rt.apiDeps();
  const planQueueUrl = required(env, 'PLAN_QUEUE_URL');
  const source = { sqs: rt.sqs, queueUrl: planQueueUrl, log: rt.log, random: rt.random };
  return eachMessage(event, source, async (record) => {
    const body = PlanQueueMessageSchema.parse(JSON.parse(record.body));
    if (!('campaign_id' in body)) return continueRunStart(rt, deps, body, deadline);
    const message = body;
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
      await sendAll(rt.sqs, planQueueUrl, [message]);
      return;
    }
    const { record: plan, units } = step;
    countFatal(rt, plan.fatal);
    // If sending fails, the message comes back and the stored plan's units are sent again.
    await sendAll(rt.sqs, required(env, 'REPORT_QUEUE_URL'), units);
    logger.info('campaign planned', {
      run_id: message.run_id,
      campaign_id: message.campaign_id,
      units: units.length,
    });
  });
}

/**
 * A run's start handed on (its campaign listing, or its plan messages): goes on from where it
 * stands and, if time is up again, hands on to a new message, for the reason given above.
 */
async function continueRunStart(
  rt: HandlerRuntime,
  deps: ExportDeps,
  message: StartListingMessage,
  deadline: ListingDeadline,
): Promise<void> {
  const logger = rt.log;
  const planQueueUrl = required(rt.env, 'PLAN_QUEUE_URL');
  const send = async (messages: readonly unknown[]) => {
    await sendAll(rt.sqs, planQueueUrl, messages);
  };
  const { list: _list, ...run } = message;
  const step = await runStep(deps, run.run_id, (d) => continueStart(d, run, { deadline, send }));
  if (!step.ran || step.value.kind === 'gone') {
    logger.warn('campaign listing of a finished run dropped', { run_id: run.run_id });
    return;
  }
  const started = step.value;
  if (started.kind === 'recorded') {
    countFatal(rt, started.record.fatal);
    const { campaign_ids: ids } = started.record;
    const done =
      started.record.fatal !== undefined ||
      (await sendPlans(deps, run, ids, send, { timeUp: () => listingTimeUp(deadline) }));
    logger.info(done ? 'run started' : 'run started; its plan messages go on', {
      run_id: run.run_id,
      campaigns: ids.length,
    });
    if (done) return;
  }
  await send([message]);
}

export const handler = lambdaHandler((event: SQSEvent, context: Context) =>
  planCampaignHandler(lambdaRuntime(), event, context),
);
