/**
 * Sending work to SQS and handing a message back for later: the transport between the steps
 * in AWS (the CLI runs the same steps in-process).
 */
import {
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { describeError, ExporterError } from '../../shared/errors.js';
import type { Log } from '../../shared/log.js';

/** SendMessageBatch takes at most ten entries. */
const SQS_BATCH_LIMIT = 10;
/** SQS's longest visibility timeout is 12 hours; backoff stays well under it. */
const MAX_VISIBILITY_SECONDS = 900;
const BASE_VISIBILITY_SECONDS = 30;

/**
 * Sends every body, ten per request, each delivered after `delaySeconds` (default none);
 * throws if SQS refuses any entry.
 */
export async function sendAll(
  sqs: SQSClient,
  queueUrl: string,
  bodies: readonly unknown[],
  options: { delaySeconds?: number } = {},
): Promise<number> {
  let requests = 0;
  for (let i = 0; i < bodies.length; i += SQS_BATCH_LIMIT) {
    const chunk = bodies.slice(i, i + SQS_BATCH_LIMIT);
    const answer = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: chunk.map((body, n) => ({
          Id: String(n),
          MessageBody: JSON.stringify(body),
          ...(options.delaySeconds !== undefined && { DelaySeconds: options.delaySeconds }),
        })),
      }),
    );
    requests++;
    if (answer.Failed?.length) {
      const first = answer.Failed[0];
      throw new ExporterError(
        `SQS refused ${answer.Failed.length} message(s): ${first?.Code} ${first?.Message ?? ''}`,
        {
          retryable: true,
        },
      );
    }
  }
  return requests;
}

/**
 * Seconds before a message delivered `receiveCount` times comes back: exponential, capped,
 * jittered by `random` (uniform in [0, 1)).
 */
export function visibilityBackoff(receiveCount: number, random: () => number = Math.random): number {
  const exp = Math.min(MAX_VISIBILITY_SECONDS, BASE_VISIBILITY_SECONDS * 2 ** Math.max(0, receiveCount - 1));
  return Math.round(exp / 2 + random() * (exp / 2));
}

/** Hands a message back to the queue to be delivered again after a backoff, instead of sleeping in the Lambda. */
export async function retryLater(
  sqs: SQSClient,
  queueUrl: string,
  receiptHandle: string,
  receiveCount: number,
  random?: () => number,
) {
  await sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: queueUrl,
      ReceiptHandle: receiptHandle,
      VisibilityTimeout: visibilityBackoff(receiveCount, random),
    }),
  );
}

/** Where a handler's messages come from, and where a message is handed back. */
export interface MessageSource {
  sqs: SQSClient;
  queueUrl: string;
  log: Log;
  /** The backoff's jitter (default Math.random). */
  random?: () => number;
}

/**
 * Runs each message's work in turn and reports the failed ones (partial batch response). A
 * retryable failure (the API out of retries, work still pending) first hands its message back
 * with a growing delay instead of the queue's visibility timeout.
 */
export async function eachMessage(
  event: SQSEvent,
  source: MessageSource,
  work: (record: SQSRecord) => Promise<void>,
): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchItemFailure[] = [];
  for (const record of event.Records) {
    try {
      await work(record);
    } catch (error) {
      source.log.error('message failed', { messageId: record.messageId, error: describeError(error) });
      batchItemFailures.push({ itemIdentifier: record.messageId });
      if (error instanceof ExporterError && error.retryable) {
        const { sqs, queueUrl, random } = source;
        await retryLater(sqs, queueUrl, record.receiptHandle, receiveCountOf(record), random).catch(
          (handBack: unknown) =>
            // It comes back after the queue's visibility timeout instead.
            source.log.warn('could not hand the message back', { error: describeError(handBack) }),
        );
      }
    }
  }
  return { batchItemFailures };
}

/** How many times SQS has delivered a record (1 on the first delivery). */
export const receiveCountOf = (record: SQSRecord): number =>
  Number(record.attributes.ApproximateReceiveCount ?? '1');

/** True when none of the queues holds a message, visible, in flight or delayed. */
export async function queuesDrained(sqs: SQSClient, queueUrls: readonly string[]): Promise<boolean> {
  for (const url of queueUrls) {
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
