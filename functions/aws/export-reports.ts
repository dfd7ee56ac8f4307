/**
 * export-reports (report queue): each message is a unit of up to UNIT_SIZE reports of one
 * campaign. A unit with jobs still pending (429 storm, 5xx) goes back to the queue with a
 * growing visibility timeout and resumes from its summary on the next delivery; on the last
 * delivery its pending jobs are left to end the run as failed (the next run asks again).
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure';
import type { Context, SQSEvent } from 'aws-lambda';
import { ExporterError } from '../../shared/errors.js';
import { countingRequests } from '../../shared/export/run/context.js';
import { exportUnit, pendingJobs } from '../../shared/export/run/export-unit.js';
import { recordUnrecordedRequests, runIsOpen } from '../../shared/export/run/finish-run.js';
import { UnitSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { receiveCountOf, retryLater, settle } from './queue.js';
import { apiKeySecret, coreLog, countFatal, env, exportDeps, logger, metrics, sqs } from './runtime.js';

export async function exportReportsHandler(event: SQSEvent, context: Context & { apiKey?: unknown }) {
  const deps = exportDeps(context);
  const results: PromiseSettledResult<void>[] = [];
  // One unit at a time: each fetches its reports concurrently, and memory stays one unit's worth.
  for (const record of event.Records) {
    const work = async () => {
      const unit = UnitSchema.parse(JSON.parse(record.body));
      // A unit of a run already finished (late, or redriven from the DLQ) must not write rows
      // the manifest does not count; the next run fetches its jobs again.
      if (!(await runIsOpen(deps, unit.run_id))) {
        logger.warn('unit of a finished run dropped', { run_id: unit.run_id, unit: unit.unit });
        return;
      }
      const receiveCount = receiveCountOf(record);
      // Always resume: a duplicate or redelivered message must not fetch or write a job twice.
      const counting = countingRequests(deps);
      const summary = await exportUnit(counting.deps, unit, {
        resume: true,
        concurrency: env.REPORT_CONCURRENCY,
      }).catch(async (error: unknown) => {
        // Failed before its summary (a storage error): keep its requests for the manifest.
        await recordUnrecordedRequests(deps, unit.run_id, counting.requests());
        throw error;
      });
      countFatal(summary.fatal);
      const pending = summary.fatal ? 0 : pendingJobs(summary);
      if (pending > 0 && receiveCount < env.MAX_RECEIVE_COUNT) {
        await retryLater(sqs, required(env, 'REPORT_QUEUE_URL'), record.receiptHandle, receiveCount);
        throw new ExporterError(`unit ${unit.unit}: ${pending} report(s) pending, retried later`, {
          retryable: true,
        });
      }
    };
    results.push(await settle(work, record, coreLog));
  }
  return results;
}

export const handler = middy(exportReportsHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics))
  .use(apiKeySecret())
  .use(sqsPartialBatchFailure({ logger: () => {} }));
