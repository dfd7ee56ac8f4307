/**
 * LocalStorage.sweep and the folders delete() leaves: debris of killed writers goes, a live
 * writer never loses a write to a sweep or a delete running beside it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalStorage } from '../../../shared/storage/local.js';

const HOUR_MS = 3_600_000;

async function collect(keys: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of keys) out.push(key);
  return out;
}

/** Every file and folder under a folder, relative, folders ending with '/'. */
async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1) + (e.isDirectory() ? '/' : ''))
    .sort();
}

/** Writes a file whose mtime lies `ageMs` in the past, making its folder. */
async function leftover(path: string, ageMs: number): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, 'half a write');
  const then = new Date(Date.now() - ageMs);
  await utimes(path, then, then);
}

let root: string;
let storage: LocalStorage;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'local-sweep-'));
  storage = new LocalStorage(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('LocalStorage.sweep', () => {
  it('removes temp files older than the age and keeps younger ones and every key', async () => {
    await storage.put('raw/jobs/dt=2026-11-02/a.jsonl.gz', 'a');
    await leftover(join(root, 'raw/jobs/dt=2026-11-02/.~b.jsonl.gz.0a1b2c3d4e5f.tmp'), 2 * HOUR_MS);
    await leftover(join(root, 'raw/jobs/dt=2026-11-02/.~c.jsonl.gz.0a1b2c3d4e5f.tmp'), 60_000);

    const { removed } = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });

    expect(removed).toEqual(['raw/jobs/dt=2026-11-02/.~b.jsonl.gz.0a1b2c3d4e5f.tmp']);
    expect(await tree(root)).toEqual([
      'raw/',
      'raw/jobs/',
      'raw/jobs/dt=2026-11-02/',
      'raw/jobs/dt=2026-11-02/.~c.jsonl.gz.0a1b2c3d4e5f.tmp',
      'raw/jobs/dt=2026-11-02/a.jsonl.gz',
    ]);
  });

  it('removes what a writer killed in the middle of a write left behind', async () => {
    // A separate Node process (tsx for the TypeScript import) streams one chunk, then hangs.
    const script = `
      import { LocalStorage } from ${JSON.stringify(resolve('shared/storage/local.ts'))};
      const storage = new LocalStorage(process.argv[1]);
      await storage.putStream('raw/jobs/dt=2026-11-02/a.jsonl.gz', (async function* () {
        yield new Uint8Array(1024);
        await new Promise(() => {});
      })());`;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '--eval', script, root],
      {
        stdio: 'ignore',
      },
    );
    const exited = once(child, 'exit');
    const folder = join(root, 'raw/jobs/dt=2026-11-02');
    const started = Date.now();
    while ((await readdir(folder).catch(() => [])).length === 0) {
      if (Date.now() - started > 20_000) throw new Error('the writer never started its temp file');
      await sleep(20);
    }
    child.kill('SIGKILL');
    await exited;
    expect(await tree(root)).toEqual([
      'raw/',
      'raw/jobs/',
      'raw/jobs/dt=2026-11-02/',
      expect.stringMatching(/^raw\/jobs\/dt=2026-11-02\/\.~a\.jsonl\.gz\.[0-9a-f]{12}\.tmp$/),
    ]);

    const { removed } = await storage.sweep({
      olderThanMs: HOUR_MS,
      now: new Date(Date.now() + 2 * HOUR_MS),
    });

    expect(removed).toHaveLength(4);
    expect(await tree(root)).toEqual([]);
  });

  it('removes the folders that only held debris, bottom-up, and keeps the root', async () => {
    await leftover(join(root, 'raw/jobs/dt=2026-11-02/.~b.jsonl.gz.0a1b2c3d4e5f.tmp'), 2 * HOUR_MS);
    await mkdir(join(root, 'state/runs/20261102T1000Z-ab12'), { recursive: true });

    const { removed } = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });

    expect(removed.sort()).toEqual([
      'raw/',
      'raw/jobs/',
      'raw/jobs/dt=2026-11-02/',
      'raw/jobs/dt=2026-11-02/.~b.jsonl.gz.0a1b2c3d4e5f.tmp',
      'state/',
      'state/runs/',
      'state/runs/20261102T1000Z-ab12/',
    ]);
    expect(await tree(root)).toEqual([]);
    expect((await stat(root)).isDirectory()).toBe(true);
  });

  it('measures ages from the given time', async () => {
    await leftover(join(root, 'raw/.~a.0a1b2c3d4e5f.tmp'), 0);

    const early = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });
    const late = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date(Date.now() + 2 * HOUR_MS) });

    expect(early.removed).toEqual([]);
    expect(late.removed).toEqual(['raw/.~a.0a1b2c3d4e5f.tmp', 'raw/']);
  });

  it('removes the key lock and the lock moved aside of writers killed while holding them', async () => {
    await storage.put('state/s.json', '1');
    await leftover(join(root, 'state/.~s.json.lock'), 2 * HOUR_MS);
    await leftover(join(root, 'state/.~t.json.lock.0a1b2c3d4e5f.stale'), 2 * HOUR_MS);
    await leftover(join(root, 'state/.~u.json.lock'), 1_000); // a live writer's

    const { removed } = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });

    // The aside's ctime is its rename: now, here; a sweep an hour later takes it.
    expect(removed).toEqual(['state/.~s.json.lock']);
    const later = await storage.sweep({ olderThanMs: HOUR_MS, now: new Date(Date.now() + 2 * HOUR_MS) });
    expect(later.removed).toEqual(['state/.~t.json.lock.0a1b2c3d4e5f.stale']);
    expect(await tree(root)).toEqual(['state/', 'state/.~u.json.lock', 'state/s.json']);
  });

  it('leaves files it does not know, and what they are in', async () => {
    await leftover(join(root, 'notes/readme.txt'), 2 * HOUR_MS);
    await leftover(join(root, 'notes/.~unknown'), 2 * HOUR_MS);

    expect((await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() })).removed).toEqual([]);
  });

  it('sweeps an output folder that does not exist yet to nothing', async () => {
    const fresh = new LocalStorage(join(root, 'not-yet'));

    expect(await fresh.sweep({ olderThanMs: HOUR_MS, now: new Date() })).toEqual({ removed: [] });
  });

  it('refuses an age that is not a finite duration', async () => {
    await expect(storage.sweep({ olderThanMs: Number.NaN, now: new Date() })).rejects.toThrow(RangeError);
    await expect(storage.sweep({ olderThanMs: -1, now: new Date() })).rejects.toThrow(RangeError);
  });

  it('never fails a put or a delete running beside it (folders vanish and come back)', async () => {
    const rounds = 100;
    const storage = new LocalStorage(root); // this test's own: a writer left running must not reach the next test's folder
    let sweeping = true;
    let sweeps = 0;
    const sweeper = (async () => {
      while (sweeping) {
        await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });
        sweeps++;
      }
    })();
    // The writers share folders and empty them again and again, so the sweeper and each
    // other's deletes keep removing the very folder a put has just made and is about to write
    // in. (Without createInFolder's retry this fails every run.)
    const writer = async (w: number) => {
      for (let i = 0; i < rounds; i++) {
        const key = `state/runs/r${Math.floor(i / 2) % 3}/w${w}.json`;
        await storage.put(key, `${w}:${i}`);
        await storage.putStream(
          `raw/part-${w}.bin`,
          (async function* () {
            yield new Uint8Array([w, i % 256]);
          })(),
        );
        if (i % 2 === 1) await storage.delete([key, `raw/part-${w}.bin`]);
      }
    };
    try {
      await Promise.all([0, 1, 2, 3].map(writer));
    } finally {
      sweeping = false;
      await sweeper;
    }

    expect(sweeps).toBeGreaterThan(0);
    expect(await collect(storage.list(''))).toEqual([]); // every odd round deleted what the even one wrote
    await storage.sweep({ olderThanMs: HOUR_MS, now: new Date() });
    expect(await tree(root)).toEqual([]);
  });
});

describe('LocalStorage.delete and folders', () => {
  it('leaves no empty folder when a run’s records are deleted, and keeps the root', async () => {
    const records = ['state/runs/r1/a.json', 'state/runs/r1/b.json', 'state/runs/r1/units/u1.json'];
    for (const key of records) await storage.put(key, '{}');

    await storage.delete(records);

    expect(await tree(root)).toEqual([]);
    expect((await stat(root)).isDirectory()).toBe(true);
  });

  it('keeps a folder that still holds a key, and its parents', async () => {
    await storage.put('state/runs/r1/a.json', '{}');
    await storage.put('state/runs/r2/a.json', '{}');

    await storage.delete(['state/runs/r1/a.json']);

    expect(await tree(root)).toEqual(['state/', 'state/runs/', 'state/runs/r2/', 'state/runs/r2/a.json']);
  });

  it('removes the folder of a key deleted earlier once a later delete finds it empty', async () => {
    await mkdir(join(root, 'state/runs/r1'), { recursive: true });

    await storage.delete(['state/runs/r1/missing.json']);

    expect(await tree(root)).toEqual([]);
  });
});
