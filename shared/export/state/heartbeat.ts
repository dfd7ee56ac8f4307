/**
 * The NoFinishedRun alarm's heartbeat: how long since a run last ended succeeded or partial.
 * finish-run asks on every look and puts the answer as a metric, so the alarm has a datapoint
 * every few minutes: a fresh deployment counts from its first look instead of alarming at
 * once, and silence means finish-run itself has stopped.
 */
import * as z from 'zod';
import type { Storage } from '../../storage/storage.js';
import { STATE_KEYS } from '../layout.js';
import type { Manifest } from './manifest.js';
import { encodeRecord, parseRecord } from './records.js';

const HeartbeatSchema = z.object({
  /** The first look at this output (the deployment's start, give or take one look). */
  first_seen_at: z.string(),
  /** When the latest run that ended succeeded or partial finished. */
  last_finished_at: z.string().optional(),
});
type Heartbeat = z.infer<typeof HeartbeatSchema>;

const HOUR_MS = 3_600_000;

/** Hours since a run last ended succeeded or partial (or since the first look), given the runs just closed. */
export async function hoursSinceFinishedRun(
  storage: Storage,
  now: Date,
  closed: readonly Manifest[],
): Promise<number> {
  const found = await storage.get(STATE_KEYS.heartbeat);
  const stored: Heartbeat | undefined = found
    ? parseRecord(HeartbeatSchema, found.body, STATE_KEYS.heartbeat)
    : undefined;
  const next: Heartbeat = {
    first_seen_at: stored?.first_seen_at ?? now.toISOString(),
    last_finished_at: closed
      .filter((m) => m.status !== 'failed')
      .map((m) => m.finished_at)
      .reduce(latest, stored?.last_finished_at),
  };
  if (stored === undefined || next.last_finished_at !== stored.last_finished_at) {
    // Last writer wins: two finishers at once both write times that are already past.
    await storage.put(STATE_KEYS.heartbeat, encodeRecord(next), { contentType: 'application/json' });
  }
  const since = Date.parse(next.last_finished_at ?? next.first_seen_at);
  return Math.max(0, (now.getTime() - since) / HOUR_MS);
}

function latest(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Date.parse(b) > Date.parse(a) ? b : a;
}
