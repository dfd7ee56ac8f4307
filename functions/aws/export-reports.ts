/**
 * export-reports (report queue): each message is a unit of up to UNIT_SIZE reports of one
 * campaign. An invocation sends requests for the first part of its time only (`exportSendMs`),
 * so that it ends within half its timeout: a unit cut short by that, having got some of its
 * reports, goes on in a new message. A unit with jobs still pending for other reasons (429
 * storm, 5xx) goes back to the queue with a growing visibility timeout and resumes from its
 * summary on the next delivery; on the last delivery its pending jobs are left to end the run as
 * failed (the next run asks again). At most REPORT_FETCHERS invocations fetch at once (a slot
 * each, shared/api/fetcher-slots.ts): one that gets none hands its units on to a later delivery.
 */
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { describeError, ExporterError } from '../../shared/errors.js';
import { exportSendMs, exportUnit, unitDelivery, unitWaits } from '../../shared/export/run/export-unit.js';
import { runStep } from '../../shared/export/run/step.js';
import { type Unit, UnitSchema } from '../../shared/export/state/records.js';
import { required } from './env.js';
import { eachMessage, type MessageSource, receiveCountOf, sendAll } from './queue.js';
import { countFatal, type HandlerRuntime, lambdaHandler, lambdaRuntime } from './runtime.js';

export async function exportReportsHandler(
  rt: HandlerRuntime,
  event: SQSEvent,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<SQSBatchResponse> {
  // The invocation's whole time, taken first: no request is sent past exportSendMs of it.
  const timeoutMs = context.getRemainingTimeInMillis();
  const queueUrl = required(rt.env, 'REPORT_QUEUE_URL');
  const source = { sqs: rt.sqs, queueUrl, log: rt.log, random: rt.random };
  const hold = await rt.takeFetcherSlot(rt.uuid());
  if (hold?.kind === 'busy') return waitForSlot(event, source);
  // A slot lost to another holder (this one outlived its lease) ends the time for requests.
  const msUntilStop = () =>
    hold?.lost() ? 0 : exportSendMs(timeoutMs) - (timeoutMs - context.getRemainingTimeInMillis());
  try {
    return await exportBatch(rt, event, source, msUntilStop);
  } finally {
    await hold?.release();
  }
}

/**
 * Nothing fetched: the batch's units wait together in new messages, one SQS request for the
 * batch. A body that does not parse fails, so that its receive count takes it to the DLQ instead
 * of waiting for ever; a send that fails leaves every message to come back after its visibility
 * timeout.
 */
async function waitForSlot(event: SQSEvent, source: MessageSource): Promise<SQSBatchResponse> {
  const units: Unit[] = [];
  const waiting: SQSRecord[] = [];
  const unparsed = await eachMessage(event, source, async (record) => {
    units.push(UnitSchema.parse(JSON.parse(record.body)));
    waiting.push(record);
  });
  try {
    await sendAll(
      source.sqs,
      source.queueUrl,
      units,
      unitWaits({ ...(source.random && { random: source.random }) }),
    );
  } catch (error) {
    source.log.error('units could not wait for a fetcher slot', { error: describeError(error) });
    const failed = waiting.map((record) => ({ itemIdentifier: record.messageId }));
    return { batchItemFailures: [...unparsed.batchItemFailures, ...failed] };
  }
  return unparsed;
}

async function exportBatch(
  rt: HandlerRuntime,
  event: SQSEvent,
  source: MessageSource,
  msUntilStop: () => number,
) {
  const { env, log: logger } = rt;
  const { queueUrl } = source;
  const deps = await rt.apiDeps({ msUntilStop });
  // One unit at a time: each fetches its reports concurrently, and memory stays one unit's worth.
  return eachMessage(event, source, async (record) => {
    const unit = UnitSchema.parse(JSON.parse(record.body));
    // Taken before any request: a unit reached after the invocation's time for requests (behind
    // a slow one of its batch) sends none, and goes on in a new message as one cut short does.
    const delivery = unitDelivery(msUntilStop, {
      receiveCount: receiveCountOf(record),
      maxReceiveCount: env.MAX_RECEIVE_COUNT,
    });
    // Always resume: a duplicate or redelivered message must not fetch or write a job twice.
    const options = { resume: true, concurrency: env.REPORT_CONCURRENCY, onReport: delivery.onReport };
    const exported = await runStep(deps, unit.run_id, (d) => exportUnit(d, unit, options));
    // What the container's limiter learnt of the API's windows, for the next containers and runs.
    await rt.keepWindowFacts?.();
    if (!exported.ran) {
      logger.warn('unit of a finished run dropped', { run_id: unit.run_id, unit: unit.unit });
      return;
    }
    countFatal(rt, exported.value.fatal);
    const next = delivery.next(exported.value);
    if (next.kind === 'hand-on') {
      // Sent before this one is deleted: a crash in between leaves two deliveries, which resume
      // from one summary.
      await sendAll(rt.sqs, queueUrl, [unit]);
      logger.info('unit handed on before the deadline', {
        run_id: unit.run_id,
        unit: unit.unit,
        pending: next.pending,
      });
      return;
    }
    if (next.kind === 'retry') {
      throw new ExporterError(`unit ${unit.unit}: ${next.pending} report(s) pending, retried later`, {
        retryable: true,
      });
    }
  });
}

export const handler = lambdaHandler((event: SQSEvent, context: Context) =>
  exportReportsHandler(lambdaRuntime(), event, context),
);
