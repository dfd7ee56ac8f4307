/**
 * One `ExportRunFinished` per run. Two finishers may close a run at once (overlapping
 * finish-runs, a recovering start); the one that announces first claims the announcement, a
 * conditional create of `state/runs/<run_id>/announced.json`, and marks it done once the event
 * is accepted. A claim whose holder failed to announce is released at once; one whose holder
 * died is taken over after `ANNOUNCE_LEASE_MS`. The one window left is a holder that dies
 * after the event was accepted and before it marked the claim done: then the run is announced
 * again after the lease (at least once, never lost). The event carries the run id, so ingestion
 * can drop that duplicate.
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { MAX_CLOCK_SKEW_MS } from './lock.js';
import { encodeRecord, parseRecord } from './records.js';

const ClaimSchema = z.object({
  token: z.string(),
  claimed_at: z.string(),
  /** The event was accepted. */
  done_at: z.string().optional(),
  /** The holder's announcement failed: anyone may claim it again. */
  failed_at: z.string().optional(),
});
type Claim = z.infer<typeof ClaimSchema>;

/** A claim not done after this long is its holder's no more: finish-run's timeout. */
export const ANNOUNCE_LEASE_MS = 15 * 60_000;

export type AnnouncementClaim =
  | { kind: 'claimed'; done(at: Date): Promise<void>; failed(at: Date): Promise<void> }
  /** Announced already. */
  | { kind: 'done' }
  /** Another finisher is announcing it now. */
  | { kind: 'busy' };

/** Claims the announcement of a run: `claimed` means this caller announces it. */
export async function claimAnnouncement(
  storage: Storage,
  runId: string,
  now: Date,
  token: string,
): Promise<AnnouncementClaim> {
  const key = STATE_KEYS.announced(runId);
  const claim: Claim = { token, claimed_at: now.toISOString() };
  let etag: string;
  try {
    ({ etag } = await storage.put(key, encodeRecord(claim), { ifNoneMatch: '*' }));
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const found = await storage.get(key);
    if (!found) return { kind: 'busy' }; // Deleted meanwhile: the run was closed by its announcer.
    const held = parseRecord(ClaimSchema, found.body, key);
    if (held.done_at !== undefined) return { kind: 'done' };
    const lapsed = now.getTime() - Date.parse(held.claimed_at) > ANNOUNCE_LEASE_MS + MAX_CLOCK_SKEW_MS;
    if (held.failed_at === undefined && !lapsed) return { kind: 'busy' };
    try {
      ({ etag } = await storage.put(key, encodeRecord(claim), { ifMatch: found.etag }));
    } catch (raced) {
      if (!(raced instanceof PreconditionFailedError)) throw raced;
      return { kind: 'busy' };
    }
  }
  const mark = async (change: Partial<Claim>) => {
    try {
      await storage.put(key, encodeRecord({ ...claim, ...change }), { ifMatch: etag });
    } catch (error) {
      // Taken over after our lease lapsed: the taker's claim stands.
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  };
  return {
    kind: 'claimed',
    done: (at) => mark({ done_at: at.toISOString() }),
    failed: (at) => mark({ failed_at: at.toISOString() }),
  };
}
