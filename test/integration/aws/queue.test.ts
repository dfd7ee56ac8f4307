/**
 * functions/aws/queue.ts against a local SQS (fauxqs over HTTP): a unit waiting for a fetcher
 * slot is sent with a DelaySeconds, and a queue holding only such a message is not drained, so
 * that finish-run cannot close a run while its units wait.
 */
import { CreateQueueCommand, PurgeQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queuesDrained, sendAll } from '../../../functions/aws/queue.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

describe('the report queue with delayed messages', () => {
  let aws: LocalAws;

  beforeAll(async () => {
    aws = await startLocalAws();
  });

  afterAll(async () => {
    await aws?.close();
  });

  it('sends a unit with its delay, and is not drained while the unit waits', async () => {
    const sqs = aws.sqsClient();
    const { QueueUrl: url } = await sqs.send(new CreateQueueCommand({ QueueName: 'delayed-units' }));
    expect(await queuesDrained(sqs, [url!])).toBe(true);

    await sendAll(sqs, url!, [{ run_id: 'r', unit: 'c1-u0' }], { delaySeconds: 60 });

    // Not visible yet: a poller gets nothing, and the queue still holds the unit.
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 0 }));
    expect(received.Messages ?? []).toEqual([]);
    expect(await queuesDrained(sqs, [url!])).toBe(false);
    await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    expect(await queuesDrained(sqs, [url!])).toBe(true);
  });
});
