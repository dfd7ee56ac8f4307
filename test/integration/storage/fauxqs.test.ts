/** The local AWS helper itself: loopback only, SQS usable, close() really frees the port. */
import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

describe('startLocalAws', () => {
  let aws: LocalAws;

  beforeAll(async () => {
    aws = await startLocalAws();
  });

  afterAll(async () => {
    await aws.close(); // second close after the last test's: must not throw
  });

  it('serves on 127.0.0.1 at a port of its own', () => {
    expect(aws.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(aws.endpoint).not.toMatch(/:4566$/);
  });

  it('delivers an SQS message through sqsClient()', async () => {
    const sqs = aws.sqsClient();
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'plan' }));

    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: '{"campaign_id":7}' }));
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 1 }));

    expect(QueueUrl).toMatch(new RegExp(`:${new URL(aws.endpoint).port}/000000000000/plan$`));
    expect(received.Messages?.map((m) => m.Body)).toEqual(['{"campaign_id":7}']);
  });

  it('refuses connections after close()', async () => {
    const other = await startLocalAws();
    await other.createBucket('probe');
    expect((await fetch(`${other.endpoint}/health`)).status).toBe(200);

    await other.close();

    await expect(fetch(`${other.endpoint}/health`)).rejects.toThrow();
  });
});
