/**
 * plan-campaign (plan queue): list one campaign's jobs, write them, compare with the state,
 * and send one report-queue message per unit of reports to fetch.
 */
import type { SQSEvent } from 'aws-lambda';
import { planCampaign } from '../../shared/export/run/plan-campaign.js';
import { runStep } from '../../shared/export/run/step.js';
import { PlanMessageSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { eachMessage, sendAll } from './queue.js';
import { apiDeps, clients, coreLog, countFatal, env, lambdaHandler, logger } from './runtime.js';

export async function planCampaignHandler(event: SQSEvent) {
  const deps = await apiDeps();
  const source = { sqs: clients.sqs, queueUrl: required(env, 'PLAN_QUEUE_URL'), log: coreLog };
  return eachMessage(event, source, async (record) => {
    const message = PlanMessageSchema.parse(JSON.parse(record.body));
    // A listing out of retries (5xx, 429) throws retryable: the message comes back later.
    const planned = await runStep(deps, message.run_id, (d) => planCampaign(d, message, env.UNIT_SIZE));
    if (!planned.ran) {
      logger.warn('plan message of a finished run dropped', { run_id: message.run_id });
      return;
    }
    const { record: plan, units } = planned.value;
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
