/**
 * A stand-in for Lambda's SQS event source mapping, so the loopback topology test and benchmark
 * can run the real handlers against a local SQS (fauxqs):
 * - ReceiveMessage with MaxNumberOfMessages = the batch size and AttributeNames ['All'] (so the
 *   handlers see ApproximateReceiveCount), built into an SQSEvent the way Lambda builds it;
 * - one loop per worker: a mapping's `maxConcurrency` is the number of its workers, and each
 *   worker calls its own handler (its own "container": limiter, clients, caches);
 * - after an invocation, deletes the records not listed in `batchItemFailures`; a thrown error
 *   (function error) or a malformed response fails the whole batch, as Lambda does; failed records
 *   come back when their visibility runs out (or when the handler's ChangeMessageVisibility says);
 * - stops when every queue is empty (visible, in flight, delayed) and no invocation is running.
 *
 * Time is scaled down in these tests: a queue's visibility is seconds, not the stack's 6 × the
 * function timeout. In AWS an invocation never outlives its batch's visibility; here a slow
 * invocation could, so the poller renews the visibility of the records of a running invocation
 * (except those the handler handed back itself, see `handedBack`) until it returns.
 */
import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';

/** A Lambda handler for SQS events: resolves to a response (a partial batch response, or anything). */
export type SqsHandler = (event: SQSEvent, context: Context) => Promise<unknown>;

export interface EventSourceMapping {
  /** The function's name: the fake context's and the statistics'. */
  functionName: string;
  queueUrl: string;
  queueArn: string;
  /** ReceiveMessage's MaxNumberOfMessages, 1–10. */
  batchSize: number;
  /** One handler per concurrent worker (the mapping's maxConcurrency). */
  workers: readonly SqsHandler[];
  /** The function's timeout: what `context.getRemainingTimeInMillis()` counts down from. */
  timeoutMs: number;
  /** The queue's visibility timeout, seconds: renewed for a running invocation's records. */
  visibilitySeconds: number;
}

/** What became of one delivery of a message. */
export type DeliveryResult = 'deleted' | 'failed' | 'crashed';

export interface Delivery {
  functionName: string;
  messageId: string;
  /** ApproximateReceiveCount of this delivery. */
  receiveCount: number;
  result: DeliveryResult;
}

export interface PollerHooks {
  /**
   * Called after an invocation returned and before its deletes; `true` drops the deletes, as when
   * a container dies after its handler did the work: every record comes back later.
   */
  crashAfter?(mapping: EventSourceMapping, event: SQSEvent): boolean;
}

export interface PollerOptions {
  sqs: SQSClient;
  region: string;
  mappings: readonly EventSourceMapping[];
  hooks?: PollerHooks;
  /** Long-polling wait of an empty receive, whole seconds (default 1). */
  waitTimeSeconds?: number;
  /** Give up (reject) when the queues have not drained by then (default 120_000 ms). */
  timeoutMs?: number;
  /**
   * Runs a mapping's own SQS calls (receive, delete) as its function: Lambda's event source
   * mapping makes them with the function's execution role.
   */
  asFunction?: <T>(functionName: string, work: () => Promise<T>) => Promise<T>;
}

export interface PollResult {
  deliveries: Delivery[];
  /** Invocations per function name. */
  invocations: Record<string, number>;
  /** Invocations that threw (function errors), per function name. */
  functionErrors: Record<string, number>;
  /**
   * Milliseconds the invocations ran, summed per function name: what Lambda bills (from the
   * handler's start to its answer), waiting on the API and the request budget included.
   */
  billedMs: Record<string, number>;
  durationMs: number;
}

/** Receive attempts stop after this many consecutive SQS errors (a broken setup, not a blip). */
const MAX_CONSECUTIVE_SQS_ERRORS = 5;

/**
 * Polls the mappings' queues and feeds their handlers until everything has drained.
 *
 * @example
 * const poller = new EventSourcePoller({ sqs, region, mappings: [plan, report] });
 * const result = await poller.run();
 */
export class EventSourcePoller {
  readonly #options: PollerOptions;
  readonly #handedBack = new Set<string>();
  readonly #deliveries: Delivery[] = [];
  readonly #invocations: Record<string, number> = {};
  readonly #functionErrors: Record<string, number> = {};
  readonly #billedMs: Record<string, number> = {};
  #running = 0;
  #stopped = false;

  constructor(options: PollerOptions) {
    for (const m of options.mappings) {
      if (m.batchSize < 1 || m.batchSize > 10) throw new Error(`${m.functionName}: batch size must be 1–10`);
      if (m.workers.length < 1) throw new Error(`${m.functionName}: needs at least one worker`);
    }
    this.#options = options;
  }

  /**
   * Tells the poller that a handler changed the visibility of a record itself (a retry later):
   * the poller stops renewing it, so it comes back when the handler asked.
   */
  handedBack(receiptHandle: string): void {
    this.#handedBack.add(receiptHandle);
  }

  /** Runs every worker until all queues are drained and no invocation is running. */
  async run(): Promise<PollResult> {
    const started = performance.now();
    const deadline = Date.now() + (this.#options.timeoutMs ?? 120_000);
    const workers = this.#options.mappings.flatMap((mapping) =>
      mapping.workers.map((handler) => this.#worker(mapping, handler, deadline)),
    );
    try {
      await Promise.all(workers);
    } finally {
      this.#stopped = true;
    }
    return {
      deliveries: [...this.#deliveries],
      invocations: { ...this.#invocations },
      functionErrors: { ...this.#functionErrors },
      billedMs: { ...this.#billedMs },
      durationMs: performance.now() - started,
    };
  }

  async #worker(mapping: EventSourceMapping, handler: SqsHandler, deadline: number): Promise<void> {
    let errors = 0;
    while (!this.#stopped) {
      if (Date.now() > deadline) {
        this.#stopped = true;
        throw new Error(`poller: queues not drained in time (${await this.#describeQueues()})`);
      }
      let messages: Message[];
      try {
        messages = await this.#receive(mapping);
        errors = 0;
      } catch (error) {
        if (++errors >= MAX_CONSECUTIVE_SQS_ERRORS) {
          this.#stopped = true;
          throw error;
        }
        continue;
      }
      if (messages.length === 0) {
        if (this.#running === 0 && (await this.#drained()) && this.#running === 0) this.#stopped = true;
        continue;
      }
      this.#running++;
      try {
        await this.#invoke(mapping, handler, messages);
      } finally {
        this.#running--;
      }
    }
  }

  /** `work` as the mapping's function (see `asFunction`). */
  #asFunction<T>(mapping: EventSourceMapping, work: () => Promise<T>): Promise<T> {
    const as = this.#options.asFunction;
    return as ? as(mapping.functionName, work) : work();
  }

  async #receive(mapping: EventSourceMapping): Promise<Message[]> {
    const answer = await this.#asFunction(mapping, () =>
      this.#options.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: mapping.queueUrl,
          MaxNumberOfMessages: mapping.batchSize,
          WaitTimeSeconds: this.#options.waitTimeSeconds ?? 1,
          AttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      ),
    );
    return answer.Messages ?? [];
  }

  async #invoke(mapping: EventSourceMapping, handler: SqsHandler, messages: Message[]): Promise<void> {
    const event: SQSEvent = { Records: messages.map((m) => toRecord(m, mapping, this.#options.region)) };
    const name = mapping.functionName;
    this.#invocations[name] = (this.#invocations[name] ?? 0) + 1;
    const renewal = this.#keepHidden(mapping, event.Records);
    let failed: Set<string>;
    const invoked = performance.now();
    try {
      const response = await handler(event, fakeContext(mapping));
      failed = failedIds(response, event.Records);
    } catch {
      // A function error: Lambda deletes nothing, and every record comes back.
      this.#functionErrors[name] = (this.#functionErrors[name] ?? 0) + 1;
      failed = new Set(event.Records.map((r) => r.messageId));
    } finally {
      this.#billedMs[name] = (this.#billedMs[name] ?? 0) + (performance.now() - invoked);
      await renewal.stop();
    }
    const crashed = this.#options.hooks?.crashAfter?.(mapping, event) ?? false;
    const done = crashed ? [] : event.Records.filter((r) => !failed.has(r.messageId));
    for (const record of event.Records) {
      this.#deliveries.push({
        functionName: name,
        messageId: record.messageId,
        receiveCount: Number(record.attributes.ApproximateReceiveCount),
        result: crashed ? 'crashed' : failed.has(record.messageId) ? 'failed' : 'deleted',
      });
    }
    if (done.length > 0) {
      const answer = await this.#asFunction(mapping, () =>
        this.#options.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: mapping.queueUrl,
            Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
          }),
        ),
      );
      if (answer.Failed?.length)
        throw new Error(`poller: SQS refused to delete ${answer.Failed.length} message(s)`);
    }
  }

  /** Renews the records' visibility every half visibility while the invocation runs. */
  #keepHidden(mapping: EventSourceMapping, records: readonly SQSRecord[]): { stop(): Promise<void> } {
    let pending: Promise<unknown> = Promise.resolve();
    const timer = setInterval(
      () => {
        const entries = records
          .filter((r) => !this.#handedBack.has(r.receiptHandle))
          .map((r, i) => ({
            Id: String(i),
            ReceiptHandle: r.receiptHandle,
            VisibilityTimeout: mapping.visibilitySeconds,
          }));
        if (entries.length === 0) return;
        // A renewal that loses a race with the handler's own change only delays the record.
        pending = this.#options.sqs
          .send(new ChangeMessageVisibilityBatchCommand({ QueueUrl: mapping.queueUrl, Entries: entries }))
          .catch(() => undefined);
      },
      (mapping.visibilitySeconds * 1000) / 2,
    );
    return {
      stop: async () => {
        clearInterval(timer);
        await pending;
      },
    };
  }

  async #drained(): Promise<boolean> {
    for (const mapping of this.#options.mappings) {
      if ((await this.#queueDepth(mapping.queueUrl)) > 0) return false;
    }
    return true;
  }

  async #queueDepth(queueUrl: string): Promise<number> {
    const { Attributes: a = {} } = await this.#options.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
    );
  }

  async #describeQueues(): Promise<string> {
    const depths = await Promise.all(
      this.#options.mappings.map(
        async (m) => `${m.functionName}: ${await this.#queueDepth(m.queueUrl).catch(() => NaN)}`,
      ),
    );
    return depths.join(', ');
  }
}

/** The record Lambda builds from a received message. */
function toRecord(message: Message, mapping: EventSourceMapping, region: string): SQSRecord {
  const a = message.Attributes ?? {};
  const attributes: SQSRecord['attributes'] = {
    ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
    SentTimestamp: a.SentTimestamp ?? String(Date.now()),
    SenderId: a.SenderId ?? '000000000000',
    ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
  };
  const messageAttributes: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined
        ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }
        : {}),
      stringListValues: value.StringListValues ?? [],
      binaryListValues: (value.BinaryListValues ?? []).map((b) => Buffer.from(b).toString('base64')),
    };
  }
  return {
    messageId: message.MessageId ?? randomUUID(),
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes,
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: mapping.queueArn,
    awsRegion: region,
  };
}

/**
 * The records Lambda treats as failed after an invocation with ReportBatchItemFailures: those
 * listed; all of them when the response names an id that is empty or not in the batch.
 */
function failedIds(response: unknown, records: readonly SQSRecord[]): Set<string> {
  const all = new Set(records.map((r) => r.messageId));
  if (typeof response !== 'object' || response === null || !('batchItemFailures' in response))
    return new Set();
  const failures = (response as { batchItemFailures: unknown }).batchItemFailures;
  if (failures === null || failures === undefined) return new Set();
  if (!Array.isArray(failures)) return all;
  const failed = new Set<string>();
  for (const failure of failures) {
    const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
    if (typeof id !== 'string' || !all.has(id)) return all;
    failed.add(id);
  }
  return failed;
}

/** A Lambda context for one invocation. */
export function fakeContext(mapping: Pick<EventSourceMapping, 'functionName' | 'timeoutMs'>): Context {
  const deadline = Date.now() + mapping.timeoutMs;
  const name = mapping.functionName;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: name,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${name}`,
    memoryLimitInMB: '1024',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: `local/${randomUUID()}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}
