/**
 * export-reports (report queue): each message is a unit of up to UNIT_SIZE reports of one
 * campaign. A unit with jobs still pending (429 storm, 5xx) goes back to the queue with a
 * growing visibility timeout and resumes from its summary on the next delivery; on the last
 * delivery its pending jobs are left to end the run as failed (the next run asks again).
 */
import type { SQSEvent } from 'aws-lambda';
import { ExporterError } from '../../shared/errors.js';
import { exportUnit, pendingJobs } from '../../shared/export/run/export-unit.js';
import { runStep } from '../../shared/export/run/step.js';
import { UnitSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { eachMessage, receiveCountOf } from './queue.js';
import { apiDeps, clients, coreLog, countFatal, env, lambdaHandler, logger } from './runtime.js';

export async function exportReportsHandler(event: SQSEvent) {
  const deps = await apiDeps();
  const source = { sqs: clients.sqs, queueUrl: required(env, 'REPORT_QUEUE_URL'), log: coreLog };
  // One unit at a time: each fetches its reports concurrently, and memory stays one unit's worth.
  return eachMessage(event, source, async (record) => {
    const unit = UnitSchema.parse(JSON.parse(record.body));
    // Always resume: a duplicate or redelivered message must not fetch or write a job twice.
    const options = { resume: true, concurrency: env.REPORT_CONCURRENCY };
    const exported = await runStep(deps, unit.run_id, (d) => exportUnit(d, unit, options));
    if (!exported.ran) {
      logger.warn('unit of a finished run dropped', { run_id: unit.run_id, unit: unit.unit });
      return;
    }
    const summary = exported.value;
    countFatal(summary.fatal);
    const pending = summary.fatal ? 0 : pendingJobs(summary);
    if (pending > 0 && receiveCountOf(record) < env.MAX_RECEIVE_COUNT) {
      throw new ExporterError(`unit ${unit.unit}: ${pending} report(s) pending, retried later`, {
        retryable: true,
      });
    }
  });
}

export const handler = lambdaHandler(exportReportsHandler);
