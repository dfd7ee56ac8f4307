/**
 * start-run (EventBridge Scheduler): a new run — verify, list campaigns, one plan message per
 * campaign. Input `{"mode": "incremental" | "full", "date"?: "YYYY-MM-DD"}`.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { startRun } from '../../shared/export/run/start-run.js';
import { DtSchema, ModeSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { sendAll } from './queue.js';
import { apiKeySecret, countFatal, env, exportDeps, logger, metrics, sqs } from './runtime.js';

export const StartRunEventSchema = z.object({
  mode: ModeSchema.default('incremental'),
  date: DtSchema.optional(),
});

export async function startRunHandler(event: unknown, context: Context & { apiKey?: unknown }) {
  const input = StartRunEventSchema.parse(event ?? {});
  const deps = exportDeps(context);
  const started = await startRun(deps, { mode: input.mode, dt: input.date, driver: 'queues' });
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
  await sendAll(sqs, required(env, 'PLAN_QUEUE_URL'), messages);
  logger.info('run started', { campaigns: messages.length, mode: input.mode });
  return { run_id: runId, status: 'started', campaigns: messages.length };
}

export const handler = middy(startRunHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics))
  .use(apiKeySecret());
