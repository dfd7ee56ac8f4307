import { afterAll, describe, expect, it } from 'vitest';
import { claimScheduledStart } from '../../../../shared/export/state/scheduled-start.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { S3Storage } from '../../../../shared/storage/s3.js';
import type { Storage } from '../../../../shared/storage/storage.js';
import { tempDir } from '../../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../../helpers/fauxqs.js';

const NOW = new Date('2026-11-23T02:00:03Z');
const TIME = '2026-11-23T02:00:00Z';

describe.each([
  ['a folder', async () => new LocalStorage(await tempDir('claims'))],
  ['S3 (fauxqs)', async () => s3Storage()],
])('claimScheduledStart on %s', (_, open: () => Promise<Storage>) => {
  it('gives one scheduled time to the first claim only, even when the claims race', async () => {
    const storage = await open();
    const claims = await Promise.all(
      Array.from({ length: 5 }, () =>
        claimScheduledStart(storage, { mode: 'incremental', scheduledTime: TIME, now: NOW }),
      ),
    );
    expect(claims.filter((c) => c.claimed)).toHaveLength(1);
    for (const lost of claims.filter((c) => !c.claimed)) {
      expect(lost).toEqual({ claimed: false, claimedAt: NOW.toISOString() });
    }
  });

  it('keys a time by its instant: another spelling of it is the same claim, another mode or time is not', async () => {
    const storage = await open();
    const first = await claimScheduledStart(storage, { mode: 'incremental', scheduledTime: TIME, now: NOW });
    const sameInstant = await claimScheduledStart(storage, {
      mode: 'incremental',
      scheduledTime: '2026-11-23T03:00:00.000+01:00',
      now: NOW,
    });
    const full = await claimScheduledStart(storage, { mode: 'full', scheduledTime: TIME, now: NOW });
    const nextDay = await claimScheduledStart(storage, {
      mode: 'incremental',
      scheduledTime: '2026-11-24T02:00:00Z',
      now: NOW,
    });
    expect([first.claimed, sameInstant.claimed, full.claimed, nextDay.claimed]).toEqual([
      true,
      false,
      true,
      true,
    ]);
    expect(
      await storage.get(STATE_KEYS.scheduledStart('incremental', '2026-11-23T02:00:00.000Z')),
    ).toBeDefined();
  });

  it('lets a released time be claimed again', async () => {
    const storage = await open();
    const first = await claimScheduledStart(storage, { mode: 'full', scheduledTime: TIME, now: NOW });
    if (!first.claimed) throw new Error('first claim lost');
    await first.release();
    const again = await claimScheduledStart(storage, { mode: 'full', scheduledTime: TIME, now: NOW });
    expect(again.claimed).toBe(true);
  });

  it('refuses a time that is not one', async () => {
    const storage = await open();
    await expect(
      claimScheduledStart(storage, {
        mode: 'full',
        scheduledTime: '<aws.scheduler.scheduled-time>',
        now: NOW,
      }),
    ).rejects.toThrow(/not a time: <aws.scheduler.scheduled-time>/);
  });
});

let aws: LocalAws | undefined;
let buckets = 0;
async function s3Storage(): Promise<Storage> {
  aws ??= await startLocalAws();
  const bucket = `claims-${++buckets}`;
  await aws.createBucket(bucket);
  return new S3Storage({ bucket, prefix: 'lake/', client: aws.s3Client() });
}
afterAll(async () => {
  await aws?.close();
});
