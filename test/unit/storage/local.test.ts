import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PreconditionFailedError, StorageError } from '../../../shared/errors.js';
import { LocalStorage } from '../../../shared/storage/local.js';

const run = promisify(execFile);
const md5 = (text: string | Uint8Array): string => createHash('md5').update(text).digest('hex');
const text = (body: Uint8Array): string => Buffer.from(body).toString('utf8');

async function collect(keys: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of keys) out.push(key);
  return out;
}

/** Every file under a folder, internal ones included, relative paths. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

/** Reads a counter object, adds one with ifMatch, retries on a lost race. */
async function increment(storage: LocalStorage, key: string): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const current = await storage.get(key);
    const next = Number(current ? text(current.body) : '0') + 1;
    try {
      await storage.put(key, String(next), current ? { ifMatch: current.etag } : { ifNoneMatch: '*' });
      return attempt;
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  }
}

let root: string;
let storage: LocalStorage;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'local-storage-'));
  storage = new LocalStorage(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('LocalStorage', () => {
  it('reports its absolute folder as location', () => {
    const relative = new LocalStorage('some/out');
    expect(relative.location).toBe(resolve('some/out'));
    expect(storage.location).toBe(root);
  });

  it('writes a file at the key path and reads it back with an md5 ETag', async () => {
    const { etag } = await storage.put('raw/jobs/dt=2026-11-02/a.jsonl.gz', 'hello');

    expect(etag).toBe(md5('hello'));
    const got = await storage.get('raw/jobs/dt=2026-11-02/a.jsonl.gz');
    expect(got && text(got.body)).toBe('hello');
    expect(got?.etag).toBe(etag);
    expect(text(await readFile(join(root, 'raw/jobs/dt=2026-11-02/a.jsonl.gz')))).toBe('hello');
  });

  it('overwrites an object and leaves no temp or lock files behind', async () => {
    await storage.put('state/a.json', '1');
    await storage.put('state/a.json', new Uint8Array([50]));

    expect(text((await storage.get('state/a.json'))!.body)).toBe('2');
    expect(await filesUnder(root)).toEqual(['state/a.json']);
  });

  it('returns undefined for a missing key, and for a key that is a folder of other keys', async () => {
    await storage.put('a/b.json', '{}');

    expect(await storage.get('missing.json')).toBeUndefined();
    expect(await storage.get('nowhere/x.json')).toBeUndefined();
    expect(await storage.get('a')).toBeUndefined();
    expect(await storage.get('a/b.json/c')).toBeUndefined();
  });

  it('lists every key under a prefix recursively in byte order', async () => {
    const keys = [
      'runs/x.json',
      'raw/jobs/b',
      'raw/campaigns/z',
      'raw/campaigns/a/b',
      'raw/campaigns-old/q',
      'raw/a',
    ];
    for (const key of keys) await storage.put(key, key);

    expect(await collect(storage.list(''))).toEqual([...keys].sort());
    expect(await collect(storage.list('raw/'))).toEqual([
      'raw/a',
      'raw/campaigns-old/q',
      'raw/campaigns/a/b',
      'raw/campaigns/z',
      'raw/jobs/b',
    ]);
    expect(await collect(storage.list('raw/campaigns/'))).toEqual(['raw/campaigns/a/b', 'raw/campaigns/z']);
    // A prefix is a string prefix, as on S3, not a folder name.
    expect(await collect(storage.list('raw/camp'))).toEqual([
      'raw/campaigns-old/q',
      'raw/campaigns/a/b',
      'raw/campaigns/z',
    ]);
    expect(await collect(storage.list('raw/jobs/b'))).toEqual(['raw/jobs/b']);
    expect(await collect(storage.list('parquet/'))).toEqual([]);
  });

  it('lists nothing in a folder that does not exist yet', async () => {
    const fresh = new LocalStorage(join(root, 'not-yet'));
    expect(await collect(fresh.list(''))).toEqual([]);
  });

  it('hides its temp and lock files from list()', async () => {
    await storage.put('a/x.json', '1');
    await writeFile(join(root, 'a', '.~x.json.lock'), '');
    await writeFile(join(root, 'a', '.~x.json.abc.tmp'), 'half');

    expect(await collect(storage.list(''))).toEqual(['a/x.json']);
  });

  it('deletes keys and ignores missing ones', async () => {
    await storage.put('a/1', '1');
    await storage.put('a/2', '2');

    await storage.delete(['a/1', 'a/missing', 'nowhere/deep/x']);

    expect(await storage.get('a/1')).toBeUndefined();
    expect(await collect(storage.list(''))).toEqual(['a/2']);
  });

  it('counts one operation per call in stats()', async () => {
    await storage.put('a', '1');
    await storage.put('b', '1');
    await storage.get('a');
    await collect(storage.list(''));
    await storage.delete(['a', 'b']);

    expect(storage.stats()).toEqual({ reads: 1, writes: 2, lists: 1, deletes: 1 });
  });

  describe('keys', () => {
    const badKeys = [
      '',
      '/abs',
      '../x',
      'a/../../x',
      'a/..',
      '..',
      'a//b',
      'a/',
      './a',
      'a/./b',
      '.~a',
      'a\\b',
    ];

    it.each(badKeys)('rejects the key %j everywhere', async (key) => {
      await expect(storage.put(key, 'x')).rejects.toThrow(StorageError);
      await expect(storage.get(key)).rejects.toThrow(StorageError);
      await expect(storage.delete(['ok', key])).rejects.toThrow(StorageError);
    });

    it('rejects list prefixes that leave the root', async () => {
      await expect(collect(storage.list('../'))).rejects.toThrow(StorageError);
      await expect(collect(storage.list('/etc/'))).rejects.toThrow(StorageError);
    });

    it('writes nothing outside the root for a rejected key', async () => {
      await expect(storage.put('../escaped', 'x')).rejects.toThrow(StorageError);
      await expect(stat(join(root, '..', 'escaped'))).rejects.toThrow(/ENOENT/);
    });
  });

  describe('conditional writes', () => {
    it('writes with ifNoneMatch only when the key is free', async () => {
      await storage.put('s.json', 'first', { ifNoneMatch: '*' });

      await expect(storage.put('s.json', 'second', { ifNoneMatch: '*' })).rejects.toThrow(
        PreconditionFailedError,
      );
      expect(text((await storage.get('s.json'))!.body)).toBe('first');
    });

    it('writes with ifMatch only when the ETag is current', async () => {
      const { etag } = await storage.put('s.json', 'v1');
      const { etag: etag2 } = await storage.put('s.json', 'v2', { ifMatch: etag });

      await expect(storage.put('s.json', 'v3', { ifMatch: etag })).rejects.toThrow(PreconditionFailedError);
      await expect(storage.put('other.json', 'v1', { ifMatch: etag })).rejects.toThrow(
        PreconditionFailedError,
      );
      expect(await storage.get('s.json')).toMatchObject({ etag: etag2 });
      expect(await storage.get('other.json')).toBeUndefined();
    });

    it('leaves no temp file behind after a lost race', async () => {
      await storage.put('s.json', 'v1');
      await expect(storage.put('s.json', 'v2', { ifNoneMatch: '*' })).rejects.toThrow(
        PreconditionFailedError,
      );

      expect(await filesUnder(root)).toEqual(['s.json']);
    });

    it('lets exactly one of several concurrent ifNoneMatch writers win', async () => {
      const writers = Array.from({ length: 8 }, (_, i) =>
        storage.put('claim.json', `writer-${i}`, { ifNoneMatch: '*' }),
      );

      const results = await Promise.allSettled(writers);

      const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      expect(won).toHaveLength(1);
      for (const r of results) {
        if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(PreconditionFailedError);
      }
      expect(text((await storage.get('claim.json'))!.body)).toBe(`writer-${won[0]}`);
    });

    it('lets exactly one of two concurrent ifMatch writers with the same ETag win', async () => {
      const { etag } = await storage.put('state.json', 'v1');

      const results = await Promise.allSettled([
        storage.put('state.json', 'from A', { ifMatch: etag }),
        storage.put('state.json', 'from B', { ifMatch: etag }),
      ]);

      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const loser = results.find((r) => r.status === 'rejected');
      expect(loser?.status === 'rejected' && loser.reason).toBeInstanceOf(PreconditionFailedError);
    });

    it('loses no update when concurrent writers increment a counter with ifMatch', async () => {
      const loop = async () => {
        for (let i = 0; i < 15; i++) await increment(storage, 'counter');
      };

      await Promise.all([loop(), loop(), loop()]);

      expect(text((await storage.get('counter'))!.body)).toBe('45');
    });

    it('loses no update when two processes increment a counter with ifMatch', async () => {
      // Each child is a separate Node process (tsx for the TypeScript import) sharing the folder.
      const script = `
        import { LocalStorage } from ${JSON.stringify(resolve('shared/storage/local.ts'))};
        import { PreconditionFailedError } from ${JSON.stringify(resolve('shared/errors.ts'))};
        const storage = new LocalStorage(process.argv[1]);
        for (let i = 0; i < 20; i++) {
          for (;;) {
            const current = await storage.get('counter');
            const next = Number(current ? Buffer.from(current.body).toString() : '0') + 1;
            try {
              await storage.put('counter', String(next), current ? { ifMatch: current.etag } : { ifNoneMatch: '*' });
              break;
            } catch (error) {
              if (!(error instanceof PreconditionFailedError)) throw error;
            }
          }
        }`;
      const child = () =>
        run(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script, root], {
          cwd: process.cwd(),
        });

      await Promise.all([child(), child()]);

      expect(text((await storage.get('counter'))!.body)).toBe('40');
    });

    it('breaks a lock left behind by a writer that died', async () => {
      await mkdir(join(root, 'state'), { recursive: true });
      const lock = join(root, 'state', '.~s.json.lock');
      await writeFile(lock, '12345@elsewhere');
      const longAgo = new Date(Date.now() - 60_000);
      await utimes(lock, longAgo, longAgo);

      await storage.put('state/s.json', 'v1', { ifNoneMatch: '*' });

      expect(text((await storage.get('state/s.json'))!.body)).toBe('v1');
      expect(await filesUnder(root)).toEqual(['state/s.json']);
    });

    it('waits for a live lock to be released before writing', async () => {
      await mkdir(join(root, 'state'), { recursive: true });
      const lock = join(root, 'state', '.~s.json.lock');
      await writeFile(lock, 'held by a live writer');

      let done = false;
      const write = storage.put('state/s.json', 'v1').then(() => {
        done = true;
      });
      await sleep(100);
      expect(done).toBe(false);
      expect(await storage.get('state/s.json')).toBeUndefined();

      await rm(lock);
      await write;
      expect(text((await storage.get('state/s.json'))!.body)).toBe('v1');
    });
  });

  it('never shows a reader half a file while a writer replaces it', async () => {
    const size = 2 * 1024 * 1024;
    const bodies = [Buffer.alloc(size, 'a'), Buffer.alloc(size, 'b')];
    const etags = new Set(bodies.map((b) => md5(b)));
    await storage.put('big.bin', bodies[0]!);

    let writing = true;
    const writer = (async () => {
      for (let i = 1; i <= 10; i++) await storage.put('big.bin', bodies[i % 2]!);
      writing = false;
    })();
    let reads = 0;
    while (writing) {
      const got = await storage.get('big.bin');
      expect(got?.body.byteLength).toBe(size);
      expect(etags.has(md5(got!.body))).toBe(true);
      reads++;
    }
    await writer;

    expect(reads).toBeGreaterThan(0);
  });
});
