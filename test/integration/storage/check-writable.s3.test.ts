/**
 * checkWritable on S3 against fauxqs (a real S3 HTTP server on 127.0.0.1): a bucket that takes
 * writes passes and keeps nothing of the check; a missing bucket and an endpoint nobody listens
 * on come out as one line naming --out and the cause.
 */
import { createServer } from 'node:net';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { checkWritable } from '../../../shared/storage/open.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import { listAll } from '../../../shared/storage/storage.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

const PROBE = 'state/write-check-test';

/** A loopback port nothing listens on: taken from the system, then let go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const errorOf = async (storage: S3Storage): Promise<ExporterError> => {
  try {
    await checkWritable(storage, PROBE);
  } catch (error) {
    expect(error).toBeInstanceOf(ExporterError);
    return error as ExporterError;
  }
  throw new Error(`${storage.location} passed the check`);
};

let aws: LocalAws;
beforeAll(async () => {
  aws = await startLocalAws();
  await aws.createBucket('lake');
});
afterAll(async () => {
  await aws?.close();
});

describe('checkWritable on S3', () => {
  it('passes on a bucket that takes writes, and deletes its object', async () => {
    const storage = new S3Storage({ bucket: 'lake', prefix: 'exports/acme', client: aws.s3Client() });
    aws.clearRequests();

    await checkWritable(storage, PROBE);

    expect(await listAll(storage, '')).toEqual([]);
    const sent = aws.requests().map((r) => `${r.method} ${r.url.split('?')[0]}`);
    expect(sent).toContain(`PUT /lake/exports/acme/${PROBE}`);
  });

  it('names a bucket that does not exist', async () => {
    const storage = new S3Storage({ bucket: 'no-such-lake', prefix: 'p', client: aws.s3Client() });
    const error = await errorOf(storage);
    expect(error.message).toBe('--out s3://no-such-lake/p names a bucket that does not exist');
    expect(error.hint).toBe('check the bucket name');
  });

  it('says S3 cannot be reached when nothing listens at the endpoint', async () => {
    const client = new S3Client({
      endpoint: `http://127.0.0.1:${await closedPort()}`,
      region: aws.region,
      credentials: aws.credentials,
      forcePathStyle: true,
      maxAttempts: 1,
    });
    try {
      const error = await errorOf(new S3Storage({ bucket: 'lake', prefix: 'p', client }));
      expect(error.message).toBe('--out s3://lake/p cannot be reached (ECONNREFUSED)');
      expect(error.hint).toBe('check the network, --s3-endpoint and --s3-region');
    } finally {
      client.destroy();
    }
  });
});
