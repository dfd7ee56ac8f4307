/**
 * Clocks beyond the allowance (issue 32): the lock's holder or the start that reads it five
 * minutes off. With the expiry read by the reader's clock, a live holder was taken over beyond
 * about 105 s of skew (a CLI's 60 s lease, renewed every 20 s, plus the 60 s allowance): now
 * the lease is judged on the storage's clock (S3's LastModified of the holder's write and of
 * the reader's own), and the skew is reported. Against a local S3 server (fauxqs) over HTTP.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutputLockedError } from '../../../shared/errors.js';
import { newRunId as runIdOf } from '../../../shared/export/run/context.js';
import { OutputLock } from '../../../shared/export/state/lock.js';
import type { ClockSkew } from '../../../shared/export/state/lock-clock.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';

/** Run ids as start-run makes them: after the previous holder's. */
const newRunId = (at: Date, previous: string | undefined) => runIdOf(at, undefined, previous);
const TTL = 60_000;
const FIVE_MINUTES = 5 * 60_000;
/** A clock `offsetMs` from this machine's (the storage's, here). */
const clockOff = (offsetMs: number) => () => new Date(Date.now() + offsetMs);

describe('the lock with clocks five minutes apart, on S3', () => {
  let aws: LocalAws;
  let n = 0;
  const storage = () => new S3Storage({ bucket: 'lake', prefix: `skew-${n++}/`, client: aws.s3Client() });
  beforeAll(async () => {
    aws = await startLocalAws();
    await aws.createBucket('lake');
  });
  afterAll(async () => {
    await aws?.close();
  });

  it.each([
    ['behind', -FIVE_MINUTES],
    ['ahead', FIVE_MINUTES],
  ])(
    'keeps a live holder whose clock is five minutes %s, and reports the holder’s clock',
    async (_, offset) => {
      const s3 = storage();
      const holder = await OutputLock.acquire(s3, { newRunId, ttlMs: TTL, now: clockOff(offset) });
      await holder.renew();
      const skews: ClockSkew[] = [];

      const taking = OutputLock.acquire(s3, { newRunId, ttlMs: TTL, onClockSkew: (s) => skews.push(s) });

      await expect(taking).rejects.toBeInstanceOf(OutputLockedError);
      expect(holder.lost).toBe(false);
      await holder.renew(); // still its lock
      expect(skews).toHaveLength(1);
      expect(skews[0]!.clock).toContain(`run ${holder.runId}`);
      expect(Math.abs(skews[0]!.skewMs - offset)).toBeLessThan(5_000);
      expect(skews[0]!.message).toMatch(
        new RegExp(`clock is (29|30)\\d s ${offset > 0 ? 'ahead of' : 'behind'} the storage's`),
      );
      await holder.release();
    },
  );

  it('keeps a live holder from a start whose own clock is five minutes ahead, and reports that clock', async () => {
    const s3 = storage();
    const holder = await OutputLock.acquire(s3, { newRunId, ttlMs: TTL });
    const skews: ClockSkew[] = [];

    const taking = OutputLock.acquire(s3, {
      newRunId,
      ttlMs: TTL,
      now: clockOff(FIVE_MINUTES),
      onClockSkew: (s) => skews.push(s),
    });

    await expect(taking).rejects.toBeInstanceOf(OutputLockedError);
    await holder.renew();
    expect(skews.map((s) => s.clock)).toEqual([expect.stringContaining("this process's")]);
    expect(Math.abs(skews[0]!.skewMs - FIVE_MINUTES)).toBeLessThan(5_000);
    await holder.release();
  });

  it('takes over a dead holder with a clock five minutes behind once its lease ran out on the storage’s clock, not before', async () => {
    const s3 = storage();
    const lease = 1_000;
    await OutputLock.acquire(s3, { newRunId, ttlMs: lease, now: clockOff(-FIVE_MINUTES) }); // never renewed: dead
    // A start whose clock is ahead (two minutes) asks the storage's clock at once: too early yet.
    const start = { newRunId, ttlMs: TTL, now: clockOff(2 * 60_000) };
    await expect(OutputLock.acquire(s3, start)).rejects.toBeInstanceOf(OutputLockedError);

    await sleep(lease + 3_500); // the lease, S3's whole-second stamps and the margin

    const next = await OutputLock.acquire(s3, start);
    expect(next.runId).toBeDefined();
    await next.release();
  });
});
