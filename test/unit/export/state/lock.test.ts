import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { describe, expect, it, vi } from 'vitest';
import { describeError, OutputLockedError } from '../../../../shared/errors.js';
import {
  LockRecordSchema,
  MAX_CLOCK_SKEW_MS,
  OutputLock,
  releaseLockOf,
  thisProcess,
} from '../../../../shared/export/state/lock.js';
import { processStartMarker } from '../../../../shared/export/state/process-alive.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
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

  it('is taken over once expired on every clock, and the stalled holder learns it lost the lock when it renews', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const stalled = await OutputLock.acquire(storage, {
      newRunId,
      ttlMs: TTL,
      now: clock.now,
      owner: 'other@host',
    });
    // Expired on this clock, but the holder's clock may be a minute behind: still held.
    clock.advance(TTL + 1);
    await expect(
      OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now }),
    ).rejects.toBeInstanceOf(OutputLockedError);
    clock.advance(MAX_CLOCK_SKEW_MS);

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

  it('stops a wait for a held lock at once when its signal aborts, and leaves the holder its lock', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { newRunId } = setup();
    const first = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL });
    const stop = new AbortController();
    const waits: string[] = [];
    const waiting = OutputLock.acquire(storage, {
      newRunId,
      ttlMs: TTL,
      waitMs: 60_000,
      signal: stop.signal,
      // A sleep between looks that would never end: only the abort can end the wait.
      sleep: () => new Promise<void>(() => {}),
      onWait: (wait) => {
        waits.push(wait.state);
        setTimeout(() => stop.abort(new Error('Ctrl-C')), 50);
      },
    });
    const settled = waiting.then(
      () => 'took the lock',
      (error: Error) => error.message,
    );

    expect(await settled).toBe('Ctrl-C');
    expect(waits).toEqual(['waiting']);
    expect((await lockOf(storage)).run_id).toBe(first.runId);
    await first.release();
  });

  it('is free at once when its holder was a process of this machine that no longer exists', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const gone = { pid: child.pid!, started: processStartMarker(child.pid!) };
    child.kill('SIGKILL');
    await once(child, 'exit');
    await OutputLock.acquire(storage, {
      newRunId,
      ttlMs: TTL,
      now: clock.now,
      process: { ...thisProcess(), owner: `${gone.pid}@${hostname()}`, started: gone.started },
    });

    const next = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    expect((await lockOf(storage)).run_id).toBe(next.runId);
  });

  it('is released by a finisher of the same run only, and the holder takes that release for a lost lock', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const held = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await releaseLockOf(storage, '20261122T030000Z-ffffff', clock.now());
    expect((await lockOf(storage)).released_at).toBeUndefined();
    await releaseLockOf(storage, held.runId, clock.now());
    expect(await lockOf(storage)).toMatchObject({
      released_at: clock.now().toISOString(),
      released_by: 'closer',
    });

    // Someone else closed its run (a finisher past the deadline): the holder must not go on.
    await expect(held.renew()).rejects.toThrow(/lost the lock/);
    expect(held.lost).toBe(true);
  });

  it('knows its own release: renewing after it is a no-op, and checking after it refuses', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const held = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await held.release();

    expect(await lockOf(storage)).toMatchObject({ released_by: expect.stringMatching(/^[0-9a-f]{16}$/) });
    await held.renew();
    expect(held.lost).toBe(false);
    await expect(held.check()).rejects.toThrow(/lost the lock/);
  });

  it('serialises its own writes: a renewal and a release at once do not fail each other', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const held = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    await Promise.all([held.renew(), held.renew(), held.release()]);

    expect(held.lost).toBe(false);
    expect((await lockOf(storage)).released_at).toBeDefined();
  });

  it('is free when its run is closed (a finisher died between the tombstone and the release)', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const dead = await OutputLock.acquire(storage, {
      newRunId,
      ttlMs: 6 * 3600_000,
      now: clock.now,
      owner: 'aws-lambda',
    });
    await expect(
      OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now }),
    ).rejects.toBeInstanceOf(OutputLockedError);

    await storage.put(STATE_KEYS.closed(dead.runId), '{}');
    const next = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now });

    expect((await lockOf(storage)).run_id).toBe(next.runId);
  });

  it('is free when its run never recorded its start within the grace (a start that died after the lock)', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const options = {
      newRunId,
      ttlMs: 6 * 3600_000,
      now: clock.now,
      owner: 'aws-lambda',
      recordGraceMs: 300_000,
    };
    const recorded = await OutputLock.acquire(storage, options);
    await storage.put(STATE_KEYS.runRecord(recorded.runId), '{}');
    clock.advance(300_000 + MAX_CLOCK_SKEW_MS + 1);
    // Recorded: a live run, held until its expiry.
    await expect(OutputLock.acquire(storage, options)).rejects.toBeInstanceOf(OutputLockedError);
    await storage.delete([STATE_KEYS.runRecord(recorded.runId)]);
    await storage.put(
      STATE_KEYS.lock,
      JSON.stringify({ ...(await lockOf(storage)), acquired_at: clock.now().toISOString() }),
    );
    clock.advance(300_000);
    // Silent for less than the grace and the skew: it may still be writing its record.
    await expect(OutputLock.acquire(storage, options)).rejects.toBeInstanceOf(OutputLockedError);
    clock.advance(MAX_CLOCK_SKEW_MS + 1);

    const next = await OutputLock.acquire(storage, options);

    expect((await lockOf(storage)).run_id).toBe(next.runId);
  });

  it('renews from the moment it is held, on the clock it is given, until released', async () => {
    const storage = new LocalStorage(await tempDir('lock'));
    const { clock, newRunId } = setup();
    const wakeups: Array<() => void> = [];
    const sleep = (ms: number) =>
      new Promise<void>((resolve) =>
        wakeups.push(() => {
          clock.advance(ms);
          resolve();
        }),
      );
    const held = await OutputLock.acquire(storage, { newRunId, ttlMs: TTL, now: clock.now, sleep });
    held.keepAlive(TTL / 3, (error) => {
      throw error;
    });

    for (let i = 0; i < 6; i++) {
      await vi.waitFor(() => expect(wakeups.length).toBe(i + 1));
      wakeups[i]!();
    }
    await vi.waitFor(async () =>
      expect(Date.parse((await lockOf(storage)).expires_at)).toBe(T0 + 6 * (TTL / 3) + TTL),
    );
    await held.release();

    expect((await lockOf(storage)).released_at).toBeDefined();
  });
});
