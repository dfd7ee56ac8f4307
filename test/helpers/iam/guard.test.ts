import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import {
  CreateBucketCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Deployment } from './deployment.js';
import { AccessDeniedError, type Caller, IamGuard } from './guard.js';
import { type DeployedNames, iamActionsOf, UnmappedCallError } from './requests.js';

const NAMES: DeployedNames = {
  partition: 'aws',
  bucket: (b) => (b === 'local' ? 'deployed' : fail(`bucket ${b}`)),
  key: (k) => `root/${k.replace(/^p\//, '')}`,
  queueArn: (u) => `arn:aws:sqs:eu-west-1:123456789012:${u.split('/').pop()}`,
  tableArn: (t) => `arn:aws:dynamodb:eu-west-1:123456789012:table/${t}`,
  secretArn: (s) => `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${s}-AbC123`,
  busArn: (b) => `arn:aws:events:eu-west-1:123456789012:event-bus/${b ?? 'default'}`,
  glueTableArns: (d, t) => {
    const db = d === 'local_db' ? 'deployed_db' : fail(`database ${d}`);
    const arn = (r: string) => `arn:aws:glue:eu-west-1:123456789012:${r}`;
    return [arn('catalog'), arn(`database/${db}`), arn(`table/${db}/${t}`)];
  },
};
function fail(what: string): never {
  throw new UnmappedCallError(what);
}

describe('SDK commands as IAM requests', () => {
  it('maps object commands to the object ARN and listing to the bucket with s3:prefix', () => {
    expect(
      iamActionsOf('s3', 'GetObjectCommand', { Bucket: 'local', Key: 'p/state/lock.json' }, NAMES),
    ).toEqual([
      expect.objectContaining({
        action: 's3:GetObject',
        resource: 'arn:aws:s3:::deployed/root/state/lock.json',
      }),
    ]);
    const [list] = iamActionsOf('s3', 'ListObjectsV2Command', { Bucket: 'local', Prefix: 'p/runs/' }, NAMES);
    expect(list).toMatchObject({ action: 's3:ListBucket', resource: 'arn:aws:s3:::deployed' });
    expect(list?.context).toMatchObject({ 's3:prefix': 'root/runs/', 'aws:SecureTransport': 'true' });
    expect(
      iamActionsOf(
        's3',
        'CompleteMultipartUploadCommand',
        { Bucket: 'local', Key: 'p/x', UploadId: 'u' },
        NAMES,
      )[0]?.action,
    ).toBe('s3:PutObject');
    expect(
      iamActionsOf(
        's3',
        'AbortMultipartUploadCommand',
        { Bucket: 'local', Key: 'p/x', UploadId: 'u' },
        NAMES,
      )[0]?.action,
    ).toBe('s3:AbortMultipartUpload');
  });

  it('authorizes a Glue table call on the catalog, the database and the table', () => {
    const arn = (r: string) => `arn:aws:glue:eu-west-1:123456789012:${r}`;
    const on = ['catalog', 'database/deployed_db', 'table/deployed_db/reports'].map(arn);
    expect(
      iamActionsOf('glue', 'GetTableCommand', { DatabaseName: 'local_db', Name: 'reports' }, NAMES),
    ).toEqual(on.map((resource) => expect.objectContaining({ action: 'glue:GetTable', resource })));
    expect(
      iamActionsOf(
        'glue',
        'UpdateTableCommand',
        { DatabaseName: 'local_db', TableInput: { Name: 'reports' }, VersionId: '3' },
        NAMES,
      ).map((a) => [a.action, a.resource]),
    ).toEqual(on.map((resource) => ['glue:UpdateTable', resource]));
    expect(() => iamActionsOf('glue', 'DeleteTableCommand', { DatabaseName: 'local_db' }, NAMES)).toThrow(
      UnmappedCallError,
    );
  });

  it('authorizes DeleteObjects key by key, a copy on both ends, PutEvents entry by entry', () => {
    const deletes = iamActionsOf(
      's3',
      'DeleteObjectsCommand',
      { Bucket: 'local', Delete: { Objects: [{ Key: 'p/a' }, { Key: 'p/b' }] } },
      NAMES,
    );
    expect(deletes.map((d) => [d.action, d.resource])).toEqual([
      ['s3:DeleteObject', 'arn:aws:s3:::deployed/root/a'],
      ['s3:DeleteObject', 'arn:aws:s3:::deployed/root/b'],
    ]);
    const copy = iamActionsOf(
      's3',
      'UploadPartCopyCommand',
      { Bucket: 'local', Key: 'p/to', CopySource: 'local/p/fr%C3%B6m' },
      NAMES,
    );
    expect(copy.map((c) => [c.action, c.resource])).toEqual([
      ['s3:PutObject', 'arn:aws:s3:::deployed/root/to'],
      ['s3:GetObject', 'arn:aws:s3:::deployed/root/fröm'],
    ]);
    const events = iamActionsOf(
      'events',
      'PutEventsCommand',
      { Entries: [{ Source: 's', DetailType: 'd' }, { EventBusName: 'b' }] },
      NAMES,
    );
    expect(events.map((e) => e.resource)).toEqual([
      'arn:aws:events:eu-west-1:123456789012:event-bus/default',
      'arn:aws:events:eu-west-1:123456789012:event-bus/b',
    ]);
    expect(events[0]?.context).toMatchObject({ 'events:source': 's', 'events:detail-type': 'd' });
  });

  it('fails on a command it does not map, and on a name it cannot translate', () => {
    expect(() => iamActionsOf('s3', 'PutBucketPolicyCommand', { Bucket: 'local' }, NAMES)).toThrow(
      UnmappedCallError,
    );
    expect(() => iamActionsOf('s3', 'GetObjectCommand', { Bucket: 'other', Key: 'k' }, NAMES)).toThrow(
      /bucket other/,
    );
    expect(() => iamActionsOf('sqs', 'SendMessageBatchCommand', {}, NAMES)).toThrow(/QueueUrl/);
  });
});

describe('the IAM guard', () => {
  // A mock made before the guard is installed: the guard evaluates calls in front of it.
  const s3 = mockClient(S3Client);
  const events = mockClient(EventBridgeClient);
  let guard: IamGuard;
  let caller: (fn: Caller['fn']) => Caller;

  beforeAll(async () => {
    const deployment = await Deployment.load();
    const planUrl = 'http://127.0.0.1:4566/000000000000/local-plan';
    caller = (fn) => ({
      fn,
      env: { DATA_BUCKET: 'local', DATA_PREFIX: 'p/', PLAN_QUEUE_URL: planUrl, EVENT_BUS_NAME: 'default' },
    });
    guard = new IamGuard(deployment);
    guard.install();
    s3.on(GetObjectCommand).rejects(
      Object.assign(new Error('NoSuchKey'), { $metadata: { httpStatusCode: 404 } }),
    );
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0 });
  });
  afterEach(() => guard.clear());
  afterAll(() => {
    guard.uninstall();
    s3.restore();
    events.restore();
  });

  const client = () =>
    new S3Client({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });

  it('lets a granted call through to the client, and records it', async () => {
    await guard.as(caller('finish-run'), () =>
      client().send(new PutObjectCommand({ Bucket: 'local', Key: 'p/state/lock.json', Body: 'x' })),
    );

    expect(s3.commandCalls(PutObjectCommand)).toHaveLength(1);
    expect(guard.made('finish-run', 's3:PutObject', /\/state\/lock\.json$/)).toBe(true);
    expect(guard.problems()).toEqual([]);
  });

  it('answers a call the role is not granted with AccessDenied before it is sent, and keeps it', async () => {
    s3.resetHistory();
    const call = guard.as(caller('export-reports'), () =>
      client().send(
        new DeleteObjectsCommand({ Bucket: 'local', Delete: { Objects: [{ Key: 'p/parquet/x' }] } }),
      ),
    );

    await expect(call).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(call).rejects.toThrow(
      /export-reports may not s3:DeleteObject on arn:aws:s3:::[^/]+\/parquet\/x/,
    );
    expect(s3.commandCalls(DeleteObjectsCommand)).toHaveLength(0);
    expect(guard.problems()).toEqual([expect.stringContaining('export-reports may not s3:DeleteObject')]);
  });

  it('evaluates mocked services too, and the ListBucket a missing key needs to be a 404', async () => {
    const bus = new EventBridgeClient({ region: 'us-east-1' });
    await guard.as(caller('finish-run'), () =>
      bus.send(new PutEventsCommand({ Entries: [{ Source: 's' }] })),
    );
    await expect(
      guard.as(caller('plan-campaign'), () => bus.send(new PutEventsCommand({ Entries: [{ Source: 's' }] }))),
    ).rejects.toThrow(/plan-campaign may not events:PutEvents/);

    await expect(
      guard.as(caller('finish-run'), () =>
        client().send(new GetObjectCommand({ Bucket: 'local', Key: 'p/state/heartbeat.json' })),
      ),
    ).rejects.toThrow('NoSuchKey');
    expect(guard.calls.filter((c) => c.command === 'GetObjectCommand (404)').map((c) => c.action)).toEqual([
      's3:ListBucket',
    ]);
  });

  it('fails a call it cannot map, and leaves the test’s own calls alone', async () => {
    const queue = new SQSClient({ region: 'us-east-1', endpoint: 'http://127.0.0.1:9' });
    await expect(
      guard.as(caller('start-run'), () =>
        queue.send(
          new SendMessageBatchCommand({
            QueueUrl: 'http://127.0.0.1:4566/000000000000/elsewhere',
            Entries: [],
          }),
        ),
      ),
    ).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(
      guard.as(caller('start-run'), () => client().send(new CreateBucketCommand({ Bucket: 'local' }))),
    ).rejects.toBeInstanceOf(AccessDeniedError);
    expect(guard.problems()).toEqual([
      expect.stringContaining("none of the container's queues"),
      expect.stringContaining('CreateBucketCommand is not mapped'),
    ]);

    const before = guard.calls.length;
    await client().send(new PutObjectCommand({ Bucket: 'anything', Key: 'k', Body: 'x' }));
    expect(guard.calls).toHaveLength(before);
  });

  it('takes its hooks off, and says when a mock replaced one', () => {
    const other = new IamGuard(guard.deployment);
    const send = SQSClient.prototype.send;
    other.install();
    expect(SQSClient.prototype.send).not.toBe(send);
    other.uninstall();
    expect(SQSClient.prototype.send).toBe(send);

    other.install();
    const late = mockClient(SQSClient);
    expect(() => other.assertInstalled()).toThrow(/replaced on SQSClient/);
    late.restore();
    other.uninstall();
  });
});
