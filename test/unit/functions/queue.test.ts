import { ChangeMessageVisibilityCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { retryLater, sendAll, visibilityBackoff } from '../../../functions/aws/queue.js';
import { ExporterError } from '../../../shared/errors.js';

const QUEUE = 'https://sqs.us-east-1.amazonaws.com/000000000000/report';
const sqs = mockClient(SQSClient);

afterEach(() => {
  sqs.reset();
  vi.restoreAllMocks();
});

describe('sendAll', () => {
  it('sends the bodies as JSON in batches of ten', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const bodies = Array.from({ length: 23 }, (_, i) => ({ n: i }));

    const requests = await sendAll(new SQSClient({ region: 'us-east-1' }), QUEUE, bodies);

    const calls = sqs.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input);
    expect(requests).toBe(3);
    expect(calls.map((c) => c.Entries?.length)).toEqual([10, 10, 3]);
    expect(calls.every((c) => c.QueueUrl === QUEUE)).toBe(true);
    for (const call of calls) expect(new Set(call.Entries?.map((e) => e.Id)).size).toBe(call.Entries?.length);
    expect(calls.flatMap((c) => c.Entries?.map((e) => JSON.parse(e.MessageBody ?? '')))).toEqual(bodies);
  });

  it('sends nothing for no bodies', async () => {
    expect(await sendAll(new SQSClient({ region: 'us-east-1' }), QUEUE, [])).toBe(0);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
  });

  it('throws a retryable error when SQS refuses an entry', async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [],
      Failed: [{ Id: '3', Code: 'InternalError', SenderFault: false, Message: 'try again' }],
    });

    const sent = sendAll(new SQSClient({ region: 'us-east-1' }), QUEUE, [{ a: 1 }]);

    await expect(sent).rejects.toThrow(/SQS refused 1 message\(s\): InternalError try again/);
    await expect(sent).rejects.toSatisfy((e: unknown) => e instanceof ExporterError && e.retryable);
  });
});

describe('visibilityBackoff', () => {
  it('doubles from 30 s per delivery, jittered between half and all of it', () => {
    vi.spyOn(Math, 'random').mockReturnValue(0);
    expect([1, 2, 3, 4].map((n) => visibilityBackoff(n))).toEqual([15, 30, 60, 120]);
    vi.spyOn(Math, 'random').mockReturnValue(0.999_999);
    expect([1, 2, 3, 4].map((n) => visibilityBackoff(n))).toEqual([30, 60, 120, 240]);
  });

  it('never exceeds 15 minutes, however often a message came back', () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999_999);
    expect(visibilityBackoff(50)).toBe(900);
    expect(visibilityBackoff(0)).toBe(30);
  });
});

describe('retryLater', () => {
  it("changes the message's visibility by the backoff of its receive count", async () => {
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    vi.spyOn(Math, 'random').mockReturnValue(0.5);

    await retryLater(new SQSClient({ region: 'us-east-1' }), QUEUE, 'receipt-1', 3);

    expect(sqs.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input)).toEqual([
      { QueueUrl: QUEUE, ReceiptHandle: 'receipt-1', VisibilityTimeout: 90 },
    ]);
  });
});
