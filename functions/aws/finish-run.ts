/**
 * finish-run (EventBridge Scheduler, every few minutes): closes the runs that are done
 * (shared/export/run/close-runs.ts decides), puts their metrics, and announces each with an
 * `ExportRunFinished` event.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import middy from '@middy/core';
import { ExporterError } from '../../shared/errors.js';
import { manifestKey } from '../../shared/export/layout.js';
import { closeRuns } from '../../shared/export/run/close-runs.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { METRIC } from '../../shared/metrics.js';
import { required } from './env.js';
import { queuesDrained } from './queue.js';
import { env, exportDeps, logger, metrics, putRunMetrics, sqs } from './runtime.js';

export const EVENT_SOURCE = 'campaign-report-exporter';
export const EVENT_DETAIL_TYPE = 'ExportRunFinished';

const events = new EventBridgeClient({});

async function announce(manifest: Manifest): Promise<void> {
  const key = manifestKey(manifest.dt, manifest.run_id);
  const answer = await events.send(
    new PutEventsCommand({
      Entries: [
        {
          Source: EVENT_SOURCE,
          DetailType: EVENT_DETAIL_TYPE,
          EventBusName: env.EVENT_BUS_NAME,
          Detail: JSON.stringify({
            run_id: manifest.run_id,
            dt: manifest.dt,
            mode: manifest.mode,
            status: manifest.status,
            bucket: env.DATA_BUCKET,
            manifest_key: `${env.DATA_PREFIX}${key}`,
            counts: manifest.counts,
          }),
        },
      ],
    }),
  );
  if (answer.FailedEntryCount) {
    throw new ExporterError(`EventBridge refused the ExportRunFinished event of ${manifest.run_id}`, {
      retryable: true,
    });
  }
}

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
