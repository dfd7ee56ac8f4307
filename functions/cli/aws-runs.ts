/**
 * What the `aws status` and `aws runs` commands read from the stack's bucket: an open run's
 * progress from its records under `state/runs/<run_id>/` (the readers finish-run uses), the
 * output's lock, and the run manifests under `runs/`. Nothing here writes.
 */

import { type ClosingRecord, readClosing } from '../../shared/export/run/closing.js';
import { openRuns } from '../../shared/export/run/finish-run.js';
import { mapPool } from '../../shared/export/run/pool.js';
import {
  type CampaignRecords,
  type RecordsSource,
  type RunRecords,
  RunVanished,
  readRunRecord,
  recordsInMemory,
  recordsInStorage,
} from '../../shared/export/run/run-records.js';
import { DriftTally, type SchemaDrift } from '../../shared/export/schema-drift.js';
import { type LockRecord, LockRecordSchema, lockIsFree } from '../../shared/export/state/lock.js';
import {
  emptyCounts,
  type Manifest,
  type ManifestCounts,
  ManifestSchema,
  OUTCOME_COUNTER,
} from '../../shared/export/state/manifest.js';
import {
  addRequestCounts,
  type Mode,
  parseRecord,
  type RequestCounts,
  type RunRecord,
} from '../../shared/export/state/records.js';
import { isClosed, TombstoneSchema } from '../../shared/export/state/tombstone.js';
import { schemaContractOf } from '../../shared/export/tables.js';
import { RUNS_PREFIX, STATE_KEYS } from '../../shared/layout.js';
import type { Storage } from '../../shared/storage/storage.js';

/** Manifests read at once when listing runs. */
const READ_CONCURRENCY = 8;

/**
 * Where an open run is: `starting` (start-run has not written its whole record), `planning`
 * (campaigns whose jobs are not listed yet), `exporting` (units without an outcome for every
 * job), `complete` (every job has one: finish-run closes it at its next look). A run whose
 * closing has started is no longer read from its records (`RunState` `closing`).
 */
export type RunPhase = 'starting' | 'planning' | 'exporting' | 'complete';

/** An open run's progress, from its records: what finish-run would count, and what is left. */
export interface RunProgress {
  run_id: string;
  dt: string;
  mode: Mode;
  driver: 'local' | 'queues';
  started_at: string;
  phase: RunPhase;
  campaigns: { total: number; planned: number };
  units: { total: number; done: number };
  /** Jobs listed so far, and the outcome of each job that has one (the manifest's counters). */
  counts: ManifestCounts;
  /** Jobs whose last try failed in a way worth another (their unit is delivered again). */
  retrying: number;
  /** Jobs listed and not yet tried (their unit has not run). */
  waiting: number;
  requests: RequestCounts;
  /** Fatal errors, campaigns whose listing stopped, jobs that failed: one line each. */
  errors: string[];
  /** Evolve runs: the drift of the units done so far, as the manifest will merge it. */
  schema_drift?: SchemaDrift;
}

/** The errors shown for a run: the first few (the manifest counts them all). */
const MAX_ERRORS = 5;

/**
 * An open run's progress, tallied one campaign at a time: what it holds is the counts and the
 * first errors, whatever the run's size (a run of a million reports has ~10,000 unit records).
 */
class ProgressTally {
  private readonly counts = emptyCounts();
  private requests: RequestCounts;
  private readonly errors: string[] = [];
  private errorsLeftOut = 0;
  private units = { total: 0, done: 0 };
  private retrying = 0;
  private waiting = 0;
  private planned = 0;
  /** Every campaign planned and every planned job with a final outcome (`isComplete`'s rule). */
  private complete = true;
  /** Bounded as the closing's (`DRIFT_ENTRIES_MAX`). */
  private readonly drift = new DriftTally();

  constructor(
    private readonly record: RunRecord,
    unrecorded: RequestCounts,
  ) {
    this.counts.campaigns = record.campaign_ids.length + record.campaigns_invalid;
    this.counts.campaigns_invalid = record.campaigns_invalid;
    this.counts.duplicates = record.duplicates;
    this.requests = addRequestCounts(record.requests, unrecorded);
    // A run still starting carries the fatal error it would close with if its start died: not one yet.
    if (record.fatal && !record.starting) this.error(`run: ${record.fatal.message}`);
  }

  /** Keeps the first MAX_ERRORS errors, and counts the others. */
  private error(line: string): void {
    if (this.errors.length < MAX_ERRORS) this.errors.push(line);
    else this.errorsLeftOut++;
  }

  add({ campaignId, plan, units }: CampaignRecords): void {
    if (!plan) {
      this.complete = false;
      return;
    }
    this.planned++;
    // As the closing merges it: every unit whose files the run publishes.
    for (const name of plan.units) {
      const drift = units.get(name)?.drift;
      if (drift) this.drift.merge(drift);
    }
    this.requests = addRequestCounts(this.requests, plan.requests);
    this.counts.duplicates += plan.duplicates;
    if (plan.fatal) this.error(`campaign ${campaignId}: ${plan.fatal.message}`);
    // A campaign whose listing stopped cut no units: nothing of it is left to do.
    if (plan.unlisted !== undefined) {
      this.error(`campaign ${campaignId} not listed: ${plan.unlisted}`);
      // Complete by finish-run's rule (`isComplete`) only when the units it names are done.
      const done = (name: string) => {
        const unit = units.get(name);
        return unit !== undefined && Object.values(unit.jobs).every((r) => r.outcome !== 'pending');
      };
      if (!plan.units.every(done)) this.complete = false;
      return;
    }
    this.counts.jobs += plan.jobs;
    this.counts.reports_unchanged += plan.unchanged.length;
    this.counts.reports_invalid += plan.jobs_invalid;
    this.units.total += plan.units.length;
    let tried = 0;
    for (const name of plan.units) {
      const unit = units.get(name);
      if (!unit) {
        this.complete = false;
        continue;
      }
      this.requests = addRequestCounts(this.requests, unit.requests);
      if (unit.fatal) this.error(`unit ${name}: ${unit.fatal.message}`);
      const results = Object.entries(unit.jobs);
      tried += results.length;
      let pending = 0;
      for (const [jobId, result] of results) {
        if (result.outcome === 'pending') pending++;
        else this.counts[OUTCOME_COUNTER[result.outcome]]++;
        if (result.outcome === 'failed' || result.outcome === 'pending')
          this.error(`job ${jobId} ${result.outcome}${result.detail ? `: ${result.detail}` : ''}`);
      }
      this.retrying += pending;
      if (pending === 0) this.units.done++;
      else this.complete = false;
    }
    this.waiting += plan.fetch.length - tried;
  }

  progress(): RunProgress {
    const { record } = this;
    const total = new Set(record.campaign_ids).size;
    const phase: RunPhase = record.starting
      ? 'starting'
      : record.fatal || this.complete
        ? 'complete'
        : this.planned < total
          ? 'planning'
          : 'exporting';
    return {
      run_id: record.run_id,
      dt: record.dt,
      mode: record.mode,
      driver: record.driver,
      started_at: record.started_at,
      phase,
      campaigns: { total, planned: this.planned },
      units: { ...this.units },
      counts: this.counts,
      retrying: this.retrying,
      waiting: this.waiting,
      requests: this.requests,
      errors: this.errorsLeftOut > 0 ? [...this.errors, `… ${this.errorsLeftOut} more`] : [...this.errors],
      ...(schemaContractOf(record) === 'evolve' && { schema_drift: this.drift.entries() }),
    };
  }
}

/** A run's progress from its records, a campaign at a time. */
async function progressFrom(source: RecordsSource): Promise<RunProgress> {
  const tally = new ProgressTally(source.record, source.unrecorded);
  for await (const campaign of source.campaigns()) tally.add(campaign);
  return tally.progress();
}

/** A run's progress from its records held in memory (tests). */
export const progressOf = (records: RunRecords): Promise<RunProgress> =>
  progressFrom(recordsInMemory(records));

/**
 * A run's progress from its records in storage, read one campaign at a time (the closing's
 * reader, `recordsInStorage`): its memory is one campaign's records. Undefined when the run has
 * no records, or was closed while it was read.
 */
export async function progressInStorage(storage: Storage, runId: string): Promise<RunProgress | undefined> {
  try {
    const source = await recordsInStorage({ storage }, runId);
    if (!source) return undefined;
    const progress = await progressFrom(source);
    // Read last: a run closed meanwhile has lost its record, and its counts are its manifest's.
    if (!(await readRunRecord({ storage }, runId))) return undefined;
    return progress;
  } catch (error) {
    if (error instanceof RunVanished) return undefined;
    throw error;
  }
}

/** What `status` found for one run id. */
export type RunState =
  | { state: 'open'; progress: RunProgress }
  /** Closing started: the counts are final (its manifest, not yet written). */
  | { state: 'closing'; manifest: Manifest }
  | { state: 'closed'; manifest: Manifest; key: string }
  | { state: 'unknown' };

/** Where a run is now: open (its progress), closing, closed (its manifest), or unknown here. */
export async function runState(storage: Storage, runId: string): Promise<RunState> {
  const deps = { storage };
  if (!(await isClosed(storage, runId))) {
    const closing: ClosingRecord | undefined = await readClosing(deps, runId);
    if (closing) return { state: 'closing', manifest: closing.manifest };
    const progress = await progressInStorage(storage, runId);
    if (progress) return { state: 'open', progress };
  }
  const found = await findManifest(storage, runId);
  return found ? { state: 'closed', ...found } : { state: 'unknown' };
}

/** The open runs' progress (those with records and no tombstone), oldest first. */
export async function openRunStates(storage: Storage): Promise<RunState[]> {
  const states: RunState[] = [];
  for (const runId of await openRuns({ storage })) {
    const state = await runState(storage, runId);
    // Closed between the listing and the look: it is in `runs` now.
    if (state.state === 'open' || state.state === 'closing') states.push(state);
  }
  return states;
}

/** The output's lock, when a run holds it now. */
export async function heldLock(storage: Storage, now: Date): Promise<LockRecord | undefined> {
  const found = await storage.get(STATE_KEYS.lock);
  if (!found) return undefined;
  const lock = parseRecord(LockRecordSchema, found.body, STATE_KEYS.lock);
  return lockIsFree(lock, now) ? undefined : lock;
}

/** The run id a manifest key names (`runs/dt=…/<run_id>.json`). */
const runIdOfManifestKey = (key: string): string => key.slice(key.lastIndexOf('/') + 1, -'.json'.length);

/** Every manifest key under `runs/`, newest run first (run ids order runs by their start). */
async function manifestKeys(storage: Storage): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storage.list(RUNS_PREFIX)) if (key.endsWith('.json')) keys.push(key);
  return keys.sort((a, b) => runIdOfManifestKey(b).localeCompare(runIdOfManifestKey(a)));
}

async function readManifest(storage: Storage, key: string): Promise<Manifest | undefined> {
  const found = await storage.get(key);
  return found ? parseRecord(ManifestSchema, found.body, key) : undefined;
}

/** A closed run's manifest: where its tombstone says, else found under `runs/`. */
async function findManifest(
  storage: Storage,
  runId: string,
): Promise<{ manifest: Manifest; key: string } | undefined> {
  const tombstone = await storage.get(STATE_KEYS.closed(runId));
  const keys = tombstone
    ? [parseRecord(TombstoneSchema, tombstone.body, STATE_KEYS.closed(runId)).manifest]
    : (await manifestKeys(storage)).filter((key) => runIdOfManifestKey(key) === runId);
  for (const key of keys) {
    const manifest = await readManifest(storage, key);
    if (manifest) return { manifest, key };
  }
  return undefined;
}

/** The last `limit` runs' manifests, newest first, with their keys. */
export async function lastRuns(
  storage: Storage,
  limit: number,
): Promise<{ manifest: Manifest; key: string }[]> {
  const keys = (await manifestKeys(storage)).slice(0, limit);
  const read = await mapPool(keys, READ_CONCURRENCY, async (key) => {
    const manifest = await readManifest(storage, key);
    return manifest && { manifest, key };
  });
  return read.filter((entry) => entry !== undefined);
}
