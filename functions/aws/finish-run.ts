/**
 * finish-run (EventBridge Scheduler, every few minutes): closes each open run whose units all
 * have outcomes — or whose queues have drained, or that passed its deadline — into the run
 * manifest, puts its metrics, and announces it with an `ExportRunFinished` event.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import { ExporterError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/context.js';
import { finishRun, isComplete, openRuns, readRunRecords } from '../../shared/export/finish-run.js';
import { manifestKey, STATE_KEYS } from '../../shared/export/layout.js';
import type { Manifest } from '../../shared/export/manifest.js';
import { encodeRecord } from '../../shared/export/records.js';
import { METRIC } from '../../shared/metrics.js';
import { required } from './env.js';
import { env, exportDeps, logger, metrics, putRunMetrics, sqs } from './runtime.js';

export const EVENT_SOURCE = 'campaign-report-exporter';
export const EVENT_DETAIL_TYPE = 'ExportRunFinished';

const events = new EventBridgeClient({});

/** True when neither queue holds a message, visible, in flight or delayed. */
async function queuesDrained(): Promise<boolean> {
  for (const url of [required(env, 'PLAN_QUEUE_URL'), required(env, 'REPORT_QUEUE_URL')]) {
    const { Attributes: a = {} } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    const inQueue =
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
    if (inQueue > 0) return false;
  }
  return true;
}

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

/**
 * Whether a run still in progress may be closed because its queues are empty. SQS counts are
 * approximate and lag, so one empty look only marks the run; it is closed when the next look
 * (a schedule period later) still finds the queues empty.
 */
async function drainedTwice(deps: ExportDeps, runId: string, drained: boolean): Promise<boolean> {
  const mark = STATE_KEYS.drainMark(runId);
  const marked = (await deps.storage.get(mark)) !== undefined;
  if (!drained) {
    if (marked) await deps.storage.delete([mark]);
    return false;
  }
  if (!marked) await deps.storage.put(mark, encodeRecord({ first_seen_empty_at: new Date().toISOString() }));
  return marked;
}

export async function finishRunHandler() {
  const deps = exportDeps({}, false);
  const now = Date.now();
  let drained: boolean | undefined;
  const finished: string[] = [];
  const failures: unknown[] = [];
  for (const runId of await openRuns(deps)) {
    try {
      const records = await readRunRecords(deps, runId);
      if (!records) continue; // Finished meanwhile, or a start that failed before writing its record.
      const age = now - Date.parse(records.record.started_at);
      const complete = isComplete(records);
      const overdue = age > env.RUN_DEADLINE_MINUTES * 60_000;
      // A CLI run into this bucket finishes itself; only one abandoned past its deadline is closed here.
      if (records.record.driver === 'local' && !overdue) continue;
      if (!complete && !overdue) {
        drained ??= await queuesDrained();
        if (!(await drainedTwice(deps, runId, drained))) continue;
      }
      const manifest = await finishRun(deps, runId, { force: true, records, announce });
      if (!manifest) continue;
      if (!complete && overdue) metrics.addMetric(METRIC.runsUnfinished, MetricUnit.Count, 1);
      putRunMetrics(manifest);
      finished.push(runId);
    } catch (error) {
      // One run's trouble (a refused event, a storage error) must not hold back the others.
      logger.error('could not finish run', { run_id: runId, error: String(error) });
      failures.push(error);
    }
  }
  if (failures.length > 0) {
    throw new ExporterError(`${failures.length} run(s) could not be finished; see the log`, {
      cause: failures[0],
    });
  }
  return { finished };
}

export const handler = middy(finishRunHandler)
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .use(logMetrics(metrics));
