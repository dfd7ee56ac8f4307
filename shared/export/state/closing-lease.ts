/**
 * The closing lease, `state/runs/<run_id>/closing-lease.json`: one finisher at a time works on a
 * run's closing. Finishers are scheduled every few minutes and a large closing takes several of
 * them (each hands the rest on before its timeout), so looks overlap; without the lease two of
 * them would publish the same outputs at once, doubling the work and the memory for nothing.
 * Correctness never rests on it (every step of closing is idempotent): it bounds the work.
 *
 * Taken with a create-if-absent, or a compare-and-swap over an expired lease; a 412 is read back
 * and recognised by its token (the answer to our own write was lost). A lease lasts longer than
 * its holder can live (the function's timeout) plus `MAX_CLOCK_SKEW_MS`, so a crashed holder
 * blocks the closing for at most that long. Released by writing it expired.
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { MAX_CLOCK_SKEW_MS } from './lock.js';
import { encodeRecord, parseRecord } from './records.js';

const LeaseSchema = z.object({
  token: z.string(),
  expires_at: z.string(),
});

export interface ClosingLease {
  /** Gives the lease up (best effort: it expires anyway). */
  release(): Promise<void>;
}

/** A lease that has expired by any clock within `MAX_CLOCK_SKEW_MS` of ours. */
const expired = (expiresAt: string, now: Date): boolean =>
  Date.parse(expiresAt) + MAX_CLOCK_SKEW_MS < now.getTime();

/**
 * Takes the closing lease of `runId` for `ttlMs`; `undefined` when another finisher holds it.
 *
 * @example
 * const lease = await takeClosingLease(storage, runId, token, deps.now(), 15 * 60_000);
 * if (!lease) return; // another finisher is at it
 * try { … } finally { await lease.release(); }
 */
export async function takeClosingLease(
  storage: Storage,
  runId: string,
  token: string,
  now: Date,
  ttlMs: number,
): Promise<ClosingLease | undefined> {
  const key = STATE_KEYS.closingLease(runId);
  const body = encodeRecord({ token, expires_at: new Date(now.getTime() + ttlMs).toISOString() });
  const found = await storage.get(key);
  if (found) {
    const lease = parseRecord(LeaseSchema, found.body, key);
    if (lease.token !== token && !expired(lease.expires_at, now)) return undefined;
  }
  let etag: string;
  try {
    ({ etag } = await storage.put(key, body, found ? { ifMatch: found.etag } : { ifNoneMatch: '*' }));
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const stored = await storage.get(key);
    if (!stored || parseRecord(LeaseSchema, stored.body, key).token !== token) return undefined;
    etag = stored.etag;
  }
  return {
    release: async () => {
      const released = encodeRecord({ token, expires_at: new Date(0).toISOString() });
      await storage.put(key, released, { ifMatch: etag }).catch(() => undefined);
    },
  };
}
