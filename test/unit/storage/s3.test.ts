/**
 * S3Storage against a mocked client: what the local S3 server (fauxqs) cannot show. fauxqs
 * ignores If-Match / If-None-Match on PutObject, so the conditional-write requests, the
 * mapping of S3's 412 / 409 answers and a lost answer's retry meeting its own object are checked here; everything else runs against fauxqs in
 * test/integration/storage/s3.test.ts.
 */
import {
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, PreconditionFailedError, StorageError } from '../../../shared/errors.js';
import { contentTypeFor, MIN_PART_BYTES, S3Storage } from '../../../shared/storage/s3.js';

const s3Mock = mockClient(S3Client);
const client = new S3Client({ region: 'us-east-1' });

const s3Error = (name: string, status: number): S3ServiceException =>
  new S3ServiceException({ name, message: name, $fault: 'client', $metadata: { httpStatusCode: status } });

/** A GetObject answer holding `text`. */
const storedBody = (text: string, etag: string) =>
  ({
    ETag: etag,
    Body: { transformToByteArray: async () => new Uint8Array(Buffer.from(text)) },
  }) as never;

afterEach(() => {
  s3Mock.reset();
});

describe('S3Storage with a mocked client', () => {
  it('sends If-None-Match: * and returns the bare ETag', async () => {
    s3Mock.on(PutObjectCommand).resolves({ ETag: '"abc"' });
    const storage = new S3Storage({ bucket: 'lake', prefix: 'exports', client });

    const result = await storage.put('state/s.json', '{}', { ifNoneMatch: '*' });

    expect(result.etag).toBe('abc');
    const [call] = s3Mock.commandCalls(PutObjectCommand);
    expect(call?.args[0].input).toMatchObject({
      Bucket: 'lake',
      Key: 'exports/state/s.json',
      IfNoneMatch: '*',
    });
    expect(call?.args[0].input.IfMatch).toBeUndefined();
  });

  it('reads a byte range with a Range header, and cuts the whole object a server sent instead', async () => {
    s3Mock.on(GetObjectCommand).resolves(storedBody('0123456789', '"r"'));
    const storage = new S3Storage({ bucket: 'lake', client });

    const part = await storage.getRange('k', 2, 5);

    expect(s3Mock.commandCalls(GetObjectCommand)[0]?.args[0].input).toMatchObject({ Range: 'bytes=2-4' });
    expect(Buffer.from(part!).toString()).toBe('234');
  });

  it('sends If-Match with the ETag quoted', async () => {
    s3Mock.on(PutObjectCommand).resolves({ ETag: '"def"' });
    const storage = new S3Storage({ bucket: 'lake', client });

    await storage.put('state/s.json', '{}', { ifMatch: 'abc' });

    expect(s3Mock.commandCalls(PutObjectCommand)[0]?.args[0].input).toMatchObject({ IfMatch: '"abc"' });
  });

  it('turns a 412 over an object that is not ours into PreconditionFailedError', async () => {
    s3Mock.on(PutObjectCommand).rejects(s3Error('PreconditionFailed', 412));
    s3Mock.on(GetObjectCommand).resolves(storedBody('{"other":true}', '"x"'));
    const storage = new S3Storage({ bucket: 'lake', client });

    const error = await storage.put('s.json', '{}', { ifMatch: 'abc' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PreconditionFailedError);
    expect(error).toMatchObject({ key: 's.json', retryable: true });
  });

  it('takes a 412 that meets its own bytes for its own write (the answer was lost, the SDK retried)', async () => {
    s3Mock.on(PutObjectCommand).rejects(s3Error('PreconditionFailed', 412));
    s3Mock.on(GetObjectCommand).resolves(storedBody('{"token":"mine"}', '"applied"'));
    const storage = new S3Storage({ bucket: 'lake', client });

    const result = await storage.put('s.json', '{"token":"mine"}', { ifNoneMatch: '*' });

    expect(result.etag).toBe('applied');
  });

  it('retries a 409 ConditionalRequestConflict, as S3 documents, and then writes', async () => {
    s3Mock
      .on(PutObjectCommand)
      .rejectsOnce(s3Error('ConditionalRequestConflict', 409))
      .rejectsOnce(s3Error('ConditionalRequestConflict', 409))
      .resolves({ ETag: '"won"' });
    const waits: number[] = [];
    const storage = new S3Storage({ bucket: 'lake', client, sleep: async (ms) => void waits.push(ms) });

    const result = await storage.put('runs/m.json', '{}', { ifNoneMatch: '*' });

    expect(result.etag).toBe('won');
    expect(s3Mock.commandCalls(PutObjectCommand)).toHaveLength(3);
    expect(waits).toEqual([100, 200]);
  });

  it('never takes a 409 that persists for a lost race: it stays a retryable storage error', async () => {
    s3Mock.on(PutObjectCommand).rejects(s3Error('ConditionalRequestConflict', 409));
    const storage = new S3Storage({ bucket: 'lake', client, sleep: async () => {} });

    const error = await storage.put('runs/m.json', '{}', { ifNoneMatch: '*' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StorageError);
    expect(error).not.toBeInstanceOf(PreconditionFailedError);
    expect(error).toMatchObject({ retryable: true });
    expect(s3Mock.commandCalls(PutObjectCommand)).toHaveLength(5);
  });

  it('sends a conditional write above the multipart threshold as one PutObject', async () => {
    s3Mock.on(PutObjectCommand).resolves({ ETag: '"big"' });
    const storage = new S3Storage({ bucket: 'lake', client, multipartThresholdBytes: MIN_PART_BYTES });

    await storage.put('big.parquet', new Uint8Array(MIN_PART_BYTES + 1), { ifNoneMatch: '*' });

    expect(s3Mock.commandCalls(PutObjectCommand)).toHaveLength(1);
    expect(s3Mock.commandCalls(CreateMultipartUploadCommand)).toHaveLength(0);
    expect(storage.stats().writes).toBe(1);
  });

  it('marks server errors retryable and access errors not', async () => {
    const storage = new S3Storage({ bucket: 'lake', client });
    s3Mock
      .on(GetObjectCommand)
      .rejectsOnce(s3Error('SlowDown', 503))
      .rejectsOnce(s3Error('AccessDenied', 403));

    const slow = await storage.get('a.json').catch((e: unknown) => e);
    const denied = await storage.get('a.json').catch((e: unknown) => e);

    expect(slow).toBeInstanceOf(StorageError);
    expect(slow).toMatchObject({ retryable: true, key: 'a.json' });
    expect(denied).toBeInstanceOf(StorageError);
    expect(denied).toMatchObject({ retryable: false, message: expect.stringContaining('AccessDenied') });
  });

  it('throws when DeleteObjects reports a key it could not delete', async () => {
    s3Mock
      .on(DeleteObjectsCommand)
      .resolves({ Errors: [{ Key: 'p/a', Code: 'AccessDenied', Message: 'no' }] });
    const storage = new S3Storage({ bucket: 'lake', prefix: 'p', client });

    await expect(storage.delete(['a', 'b'])).rejects.toMatchObject({ name: 'StorageError', key: 'a' });
  });

  it('rejects a multipart threshold below the 5 MiB part minimum and a bad page size', () => {
    expect(() => new S3Storage({ bucket: 'lake', client, multipartThresholdBytes: 1024 })).toThrow(
      ConfigError,
    );
    expect(() => new S3Storage({ bucket: 'lake', client, listPageSize: 0 })).toThrow(ConfigError);
    expect(() => new S3Storage({ bucket: 'lake', client, listPageSize: 1001 })).toThrow(ConfigError);
  });

  it('formats its location as s3://bucket/prefix', () => {
    expect(new S3Storage({ bucket: 'lake', client }).location).toBe('s3://lake');
    expect(new S3Storage({ bucket: 'lake', prefix: 'a/b/', client }).location).toBe('s3://lake/a/b');
    expect(new S3Storage({ bucket: 'lake', prefix: '/a/b', client }).location).toBe('s3://lake/a/b');
    expect(() => new S3Storage({ bucket: 'lake', prefix: 'a/../b', client })).toThrow(ConfigError);
  });
});

describe('contentTypeFor', () => {
  it.each([
    ['runs/dt=2026-11-02/r.json', 'application/json'],
    ['raw/jobs/dt=2026-11-02/a.jsonl.gz', 'application/gzip'],
    ['x.jsonl', 'application/x-ndjson'],
    ['parquet/jobs/dt=2026-11-02/a.parquet', 'application/vnd.apache.parquet'],
    ['state/blob', 'application/octet-stream'],
  ])('gives %s the type %s', (key, type) => {
    expect(contentTypeFor(key)).toBe(type);
  });

  it('sets no Content-Encoding on .jsonl.gz so the gzip bytes stay as written', async () => {
    s3Mock.on(PutObjectCommand).resolves({ ETag: '"x"' });
    const storage = new S3Storage({ bucket: 'lake', client });

    await storage.put('raw/jobs/dt=2026-11-02/a.jsonl.gz', new Uint8Array([0x1f, 0x8b]));

    const input = s3Mock.commandCalls(PutObjectCommand)[0]?.args[0].input;
    expect(input?.ContentType).toBe('application/gzip');
    expect(input?.ContentEncoding).toBeUndefined();
  });
});
