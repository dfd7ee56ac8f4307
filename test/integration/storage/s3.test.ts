/**
 * S3Storage against fauxqs (a real S3 HTTP server on 127.0.0.1), with the SDK's default
 * checksum settings. Conditional writes are not covered here: fauxqs 2 ignores If-Match and
 * If-None-Match on PutObject (the last test pins that down); their requests and S3's 412/409
 * answers are checked against a mocked client in test/unit/storage/s3.test.ts, and their
 * behaviour against LocalStorage in test/integration/storage/contract.test.ts.
 */
import { createHash } from 'node:crypto';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { PreconditionFailedError } from '../../../shared/errors.js';
import { openStorage } from '../../../shared/storage/open.js';
import {
  MIN_PART_BYTES,
  S3Storage,
  type S3StorageOptions,
  STREAM_PART_BUFFERS,
  STREAM_PART_BYTES,
} from '../../../shared/storage/s3.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

const BUCKET = 'lake';
const md5 = (body: Uint8Array | string): string => createHash('md5').update(body).digest('hex');

async function collect(keys: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of keys) out.push(key);
  return out;
}

/** Puts `keys` with at most `width` requests in flight. */
async function putAll(storage: S3Storage, keys: readonly string[], width = 32): Promise<void> {
  for (let i = 0; i < keys.length; i += width) {
    await Promise.all(keys.slice(i, i + width).map((key) => storage.put(key, key)));
  }
}

let aws: LocalAws;
let client: S3Client;
let testNumber = 0;
let prefix: string;
const storageFor = (options: Partial<S3StorageOptions> = {}): S3Storage =>
  new S3Storage({ bucket: BUCKET, prefix, client, ...options });
/** Logged requests of one kind, e.g. `POST ?uploads`. */
const requestsMatching = (method: string, query: RegExp) =>
  aws.requests().filter((r) => r.method === method && query.test(r.url.slice(r.url.indexOf('?'))));

beforeAll(async () => {
  aws = await startLocalAws();
  await aws.createBucket(BUCKET);
  client = aws.s3Client();
});

afterAll(async () => {
  await aws.close();
});

beforeEach(() => {
  prefix = `t${++testNumber}`;
  aws.clearRequests();
});

describe('S3Storage on fauxqs', () => {
  it('round-trips an object under the prefix with its content type and no Content-Encoding', async () => {
    const storage = storageFor();
    const body = new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3]);

    const { etag } = await storage.put('raw/jobs/dt=2026-11-02/a.jsonl.gz', body);

    const got = await storage.get('raw/jobs/dt=2026-11-02/a.jsonl.gz');
    expect(got?.body).toEqual(body);
    expect(got?.etag).toBe(etag);
    expect(etag).toBe(md5(body));
    const raw = await client.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}/raw/jobs/dt=2026-11-02/a.jsonl.gz` }),
    );
    expect(raw.ContentType).toBe('application/gzip');
    expect(raw.ContentEncoding).toBeUndefined();
  });

  it('returns undefined for a missing key', async () => {
    const storage = storageFor();

    expect(await storage.get('nothing/here.json')).toBeUndefined();
    expect(storage.stats().reads).toBe(1);
  });

  it('uploads a body above the threshold in parts and counts every part request', async () => {
    const storage = storageFor({ multipartThresholdBytes: MIN_PART_BYTES });
    // 5 + 5 + 1 MiB: three parts of lib-storage's minimum size.
    const body = new Uint8Array(11 * 1024 * 1024);
    for (let i = 0; i < body.length; i += 4096) body[i] = i % 251;

    const { etag } = await storage.put('parquet/questions/dt=2026-11-02/big.parquet', body);

    expect(etag).toMatch(/-3$/); // S3's multipart ETag: md5 of the part md5s, then the part count
    expect(requestsMatching('POST', /[?&]uploads\b/)).toHaveLength(1);
    expect(requestsMatching('PUT', /[?&]partNumber=/)).toHaveLength(3);
    expect(requestsMatching('POST', /[?&]uploadId=/)).toHaveLength(1);
    expect(storage.stats().writes).toBe(aws.requests().length);
    expect(storage.stats().writes).toBe(5);
    const got = await storage.get('parquet/questions/dt=2026-11-02/big.parquet');
    expect(got?.etag).toBe(etag);
    expect(md5(got!.body)).toBe(md5(body));
  });

  it('sends a body of exactly the threshold as one PutObject', async () => {
    const storage = storageFor({ multipartThresholdBytes: MIN_PART_BYTES });

    await storage.put('exact.bin', new Uint8Array(MIN_PART_BYTES));

    expect(aws.requests().map((r) => r.method)).toEqual(['PUT']);
    expect(requestsMatching('PUT', /[?&]partNumber=/)).toHaveLength(0);
    expect(storage.stats().writes).toBe(1);
  });

  it('lists more than 1000 keys across pages and deletes them in chunks of 1000', async () => {
    const storage = storageFor();
    const keys = Array.from({ length: 1001 }, (_, i) => `raw/jobs/k${String(i).padStart(4, '0')}`);
    await putAll(storage, [...keys].reverse());
    aws.clearRequests();

    const listed = await collect(storage.list('raw/'));

    expect(listed).toEqual(keys);
    expect(storage.stats().lists).toBe(2);
    expect(requestsMatching('GET', /[?&]list-type=2/)).toHaveLength(2);

    await storage.delete(keys);

    expect(storage.stats().deletes).toBe(2);
    expect(requestsMatching('POST', /[?&]delete/)).toHaveLength(2);
    expect(await collect(storage.list(''))).toEqual([]);
  });

  it('follows continuation tokens with a small page size', async () => {
    const storage = storageFor({ listPageSize: 4 });
    const keys = Array.from({ length: 10 }, (_, i) => `p/${i}`);
    await putAll(storage, keys);

    expect(await collect(storage.list('p/'))).toEqual(keys);
    expect(storage.stats().lists).toBe(3);
  });

  it('sees only the keys under its own prefix', async () => {
    const mine = storageFor();
    const other = new S3Storage({ bucket: BUCKET, prefix: `${prefix}-other`, client });
    await mine.put('a.json', '1');
    await other.put('a.json', '2');

    expect(await collect(mine.list(''))).toEqual(['a.json']);
    expect(new TextDecoder().decode((await mine.get('a.json'))?.body)).toBe('1');
    await mine.delete(['a.json']);
    expect(await other.get('a.json')).toBeDefined();
  });

  it('counts exactly the requests it sends', async () => {
    const storage = storageFor({ listPageSize: 2 });
    await storage.put('a', '1');
    await storage.put('b', '2');
    await storage.put('c', '3');
    await storage.get('a');
    await storage.get('missing');
    await collect(storage.list(''));
    await storage.delete(['a', 'b', 'missing']);

    expect(storage.stats()).toEqual({ reads: 2, writes: 3, lists: 2, deletes: 1 });
    expect(aws.requests()).toHaveLength(8);
  });

  it('works through openStorage with an endpoint', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', aws.credentials.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', aws.credentials.secretAccessKey);
    try {
      const storage = openStorage(`s3://${BUCKET}/${prefix}/out`, {
        region: aws.region,
        endpoint: aws.endpoint,
        forcePathStyle: true,
      });
      await storage.put('runs/dt=2026-11-02/r.json', '{"ok":true}');

      expect(storage.location).toBe(`s3://${BUCKET}/${prefix}/out`);
      expect(await collect(storage.list('runs/'))).toEqual(['runs/dt=2026-11-02/r.json']);
      const raw = await client.send(
        new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}/out/runs/dt=2026-11-02/r.json` }),
      );
      expect(raw.ContentType).toBe('application/json');
    } finally {
      vi.unstubAllEnvs();
    }
  });

  // The headers S3 decides on reach the server (test/helpers/fauxqs.ts enforces them, as S3
  // does; the storage contract runs the conditional cases against it).
  it('sends If-None-Match and If-Match on conditional puts, and a refused one changes nothing', async () => {
    const storage = storageFor();
    const { etag } = await storage.put('s.json', 'first');

    await expect(storage.put('s.json', 'second', { ifNoneMatch: '*' })).rejects.toThrow(
      PreconditionFailedError,
    );
    expect(requestsMatching('PUT', /x-id=PutObject/).at(-1)?.headers['if-none-match']).toBe('*');
    await storage.put('s.json', 'third', { ifMatch: etag });
    expect(requestsMatching('PUT', /x-id=PutObject/).at(-1)?.headers['if-match']).toBe(`"${etag}"`);
    expect(new TextDecoder().decode((await storage.get('s.json'))?.body)).toBe('third');
  });
});

/** `total` deterministic bytes in chunks of 1-300 KB, as a publish hands them to `putStream`. */
async function* chunksOf(total: number, seed: number): AsyncGenerator<Uint8Array> {
  let sent = 0;
  while (sent < total) {
    const size = Math.min(total - sent, 1_000 + ((sent * 31 + seed * 7_919) % 300_000));
    const chunk = new Uint8Array(size);
    for (let i = 0; i < size; i += 512) chunk[i] = (sent + i + seed) % 251;
    sent += size;
    yield chunk;
  }
}

const md5Of = async (chunks: AsyncIterable<Uint8Array>): Promise<string> => {
  const hash = createHash('md5');
  for await (const chunk of chunks) hash.update(chunk);
  return hash.digest('hex');
};

describe('S3Storage streamed uploads', () => {
  /** The part bodies the SDK sends (UploadPart, PutObject) through `counted`, and the most bytes in flight at once. */
  function partCounter(counted: S3Client) {
    const bodies = new Set<string>();
    let inFlight = 0;
    let peakInFlight = 0;
    let parts = 0;
    counted.middlewareStack.add(
      (next, context) => async (args) => {
        const body = (args.input as { Body?: unknown }).Body;
        if (context.commandName !== 'UploadPartCommand' || !(body instanceof Uint8Array)) return next(args);
        // A part buffer is a place in memory: its ArrayBuffer and its offset in it.
        bodies.add(`${bufferId(body.buffer)}@${body.byteOffset}`);
        parts += 1;
        inFlight += body.byteLength;
        peakInFlight = Math.max(peakInFlight, inFlight);
        try {
          return await next(args);
        } finally {
          inFlight -= body.byteLength;
        }
      },
      { step: 'initialize', name: 'partCounter' },
    );
    return { bodies, parts: () => parts, peakInFlight: () => peakInFlight };
  }
  const ids = new WeakMap<ArrayBufferLike, number>();
  let lastId = 0;
  const bufferId = (buffer: ArrayBufferLike): number => {
    if (!ids.has(buffer)) ids.set(buffer, ++lastId);
    return ids.get(buffer)!;
  };

  it('sends every part of several uploads at once from its fixed part buffers, never more bytes than they hold', async () => {
    const counted = aws.s3Client();
    const seen = partCounter(counted);
    const storage = new S3Storage({ bucket: BUCKET, prefix, client: counted });
    // Three outputs at once, each 3 parts and a bit: 12 parts, more than the buffers.
    const size = 3 * STREAM_PART_BYTES + 12_345;

    const written = await Promise.all(
      [1, 2, 3].map((seed) => storage.putStream(`out/${seed}.parquet`, chunksOf(size, seed))),
    );

    expect(seen.parts()).toBe(12);
    // lib-storage's Upload (or any part allocated anew) would send 12 distinct buffers, 4 per upload in flight.
    expect(seen.bodies.size).toBeLessThanOrEqual(STREAM_PART_BUFFERS);
    expect(seen.peakInFlight()).toBeLessThanOrEqual(STREAM_PART_BUFFERS * STREAM_PART_BYTES);
    expect(storage.streamBufferBytes).toBeLessThanOrEqual(STREAM_PART_BUFFERS * STREAM_PART_BYTES);
    for (const [i, seed] of [1, 2, 3].entries()) {
      expect(written[i]!.bytes).toBe(size);
      const got = await storage.get(`out/${seed}.parquet`);
      expect(got?.etag).toBe(written[i]!.etag);
      expect(got?.etag).toMatch(/-4$/);
      expect(md5(got!.body)).toBe(await md5Of(chunksOf(size, seed)));
    }
    expect(storage.stats().writes).toBe(3 * (4 + 2));
    expect(storage.stats().writes).toBe(
      requestsMatching('PUT', /./).length + requestsMatching('POST', /./).length,
    );
  });

  it('sends a body of at most one part as one PutObject, an empty one included', async () => {
    const storage = storageFor();

    const one = await storage.putStream('one.bin', chunksOf(STREAM_PART_BYTES, 4));
    const empty = await storage.putStream('empty.bin', chunksOf(0, 5));

    expect(one.bytes).toBe(STREAM_PART_BYTES);
    expect(empty.bytes).toBe(0);
    expect(aws.requests().map((r) => r.method)).toEqual(['PUT', 'PUT']);
    expect(md5((await storage.get('one.bin'))!.body)).toBe(await md5Of(chunksOf(STREAM_PART_BYTES, 4)));
    expect((await storage.get('empty.bin'))!.body).toHaveLength(0);
    expect(storage.stats().writes).toBe(2);
  });

  it('aborts the upload when its source fails, and gives its buffers back for the next uploads', async () => {
    const storage = storageFor();
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield* chunksOf(2 * STREAM_PART_BYTES + 1, 6);
      throw new Error('the regroup failed');
    }

    await expect(storage.putStream('bad.parquet', failing())).rejects.toThrow(/cannot write .*bad\.parquet/);
    expect(requestsMatching('DELETE', /[?&]uploadId=/)).toHaveLength(1);
    expect(await storage.get('bad.parquet')).toBeUndefined();
    // Every buffer was given back: as many uploads at once as there are buffers still all complete.
    const size = STREAM_PART_BYTES + 1;
    const after = await Promise.all(
      Array.from({ length: STREAM_PART_BUFFERS }, (_, i) =>
        storage.putStream(`ok/${i}.bin`, chunksOf(size, i)),
      ),
    );
    expect(after.map((w) => w.bytes)).toEqual(Array(STREAM_PART_BUFFERS).fill(size));
  });
});
