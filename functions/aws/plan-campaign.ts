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
import { countingRequests } from '../../shared/export/run/context.js';
import { recordUnrecordedRequests, runIsOpen } from '../../shared/export/run/finish-run.js';
import { type PlannedCampaign, planCampaign } from '../../shared/export/run/plan-campaign.js';
import { PlanMessageSchema } from '../../shared/export/state/records.js';
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
      const counting = countingRequests(deps);
      let planned: PlannedCampaign;
      try {
        planned = await planCampaign(counting.deps, message, env.UNIT_SIZE);
      } catch (error) {
        await recordUnrecordedRequests(deps, message.run_id, counting.requests());
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
      countFatal(planned.record.fatal);
      // If sending fails, the message comes back and the stored plan's units are sent again.
      await sendAll(sqs, required(env, 'REPORT_QUEUE_URL'), planned.units);
      logger.info('campaign planned', {
        run_id: message.run_id,
        campaign_id: message.campaign_id,
        units: planned.units.length,
      });
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
