/**
 * finish-run (EventBridge Scheduler, every few minutes): closes the runs that are done
 * (shared/export/run/close-runs.ts decides), puts their metrics, and announces each with an
 * `ExportRunFinished` event.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import { ExporterError } from '../../shared/errors.js';
import { closeRuns } from '../../shared/export/run/close-runs.js';
import { METRIC } from '../../shared/metrics.js';
import { announce } from './announce.js';
import { required } from './env.js';
import { queuesDrained } from './queue.js';
import { env, exportDeps, logger, metrics, putRunMetrics, sqs } from './runtime.js';

export async function finishRunHandler() {
  const deps = exportDeps({}, false);
  const { closed, failures } = await closeRuns(deps, {
    now: Date.now(),
    deadlineMs: env.RUN_DEADLINE_MINUTES * 60_000,
    queuesDrained: () =>
      queuesDrained(sqs, [required(env, 'PLAN_QUEUE_URL'), required(env, 'REPORT_QUEUE_URL')]),
    announce,
  });
  for (const { manifest, unfinished } of closed) {
    if (unfinished) metrics.addMetric(METRIC.runsUnfinished, MetricUnit.Count, 1);
    putRunMetrics(manifest);
  }
  if (failures.length > 0) {
    throw new ExporterError(`${failures.length} run(s) could not be finished; see the log`, {
      cause: failures[0]?.error,
    });
  }
  return { finished: closed.map((c) => c.manifest.run_id) };
}

export const handler = middy(finishRunHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics));
