/**
 * finish-run (EventBridge Scheduler, every few minutes): closes the runs that are done
 * (shared/export/run/close-runs.ts decides), puts their metrics and the NoFinishedRun alarm's
 * heartbeat, and announces each with an `ExportRunFinished` event.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { ExporterError } from '../../shared/errors.js';
import { closeRuns } from '../../shared/export/run/close-runs.js';
import { finisherLimits } from '../../shared/export/run/publish-closing.js';
import { lookBack } from '../../shared/export/state/heartbeat.js';
import { METRIC, runMetrics } from '../../shared/metrics.js';
import { required } from './env.js';
import { queuesDrained } from './queue.js';
import { type HandlerRuntime, lambdaHandler, lambdaRuntime, putMetrics } from './runtime.js';

export async function finishRunHandler(
  rt: HandlerRuntime,
  _event?: unknown,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
) {
  const { env } = rt;
  const deps = await rt.withCatalog(rt.exportDeps());
  const now = deps.now();
  const remaining = context?.getRemainingTimeInMillis();
  const { closed, failures, handedOn } = await closeRuns(deps, {
    now: now.getTime(),
    // Hands a long closing on to the next look well before the timeout (`FINISH_HAND_ON_SHARE`).
    ...(remaining !== undefined && finisherLimits(now.getTime(), remaining)),
    deadlineMs: env.RUN_DEADLINE_MINUTES * 60_000,
    queuesDrained: () =>
      queuesDrained(rt.sqs, [required(env, 'PLAN_QUEUE_URL'), required(env, 'REPORT_QUEUE_URL')]),
    announce: rt.announce,
  });
  for (const { manifest, unfinished } of closed) {
    if (unfinished) putMetrics(rt, [{ name: METRIC.runsUnfinished, value: 1 }]);
    putMetrics(rt, runMetrics(manifest));
  }
  // On every look, whatever else failed: no datapoint means finish-run itself has stopped.
  const manifests = closed.map((c) => c.manifest);
  const { hours, newDrift } = await lookBack(deps.storage, now, manifests);
  // Evolve runs: the drift no earlier run had, which the SchemaDrift alarm watches.
  for (const paths of newDrift.values()) putMetrics(rt, [{ name: METRIC.schemaDriftNewPaths, value: paths }]);
  // Hours have no CloudWatch unit; the alarm compares the number.
  rt.addMetric(METRIC.hoursSinceFinishedRun, MetricUnit.NoUnit, hours);
  if (failures.length > 0) {
    throw new ExporterError(`${failures.length} run(s) could not be finished; see the log`, {
      cause: failures[0]?.error,
    });
  }
  return {
    finished: closed.map((c) => c.manifest.run_id),
    ...(handedOn.length > 0 && { handed_on: handedOn }),
  };
}

export const handler = lambdaHandler((event: unknown, context: Context) =>
  finishRunHandler(lambdaRuntime(), event, context),
);
