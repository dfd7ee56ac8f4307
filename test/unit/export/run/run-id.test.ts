/**
 * Run ids order runs (the *_latest views, the _current tables, the supersede rules compare them
 * as strings): runs started in one second must order by their start, and a start whose clock is
 * behind the run that held the lock before it must still come after it.
 */
import { describe, expect, it } from 'vitest';
import { newRunId } from '../../../../shared/export/run/context.js';
import { OutputLock } from '../../../../shared/export/state/lock.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const RUN_ID = /^\d{8}T\d{6}Z-[0-9a-f]{6}$/;
const at = (iso: string) => new Date(iso);
/** A random source stuck at one value: its hex digits are all alike. */
const constant = (value: number) => () => value;

describe('newRunId', () => {
  it('keeps the contract’s format: the start’s second in UTC and six hex digits', () => {
    expect(newRunId(at('2026-11-22T03:15:00.123Z'))).toMatch(RUN_ID);
    expect(newRunId(at('2026-11-22T03:15:00.999Z'), constant(0.99))).toBe('20261122T031500Z-3e7fff');
  });

  it('orders two starts of one second by their start, whatever the random digits', () => {
    const first = newRunId(at('2026-11-22T03:15:00.100Z'), constant(0.99));
    const second = newRunId(at('2026-11-22T03:15:00.101Z'), constant(0));

    expect(second > first).toBe(true);
  });

  it('sorts after the run named as the previous one, on a clock behind it', () => {
    const previous = '20261122T031700Z-3e7a00';

    const id = newRunId(at('2026-11-22T03:15:00.000Z'), constant(0.5), previous);

    expect(id).toMatch(RUN_ID);
    expect(id > previous).toBe(true);
    expect(id.startsWith('20261122T031700Z-3e7a')).toBe(true);
  });

  it('sorts after an id made before issue 32 (six random digits), the last of its second included', () => {
    expect(
      newRunId(at('2026-11-22T03:00:00Z'), constant(0), '20261122T031500Z-9f2c41') >
        '20261122T031500Z-9f2c41',
    ).toBe(true);
    expect(newRunId(at('2026-11-22T03:00:00Z'), constant(0), '20261122T031500Z-ffffff')).toBe(
      '20261122T031501Z-000000',
    );
  });
});

describe('a start that takes the lock', () => {
  it('gets an id after the previous holder’s, though its clock is five minutes behind', async () => {
    const storage = new LocalStorage(await tempDir('run-id'));
    const ahead = at('2026-11-22T03:20:00.500Z');
    const behind = at('2026-11-22T03:15:00.500Z');
    const options = {
      ttlMs: 60_000,
      newRunId: (now: Date, previous: string | undefined) => newRunId(now, constant(0.9), previous),
    };
    const first = await OutputLock.acquire(storage, { ...options, now: () => ahead });
    await first.release();

    const second = await OutputLock.acquire(storage, {
      ...options,
      newRunId: (now, previous) => newRunId(now, constant(0), previous),
      now: () => behind,
    });

    expect(second.runId > first.runId).toBe(true);
  });
});
