/**
 * start-run (EventBridge Scheduler): a new run — verify, list campaigns, one plan message per
 * campaign. Input `{"mode": "incremental" | "full", "date"?: "YYYY-MM-DD"}`.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { describeError, OutputLockedError } from '../../shared/errors.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { DtSchema, ModeSchema } from '../../shared/export/state/records.js';
import { announce } from './announce.js';
import { required } from './env.js';
import { sendAll } from './queue.js';
import { apiKeySecret, countFatal, env, exportDeps, logger, metrics, sqs } from './runtime.js';

/** The lock of a queue-carried run outlives its deadline by this much (finish-run looks every 5 minutes). */
const QUEUE_LOCK_MARGIN_MINUTES = 15;
/** The lock's owner for runs the Lambdas carry (a CLI writes `pid@host`). */
const LOCK_OWNER = 'aws-lambda';

export const StartRunEventSchema = z.object({
  mode: ModeSchema.default('incremental'),
  date: DtSchema.optional(),
});

export async function startRunHandler(event: unknown, context: Context & { apiKey?: unknown }) {
  const input = StartRunEventSchema.parse(event ?? {});
  const deps = exportDeps(context);
  let started: Awaited<ReturnType<typeof startRun>>;
  try {
    started = await startRun(deps, {
      mode: input.mode,
      dt: input.date,
      driver: 'queues',
      // Held until finish-run closes the run; it closes overdue runs at the deadline, so the lock
      // outlives the run by the finisher's interval at most.
      lock: { ttlMs: (env.RUN_DEADLINE_MINUTES + QUEUE_LOCK_MARGIN_MINUTES) * 60_000, owner: LOCK_OWNER },
      announce,
    });
  } catch (error) {
    if (!(error instanceof OutputLockedError)) throw error;
    // Another run (a CLI run into the same bucket, or a run still open) holds the output: this
    // schedule starts nothing; NoFinishedRun alarms if that goes on.
    logger.warn('run not started: the output is locked by another run', { reason: describeError(error) });
    return { status: 'skipped', reason: describeError(error) };
  }
  const { run_id: runId } = started.run;
  logger.appendKeys({ run_id: runId });
  if (started.record.fatal) {
    countFatal(started.record.fatal);
    // finish-run closes it on its next look (a fatal run is complete): one finisher, one
    // manifest, one ExportRunFinished event.
    logger.error('run failed at start', { ...started.record.fatal });
    return { run_id: runId, status: 'failed', error: started.record.fatal.message };
  }
  const messages = started.record.campaign_ids.map((campaign_id) => ({ ...started.run, campaign_id }));
  try {
    await sendAll(sqs, required(env, 'PLAN_QUEUE_URL'), messages);
  } catch (error) {
    // The schedule retries the invocation, and that start must not find the output locked: it
    // closes this run instead (campaigns whose plan was never sent end it unlisted).
    await started.lock?.release();
    throw error;
  }
  logger.info('run started', { campaigns: messages.length, mode: input.mode });
  return { run_id: runId, status: 'started', campaigns: messages.length };
}

export const handler = middy(startRunHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics))
  .use(apiKeySecret());
