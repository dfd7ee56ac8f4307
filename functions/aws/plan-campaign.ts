/**
 * plan-campaign (plan queue): list one campaign's jobs, write them, compare with the state,
 * and send one report-queue message per unit of reports to fetch.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure';
import type { Context, SQSEvent } from 'aws-lambda';
import { ExporterError } from '../../shared/errors.js';
import { runIsOpen } from '../../shared/export/finish-run.js';
import { planCampaign } from '../../shared/export/plan-campaign.js';
import { PlanMessageSchema } from '../../shared/export/records.js';
import { required } from './env.js';
import { receiveCountOf, retryLater, sendAll, settle } from './queue.js';
import { apiKeySecret, coreLog, countFatal, env, exportDeps, logger, metrics, sqs } from './runtime.js';

export async function planCampaignHandler(event: SQSEvent, context: Context & { apiKey?: unknown }) {
  const deps = exportDeps(context);
  const results: PromiseSettledResult<void>[] = [];
  for (const record of event.Records) {
    const work = async () => {
      const message = PlanMessageSchema.parse(JSON.parse(record.body));
      if (!(await runIsOpen(deps, message.run_id))) {
        logger.warn('plan message of a finished run dropped', { run_id: message.run_id });
        return;
      }
      try {
        const planned = await planCampaign(deps, message, env.UNIT_SIZE);
        countFatal(planned.record.fatal);
        await sendAll(sqs, required(env, 'REPORT_QUEUE_URL'), planned.units);
        logger.info('campaign planned', {
          run_id: message.run_id,
          campaign_id: message.campaign_id,
          units: planned.units.length,
        });
      } catch (error) {
        // The listing ran out of retries (5xx, 429): come back later with a growing delay.
        if (error instanceof ExporterError && error.retryable) {
          await retryLater(
            sqs,
            required(env, 'PLAN_QUEUE_URL'),
            record.receiptHandle,
            receiveCountOf(record),
          );
        }
        throw error;
      }
    };
    results.push(await settle(work, record, coreLog));
  }
  return results;
}

export const handler = middy(planCampaignHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics))
  .use(apiKeySecret())
  .use(sqsPartialBatchFailure({ logger: () => {} }));
