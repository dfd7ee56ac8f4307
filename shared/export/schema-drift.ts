/**
 * Schema drift: how the reports of a run differed from the spec (`evolve` runs only). A report
 * that drifts still lands (its values in their columns or in `_rescued`); the drift is what
 * tells the operator the API changed. Counted per report while its rows are built, per unit in
 * the unit's summary, per run in the manifest (`schema_drift`), the `runs` table and the event.
 */
import * as z from 'zod';

/**
 * - `new_field`: a field the spec does not name (at any level; the subtree under it is one drift).
 * - `type_mismatch`: a value of another JSON type than the spec's, `null` where the spec allows
 *   none included (the column gets the value when it converts without loss, NULL otherwise).
 * - `unlisted_value`: a value of a field the spec lists as an enumeration that the list lacks.
 * - `new_variant`: an item of `questions[]` or `inputs[]` that is none of the spec's variants.
 * - `missing_field`: a field the spec gives every object of its kind is absent.
 */
export const DRIFT_KINDS = [
  'new_field',
  'type_mismatch',
  'unlisted_value',
  'new_variant',
  'missing_field',
] as const;
export type DriftKind = (typeof DRIFT_KINDS)[number];

/** Most distinct examples kept per entry (`seen`), and the longest one (characters). */
export const DRIFT_SEEN_MAX = 5;
const SEEN_CHARS = 80;

/**
 * Most entries kept per unit and per run: a report whose keys are data (an object keyed by ids)
 * would otherwise make one entry per key. Paths beyond are counted in one entry per kind whose
 * path is {@link OTHER_PATHS}.
 */
export const DRIFT_ENTRIES_MAX = 200;
export const OTHER_PATHS = '(other paths)';

export const DriftEntrySchema = z.object({
  /** Relative to the report's `data`; array positions as `[]`: `sections[].questions[].answer_type`. */
  path: z.string(),
  kind: z.enum(DRIFT_KINDS),
  /** Occurrences in the run (a path inside an array may drift several times in one report). */
  count: z.number().int().positive(),
  /** Reports with at least one occurrence. */
  reports: z.number().int().positive(),
  /** The lowest job id among those reports: one to look at in `raw/`. */
  first_job_id: z.number().int(),
  /**
   * Up to {@link DRIFT_SEEN_MAX} distinct examples: for `unlisted_value` the values, for
   * `new_variant` the item's `type` (or JSON type), for `type_mismatch` the JSON types sent.
   * Absent for `new_field` and `missing_field`.
   */
  seen: z.array(z.string()).optional(),
});
export type DriftEntry = z.infer<typeof DriftEntrySchema>;

export const SchemaDriftSchema = z.array(DriftEntrySchema);
export type SchemaDrift = z.infer<typeof SchemaDriftSchema>;

const keyOf = (path: string, kind: DriftKind) => `${kind}\u0000${path}`;

/** The JSON type of a value as drift names it: `string`, `number`, `boolean`, `null`, `array`, `object`. */
export function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

interface Counting {
  path: string;
  kind: DriftKind;
  count: number;
  reports: number;
  first_job_id: number;
  seen: string[] | undefined;
  /** The report that counted last (a report counts once in `reports`). */
  lastReport: number;
}

/**
 * Counts drift as reports are flattened, and merges the counts of units. Bounded: at most
 * {@link DRIFT_ENTRIES_MAX} entries, each with at most {@link DRIFT_SEEN_MAX} examples.
 *
 * @example
 * const drift = new DriftTally();
 * drift.startReport(42);
 * drift.add('job.job_status', 'unlisted_value', '3');
 * manifest.schema_drift = drift.entries();
 */
export class DriftTally {
  readonly #entries = new Map<string, Counting>();
  #jobId = 0;
  #report = 0;

  /** Every `add` until the next call is of the report of `jobId`. */
  startReport(jobId: number): void {
    this.#jobId = jobId;
    this.#report++;
  }

  /** One occurrence in the current report; `seen` as {@link DriftEntry.seen} describes. */
  add(path: string, kind: DriftKind, seen?: string): void {
    const entry = this.#entry(clipPath(path), kind, this.#jobId);
    entry.count++;
    if (entry.lastReport !== this.#report) {
      entry.lastReport = this.#report;
      entry.reports++;
      entry.first_job_id = Math.min(entry.first_job_id, this.#jobId);
    }
    if (seen !== undefined) addSeen(entry, seen);
  }

  /** Adds the entries of another tally (a unit's summary, another unit of the run). */
  merge(entries: readonly DriftEntry[]): void {
    for (const e of entries) {
      const entry = this.#entry(e.path, e.kind, e.first_job_id);
      entry.count += e.count;
      entry.reports += e.reports;
      entry.first_job_id = Math.min(entry.first_job_id, e.first_job_id);
      for (const s of e.seen ?? []) addSeen(entry, s);
    }
  }

  /** True when nothing drifted. */
  get empty(): boolean {
    return this.#entries.size === 0;
  }

  /** The entries: by kind (in {@link DRIFT_KINDS} order), then most reports first, then path. */
  entries(): DriftEntry[] {
    const rank = (kind: DriftKind) => DRIFT_KINDS.indexOf(kind);
    return [...this.#entries.values()]
      .filter((e) => e.count > 0)
      .sort(
        (a, b) =>
          rank(a.kind) - rank(b.kind) ||
          b.reports - a.reports ||
          b.count - a.count ||
          (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
      )
      .map((e) => ({
        path: e.path,
        kind: e.kind,
        count: e.count,
        reports: e.reports,
        first_job_id: e.first_job_id,
        ...(e.seen !== undefined && { seen: [...e.seen] }),
      }));
  }

  #entry(path: string, kind: DriftKind, jobId: number): Counting {
    let key = keyOf(path, kind);
    let entry = this.#entries.get(key);
    if (entry) return entry;
    if (this.#entries.size >= DRIFT_ENTRIES_MAX) {
      path = OTHER_PATHS;
      key = keyOf(path, kind);
      entry = this.#entries.get(key);
      if (entry) return entry;
    }
    entry = {
      path,
      kind,
      count: 0,
      reports: 0,
      first_job_id: jobId,
      seen: kind === 'new_field' || kind === 'missing_field' ? undefined : [],
      lastReport: -1,
    };
    this.#entries.set(key, entry);
    return entry;
  }
}

/**
 * A path is made of the API's keys, which may be of any length: the longest kept (characters).
 * Two paths that share their first {@link PATH_CHARS} characters count as one.
 */
export const PATH_CHARS = 200;
const clipPath = (path: string): string =>
  path.length > PATH_CHARS ? `${path.slice(0, PATH_CHARS - 1)}…` : path;

function addSeen(entry: Counting, seen: string): void {
  if (entry.seen === undefined || entry.seen.length >= DRIFT_SEEN_MAX) return;
  const clipped = seen.length > SEEN_CHARS ? `${seen.slice(0, SEEN_CHARS - 1)}…` : seen;
  if (!entry.seen.includes(clipped)) entry.seen.push(clipped);
}

/** Merges the drift of several units (or runs) into one list. */
export function mergeDrift(lists: Iterable<readonly DriftEntry[]>): DriftEntry[] {
  const tally = new DriftTally();
  for (const list of lists) tally.merge(list);
  return tally.entries();
}
