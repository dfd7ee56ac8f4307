/**
 * finish-run's memory of an output, one record it reads and writes on every look:
 * - the NoFinishedRun alarm's heartbeat: how long since a run last ended succeeded or partial.
 *   finish-run puts the answer as a metric on every look, so the alarm has a datapoint every
 *   few minutes: a fresh deployment counts from its first look instead of alarming at once, and
 *   silence means finish-run itself has stopped;
 * - the drift already seen: the SchemaDrift alarm watches the drift no earlier run had, so that
 *   an API that keeps sending a field the spec does not name is told once, not on every run.
 */
import * as z from 'zod';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import type { DriftEntry } from '../schema-drift.js';
import type { Manifest } from './manifest.js';
import { encodeRecord, parseRecord } from './records.js';

/** Most drift keys remembered: the newest are kept (a path is at most 200 characters, a value 80). */
export const DRIFT_KEYS_REMEMBERED = 2_000;

const HeartbeatSchema = z.object({
  /** The first look at this output (the deployment's start, give or take one look). */
  first_seen_at: z.string(),
  /** When the latest run that ended succeeded or partial finished. */
  last_finished_at: z.string().optional(),
  /**
   * The drift of the evolve runs closed so far, oldest first (absent before the option):
   * `<kind> <path>`, and `<kind> <path> = <value>` for the values of unlisted values and variants.
   */
  drift_seen: z.array(z.string()).optional(),
});
type Heartbeat = z.infer<typeof HeartbeatSchema>;

const HOUR_MS = 3_600_000;

/** What a look learns from the runs it just closed. */
export interface LookBack {
  /** Hours since a run last ended succeeded or partial (or since the first look). */
  hours: number;
  /**
   * Per evolve run just closed (by run id): its drift entries that no earlier run had, or that
   * bring a value no earlier run had (`SchemaDriftNewPaths`).
   */
  newDrift: ReadonlyMap<string, number>;
}

/**
 * What makes a drift entry known: its kind and path, and for an unlisted value or a new
 * variant each value seen too (a second value of an enumeration is a change of its own).
 */
function driftKeys(entry: DriftEntry): string[] {
  const key = `${entry.kind} ${entry.path}`;
  const values = entry.kind === 'unlisted_value' || entry.kind === 'new_variant' ? (entry.seen ?? []) : [];
  return [key, ...values.map((value) => `${key} = ${value}`)];
}

/**
 * Reads finish-run's memory, adds the runs just closed (in the order given), writes it back when
 * it changed (last writer wins: two finishers at once may both count a drift as new) and says
 * what it learnt.
 */
export async function lookBack(storage: Storage, now: Date, closed: readonly Manifest[]): Promise<LookBack> {
  const found = await storage.get(STATE_KEYS.heartbeat);
  const stored: Heartbeat | undefined = found
    ? parseRecord(HeartbeatSchema, found.body, STATE_KEYS.heartbeat)
    : undefined;
  const seen = new Set(stored?.drift_seen ?? []);
  const newDrift = new Map<string, number>();
  for (const manifest of closed) {
    if (manifest.schema_contract !== 'evolve') continue;
    let fresh = 0;
    for (const entry of manifest.schema_drift ?? []) {
      const unknown = driftKeys(entry).filter((key) => !seen.has(key));
      for (const key of unknown) seen.add(key);
      if (unknown.length > 0) fresh++;
    }
    newDrift.set(manifest.run_id, fresh);
  }
  const drift = [...seen].slice(-DRIFT_KEYS_REMEMBERED);
  const next: Heartbeat = {
    first_seen_at: stored?.first_seen_at ?? now.toISOString(),
    last_finished_at: closed
      .filter((m) => m.status !== 'failed')
      .map((m) => m.finished_at)
      .reduce(latest, stored?.last_finished_at),
    ...(drift.length > 0 && { drift_seen: drift }),
  };
  const driftChanged =
    drift.length !== (stored?.drift_seen?.length ?? 0) || [...newDrift.values()].some((n) => n > 0);
  if (stored === undefined || next.last_finished_at !== stored.last_finished_at || driftChanged) {
    await storage.put(STATE_KEYS.heartbeat, encodeRecord(next), { contentType: 'application/json' });
  }
  const since = Date.parse(next.last_finished_at ?? next.first_seen_at);
  return { hours: Math.max(0, (now.getTime() - since) / HOUR_MS), newDrift };
}

function latest(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Date.parse(b) > Date.parse(a) ? b : a;
}
