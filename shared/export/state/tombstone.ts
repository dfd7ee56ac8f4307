/**
 * A closed run's tombstone, `state/runs/<run_id>/closed.json`. Whoever closes a run writes it
 * once (a conditional create) after the manifest, the incremental state and the announcement,
 * and before the run's other records are deleted. Every guard of the lifecycle that a deletion
 * would reopen (the closing record's create-if-absent, the announcement's claim, a step's "is
 * the run open" check) looks here after it succeeds: a late closer, a duplicate delivery or a
 * stalled finisher that finds the tombstone changes nothing. Tombstones are removed once no
 * actor of their run can still be alive (`TOMBSTONE_TTL_MS`).
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { encodeRecord, parseRecord } from './records.js';

export const TombstoneSchema = z.object({
  run_id: z.string(),
  /** The manifest's key: where the run's outcome is. */
  manifest: z.string(),
  closed_at: z.string(),
  /** Random: two closers' tombstones never have the same bytes. */
  token: z.string(),
});
export type Tombstone = z.infer<typeof TombstoneSchema>;

/**
 * A tombstone is kept a day: far longer than any actor of its run lives (a Lambda 15 minutes at
 * most, a CLI whose lock lapsed stops at its next check), so nobody comes after it is gone.
 */
export const TOMBSTONE_TTL_MS = 24 * 3_600_000;

/** True when the run is closed. */
export async function isClosed(storage: Storage, runId: string): Promise<boolean> {
  return (await storage.get(STATE_KEYS.closed(runId))) !== undefined;
}

/** Writes the run's tombstone; true when this call wrote it (false: another closer did). */
export async function writeTombstone(storage: Storage, tombstone: Tombstone): Promise<boolean> {
  try {
    await storage.put(STATE_KEYS.closed(tombstone.run_id), encodeRecord(tombstone), { ifNoneMatch: '*' });
    return true;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    return false;
  }
}

/**
 * Tidies a closed run's folder: deletes what late writers left beside the tombstone and the
 * closing marker (a duplicate step that wrote after the run closed), and both of those once the
 * tombstone is older than `TOMBSTONE_TTL_MS`. Returns the keys deleted.
 */
export async function sweepClosedRun(
  storage: Storage,
  runId: string,
  keys: readonly string[],
  now: Date,
): Promise<string[]> {
  const closedKey = STATE_KEYS.closed(runId);
  // The closing record, shrunk to a marker, stays as long as the tombstone (finish-run.ts).
  const closingKey = STATE_KEYS.closing(runId);
  const debris = keys.filter((key) => key !== closedKey && key !== closingKey);
  const found = await storage.get(closedKey);
  if (found) {
    const { closed_at } = parseRecord(TombstoneSchema, found.body, closedKey);
    if (now.getTime() - Date.parse(closed_at) > TOMBSTONE_TTL_MS) debris.push(closingKey, closedKey);
  }
  await storage.delete(debris);
  return debris;
}
