/**
 * plan-campaign (plan queue): list one campaign's jobs, write them, compare with the state,
 * and send one report-queue message per unit of reports to fetch.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { planCampaign } from '../../shared/export/plan-campaign.js';
import { PlanMessageSchema } from '../../shared/export/records.js';
import { required } from './env.js';
import { sendAll } from './queue.js';
import { apiKeySecret, countFatal, env, exportDeps, logger, metrics, sqs } from './runtime.js';

export async function planCampaignHandler(event: SQSEvent, context: Context & { apiKey?: unknown }) {
  const deps = exportDeps(context);
  const results: PromiseSettledResult<void>[] = [];
  for (const record of event.Records) {
    results.push(
      await settle(async () => {
        const message = PlanMessageSchema.parse(JSON.parse(record.body));
        const planned = await planCampaign(deps, message, env.UNIT_SIZE);
        countFatal(planned.record.fatal);
        await sendAll(sqs, required(env, 'REPORT_QUEUE_URL'), planned.units);
        logger.info('campaign planned', {
          run_id: message.run_id,
          campaign_id: message.campaign_id,
          units: planned.units.length,
        });
      }, record),
    );
  }
  return results;
}

/** One record's work as a settled result (the partial-batch middleware reads these). */
export async function settle(
  work: () => Promise<void>,
  record: SQSRecord,
): Promise<PromiseSettledResult<void>> {
  try {
    await work();
    return { status: 'fulfilled', value: undefined };
  } catch (reason) {
    logger.error('message failed', { messageId: record.messageId, error: reason as Error });
    return { status: 'rejected', reason };
  }
}

export const handler = middy(planCampaignHandler)
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics))
  .use(apiKeySecret())
  .use(sqsPartialBatchFailure({ logger: () => {} }));
