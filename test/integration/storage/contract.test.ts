/**
 * The Storage contract, run unchanged against every adapter: LocalStorage on a temp folder and
 * S3Storage on fauxqs (real S3 HTTP on 127.0.0.1).
 *
 * Conditional writes (ifMatch / ifNoneMatch) run on both: fauxqs 2 ignores If-Match /
 * If-None-Match on PutObject, and test/helpers/fauxqs.ts enforces S3's rules in front of it.
 * S3's 409 ConditionalRequestConflict is tested with a mocked client in test/unit/storage/s3.test.ts.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PreconditionFailedError, StorageError } from '../../../shared/errors.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

interface Adapter {
  name: string;
  /** Whether the backend enforces ifMatch / ifNoneMatch (see the file comment). */
  conditionalWrites: boolean;
  setUp(): Promise<void>;
  /** A fresh, empty storage for one test. */
  open(): Storage;
  tearDown(): Promise<void>;
}

let tempRoot = '';
let aws: LocalAws | undefined;
let opened = 0;

const adapters: Adapter[] = [
  {
    name: 'LocalStorage',
    conditionalWrites: true,
    async setUp() {
      tempRoot = await mkdtemp(join(tmpdir(), 'storage-contract-'));
    },
    open: () => new LocalStorage(join(tempRoot, `s${++opened}`)),
    async tearDown() {
      await rm(tempRoot, { recursive: true, force: true });
    },
  },
  {
    name: 'S3Storage on fauxqs',
    conditionalWrites: true,
    async setUp() {
      aws = await startLocalAws();
      await aws.createBucket('contract');
    },
    open: () => new S3Storage({ bucket: 'contract', prefix: `s${++opened}`, client: aws!.s3Client() }),
    async tearDown() {
      await aws?.close();
    },
  },
];

const text = (body: Uint8Array | undefined): string | undefined =>
  body === undefined ? undefined : new TextDecoder().decode(body);

/** File descriptors open in this process (files and sockets alike; Linux). */
const openDescriptors = async (): Promise<number> => (await readdir('/proc/self/fd')).length;

async function collect(keys: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of keys) out.push(key);
  return out;
}

describe.each(adapters)('Storage contract: $name', (adapter) => {
  beforeAll(() => adapter.setUp());
  afterAll(() => adapter.tearDown());

  it('round-trips strings and bytes, the empty body included', async () => {
    const storage = adapter.open();
    const bytes = new Uint8Array([0, 255, 1, 254]);

    const put1 = await storage.put('a/text.json', '{"é":"ü"}');
    const put2 = await storage.put('a/bytes.bin', bytes);
    await storage.put('a/empty', '');

    const got = await storage.get('a/text.json');
    expect(got).toMatchObject({ body: expect.any(Uint8Array), etag: put1.etag });
    // The storage's own clock stamps a write where it has one (S3's LastModified); a folder has none.
    if (got?.lastModified !== undefined) expect(got.lastModified).toBeInstanceOf(Date);
    expect(text((await storage.get('a/text.json'))?.body)).toBe('{"é":"ü"}');
    expect((await storage.get('a/bytes.bin'))?.body).toEqual(bytes);
    expect((await storage.get('a/bytes.bin'))?.etag).toBe(put2.etag);
    expect((await storage.get('a/empty'))?.body.byteLength).toBe(0);
  });

  it('streams an object in chunks that join to its bytes, and a missing key or a folder as undefined', async () => {
    const storage = adapter.open();
    // Larger than one chunk of either adapter's stream, with no repeating pattern to hide a misplaced chunk.
    const big = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 7919) % 251);
    await storage.put('dir/big.bin', big);
    await storage.put('dir/empty', '');

    const chunks: Uint8Array[] = [];
    for await (const chunk of (await storage.getStream('dir/big.bin'))!) chunks.push(chunk);
    const empty: Uint8Array[] = [];
    for await (const chunk of (await storage.getStream('dir/empty'))!) empty.push(chunk);

    expect(Buffer.concat(chunks).equals(Buffer.from(big))).toBe(true);
    expect(Buffer.concat(empty).byteLength).toBe(0);
    expect(await storage.getStream('missing')).toBeUndefined();
    expect(await storage.getStream('dir')).toBeUndefined();
  });

  it('frees the file or connection of a stream stopped part way, and of one opened but never read', async () => {
    const storage = adapter.open();
    await storage.put('big.bin', new Uint8Array(4 * 1024 * 1024));
    await storage.get('big.bin'); // S3: its connection is kept alive, and counted before
    const before = await openDescriptors();

    for await (const _ of (await storage.getStream('big.bin'))!) break;
    await (await storage.getStream('big.bin'))![Symbol.asyncIterator]().return?.();
    await new Promise((resolve) => setTimeout(resolve, 100)); // closes are asynchronous

    expect(await openDescriptors()).toBeLessThanOrEqual(before);
  });

  it('overwrites an object with a new ETag; the same content keeps its ETag', async () => {
    const storage = adapter.open();
    const first = await storage.put('k', 'one');
    const second = await storage.put('k', 'two');
    const third = await storage.put('k', 'one');

    expect(second.etag).not.toBe(first.etag);
    expect(third.etag).toBe(first.etag);
    expect(text((await storage.get('k'))?.body)).toBe('one');
  });

  it('reads a byte range of an object, cut at its end; undefined for a missing key', async () => {
    const storage = adapter.open();
    await storage.put('r/bytes.bin', new Uint8Array([10, 11, 12, 13, 14, 15]));

    const range = async (start: number, end: number) => [
      ...((await storage.getRange?.('r/bytes.bin', start, end)) ?? []),
    ];
    expect(await range(1, 4)).toEqual([11, 12, 13]);
    expect(await range(4, 100)).toEqual([14, 15]);
    expect(await storage.getRange?.('r/missing', 0, 4)).toBeUndefined();
  });

  it('returns undefined for a missing key and for a prefix of other keys', async () => {
    const storage = adapter.open();
    await storage.put('dir/file.json', '{}');

    expect(await storage.get('missing')).toBeUndefined();
    expect(await storage.get('dir')).toBeUndefined();
  });

  it('lists keys under a string prefix in byte order', async () => {
    const storage = adapter.open();
    const keys = [
      'raw/jobs/dt=2026-11-02/b',
      'raw/campaigns/dt=2026-11-02/a',
      'raw/a',
      'runs/x',
      'raw/campaigns-x/y',
    ];
    for (const key of keys) await storage.put(key, key);

    expect(await collect(storage.list(''))).toEqual([...keys].sort());
    expect(await collect(storage.list('raw/camp'))).toEqual([
      'raw/campaigns-x/y',
      'raw/campaigns/dt=2026-11-02/a',
    ]);
    expect(await collect(storage.list('raw/jobs/'))).toEqual(['raw/jobs/dt=2026-11-02/b']);
    expect(await collect(storage.list('nothing/'))).toEqual([]);
  });

  it('deletes keys and ignores missing ones', async () => {
    const storage = adapter.open();
    await storage.put('a/1', '1');
    await storage.put('a/2', '2');

    await storage.delete(['a/1', 'a/3', 'b/4']);
    await storage.delete([]);

    expect(await storage.get('a/1')).toBeUndefined();
    expect(await collect(storage.list(''))).toEqual(['a/2']);
  });

  it.each(['', '/abs', '../up', 'a/../b', 'a//b', 'a/'])('rejects the key %j', async (key) => {
    const storage = adapter.open();

    await expect(storage.put(key, 'x')).rejects.toThrow(StorageError);
    await expect(storage.get(key)).rejects.toThrow(StorageError);
    await expect(storage.delete([key])).rejects.toThrow(StorageError);
    expect(await collect(storage.list(''))).toEqual([]);
  });

  it('keeps every key through a sweep, even keys named like temp or lock files (adapters with one)', async () => {
    const storage = adapter.open();
    const keys = ['a/.hidden', 'a/x.tmp', 'b/.lock', 'b/c/d.json.lock', 'b/c/e.stale'];
    for (const key of keys) await storage.put(key, key);

    // The most eager sweep there is: every leftover counts as old.
    const swept = await storage.sweep?.({ olderThanMs: 0, now: new Date(Date.now() + 86_400_000) });

    expect(swept?.removed ?? []).toEqual([]);
    expect(await collect(storage.list(''))).toEqual(keys);
    for (const key of keys) expect(text((await storage.get(key))?.body)).toBe(key);
  });

  it('counts one request per small operation', async () => {
    const storage = adapter.open();
    await storage.put('a', '1');
    await storage.get('a');
    await collect(storage.list(''));
    await storage.delete(['a']);

    expect(storage.stats()).toEqual({ reads: 1, writes: 1, lists: 1, deletes: 1 });
  });

  describe.runIf(adapter.conditionalWrites)('conditional writes', () => {
    it('writes with ifNoneMatch only when the key is free', async () => {
      const storage = adapter.open();
      await storage.put('claim', 'first', { ifNoneMatch: '*' });

      await expect(storage.put('claim', 'second', { ifNoneMatch: '*' })).rejects.toThrow(
        PreconditionFailedError,
      );
      expect(text((await storage.get('claim'))?.body)).toBe('first');
    });

    it('writes with ifMatch only when the ETag is current', async () => {
      const storage = adapter.open();
      const { etag } = await storage.put('state', 'v1');
      await storage.put('state', 'v2', { ifMatch: etag });

      await expect(storage.put('state', 'v3', { ifMatch: etag })).rejects.toThrow(PreconditionFailedError);
      await expect(storage.put('absent', 'v1', { ifMatch: etag })).rejects.toThrow(PreconditionFailedError);
      expect(text((await storage.get('state'))?.body)).toBe('v2');
    });

    it('lets exactly one of two concurrent writers with the same ETag win', async () => {
      const storage = adapter.open();
      const { etag } = await storage.put('state', 'v1');

      const results = await Promise.allSettled([
        storage.put('state', 'A', { ifMatch: etag }),
        storage.put('state', 'B', { ifMatch: etag }),
      ]);

      const winners = results.filter((r) => r.status === 'fulfilled');
      expect(winners).toHaveLength(1);
      const rejected = results.find((r) => r.status === 'rejected');
      expect(rejected?.status === 'rejected' && rejected.reason).toBeInstanceOf(PreconditionFailedError);
    });
  });
});
