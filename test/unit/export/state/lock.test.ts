import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { describeError, OutputLockedError } from '../../../../shared/errors.js';
import { STATE_KEYS } from '../../../../shared/export/layout.js';
import { LockRecordSchema, OutputLock, releaseLockOf } from '../../../../shared/export/state/lock.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const TTL = 60_000;
const T0 = Date.parse('2026-11-22T03:00:00Z');

/** A clock the test moves, and run ids numbered in order of taking. */
function setup() {
  let now = T0;
  let n = 0;
  return {
    clock: { now: () => new Date(now), advance: (ms: number) => (now += ms) },
    newRunId: () => `20261122T030000Z-00000${n++}`,
  };
}

async function lockOf(storage: LocalStorage) {
  const found = await storage.get(STATE_KEYS.lock);
  return LockRecordSchema.parse(JSON.parse(Buffer.from(found?.body ?? []).toString()));
}

describe('OutputLock', () => {
  it('refuses a second taker at once, naming the holder and when its lock expires', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const first = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    const second = OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await expect(second).rejects.toBeInstanceOf(OutputLockedError);
    const said = await second.catch(describeError);
    expect(said).toContain(`run ${first.runId} (${process.pid}@${hostname()}`);
    expect(said).toContain('its lock expires at 2026-11-22T03:01:00.000Z');
  });

  it('lets the next run take it once released, with a younger run id', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const first = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });
    await first.release();

    const second = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    expect(second.runId > first.runId).toBe(true);
    expect((await lockOf(storage)).run_id).toBe(second.runId);
  });

  it('is taken over once expired, and the stalled holder learns it lost the lock when it renews', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const stalled = await OutputLock.acquire(storage, {
      newRunId,
      ttlMs: TTL,
      now: clock.now,
      owner: 'other@host',
    });
    clock.advance(TTL + 1);

    const next = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await expect(stalled.renew()).rejects.toThrow(/lost the lock/);
    expect(stalled.lost).toBe(true);
    await stalled.release(); // a no-op: it is not its lock any more
    expect((await lockOf(storage)).run_id).toBe(next.runId);
  });

  it('stays held while renewed past its first expiry', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now, owner: 'other@host' }).then(
      async (lock) => {
        clock.advance(TTL / 2);
        await lock.renew();
        clock.advance(TTL / 2 + 1);
      },
    );

    await expect(
      OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now }),
    ).rejects.toBeInstanceOf(OutputLockedError);
  });

  it('waits for a held lock when asked, and takes it when it is released', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { newRunId } = setup();
    const first = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL });
    setTimeout(() => void first.release(), 300);

    const second = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, waitMs: 10_000 });

    expect(second.runId).not.toBe(first.runId);
  });

  it('is free at once when its holder was a process of this host that no longer exists', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const gone = spawnSync(process.execPath, [
      '-e',
      'process.stdout.write(String(process.pid))',
    ]).stdout.toString();
    await OutputLock.acquire(storage, {
      newRunId,
      ttlMs: TTL,
      now: clock.now,
      owner: `${gone}@${hostname()}`,
    });

    const next = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    expect((await lockOf(storage)).run_id).toBe(next.runId);
  });

  it('is released by a finisher of the same run only (releaseLockOf)', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const held = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await releaseLockOf(storage, '20261122T030000Z-ffffff', clock.now());
    expect((await lockOf(storage)).released_at).toBeUndefined();
    await releaseLockOf(storage, held.runId, clock.now());
    expect((await lockOf(storage)).released_at).toBe(clock.now().toISOString());
    await held.renew(); // released by its finisher: renewing is a no-op, not a lost lock
    expect(held.lost).toBe(false);
  });
});
