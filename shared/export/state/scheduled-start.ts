/**
 * At most one run per scheduled time. EventBridge Scheduler delivers a schedule's invocation at
 * least once, so start-run can be invoked twice for one time; the first invocation claims the
 * time by a conditional create, and the others find the claim and start nothing.
 */
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { encodeRecord, type Mode, parseRecord } from './records.js';

const ClaimRecordSchema = z.object({
  scheduled_time: z.string(),
  claimed_at: z.string(),
  /** This delivery's: a claim whose answer was lost and retried is recognised as its own. */
  token: z.string().optional(),
});

export type ScheduledStartClaim =
  | {
      claimed: true;
      /** Gives the time back, for a start that started no run: a later delivery may start one. */
      release(): Promise<void>;
    }
  | { claimed: false; claimedAt: string };

export interface ScheduledStart {
  mode: Mode;
  /** The time the schedule fired for, as Scheduler gives it (ISO 8601). */
  scheduledTime: string;
  now: Date;
  /** Random (default: 8 random bytes): makes this delivery's claim its own. */
  token?: string;
}

export async function claimScheduledStart(
  storage: Storage,
  claim: ScheduledStart,
): Promise<ScheduledStartClaim> {
  // One spelling per instant, whatever offset or precision the time came with.
  const time = new Date(claim.scheduledTime);
  if (Number.isNaN(time.getTime())) throw new RangeError(`not a time: ${claim.scheduledTime}`);
  const key = STATE_KEYS.scheduledStart(claim.mode, time.toISOString());
  const record = {
    scheduled_time: time.toISOString(),
    claimed_at: claim.now.toISOString(),
    token: claim.token ?? randomBytes(8).toString('hex'),
  };
  try {
    await storage.put(key, encodeRecord(record), { ifNoneMatch: '*', contentType: 'application/json' });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const found = await storage.get(key);
    // Released between our write and our read: the next delivery may claim it; this one does not.
    const claimedAt = found ? parseRecord(ClaimRecordSchema, found.body, key).claimed_at : 'just now';
    return { claimed: false, claimedAt };
  }
  return { claimed: true, release: () => storage.delete([key]) };
}
