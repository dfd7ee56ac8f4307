/**
 * Step 4 of a run: when every unit has an outcome for every job (or the caller says the run
 * is over: queues drained, deadline passed, the run was interrupted), close it. Closing is a
 * sequence that any finisher can take up where another stopped, and that nobody repeats once
 * it is done:
 * 1. the closing record, written once: the manifest to write, the staged files to publish and
 *    the outcomes to record, frozen (a unit that reports later changes nothing); a finisher that
 *    finds one takes it, never its own view of the records;
 * 2. publish: the staged files become one file per table under `parquet/` and `raw/`;
 * 3. the manifest (with the list of files): from here the run is visible and counted;
 * 4. the incremental state, from the closing record only, so no job is "unchanged" unless its
 *    rows are in a run with a manifest;
 * 5. the announcement, claimed so that it is made once;
 * 6. the tombstone (state/tombstone.ts); then the run's records go and the lock is released.
 * After each guard that a deletion could reopen, the closer looks for the tombstone: a late
 * closer changes nothing. A failed run publishes nothing and records no outcome: its jobs are
 * asked for again.
 */
import * as z from 'zod';
import { PreconditionFailedError, StorageError } from '../../errors.js';
import { listAll } from '../../storage/storage.js';
import { manifestKey, runIdOfStateKey, STATE_KEYS } from '../layout.js';
import { claimAnnouncement } from '../state/announcement.js';
import { RecordedOutcomeSchema, saveOutcomes } from '../state/incremental.js';
import { releaseLockOf } from '../state/lock.js';
import {
  emptyCounts,
  encodeManifest,
  type Manifest,
  ManifestSchema,
  OUTCOME_COUNTER,
  runStatus,
} from '../state/manifest.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  encodeRecord,
  type Fatal,
  type FileEntry,
  FileEntrySchema,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  type RequestCounts,
  RequestCountsSchema,
  type RunRecord,
  RunRecordSchema,
  tableFormatOf,
  type UnitSummary,
  UnitSummarySchema,
} from '../state/records.js';
import { recordTableFormat } from '../state/table-format.js';
import { isClosed, writeTombstone } from '../state/tombstone.js';
import { commitIcebergRun } from './commit-iceberg.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { mapPool } from './pool.js';
import { type PublishOptions, publishRun } from './publish.js';

/** State objects written at once when a run finishes. */
const STATE_WRITE_CONCURRENCY = 8;

export interface FinishOptions {
  /** End the run even if units are missing or pending: their jobs are counted failed. */
  force: boolean;
  /** The run's records, when the caller has just read them. */
  records?: RunRecords | undefined;
  /**
   * Tells the world the run finished (AWS: the ExportRunFinished event). Called after the
   * manifest is written and before the run's records are cleared, so a failed announcement is
   * made again by the next finisher instead of being lost.
   */
  announce?: ((manifest: Manifest) => Promise<void>) | undefined;
  /** Closing a run that was interrupted: the id of the run that closes it (manifest `recovered_by`). */
  recoveredBy?: string | undefined;
  /**
   * Called before the closing is frozen and again before publishing, and throws to stop: a CLI
   * run checks that it still holds the output's lock.
   */
  checkLock?: (() => Promise<void>) | undefined;
  /**
   * Called just before the run's tombstone is written: a CLI stops renewing its lock (once the
   * run is closed its lock is free by the lock's rules, and no renewal may say otherwise).
   */
  beforeTombstone?: (() => void) | undefined;
  /**
   * Releases the output's lock once the run is closed. Default: a finisher's release
   * (`releaseLockOf`), which the holder, if alive, takes for a lost lock; a CLI releases its own.
   */
  release?: (() => Promise<void>) | undefined;
  publish?: PublishOptions | undefined;
}

/** Everything a finisher needs to close a run, frozen when closing starts (`STATE_KEYS.closing`). */
export const ClosingRecordSchema = z.object({
  /** The manifest, its `files` still empty: publishing fills them in. */
  manifest: ManifestSchema,
  /** The staged files to publish (none for a failed run). */
  staged: z.array(FileEntrySchema),
  /** Per campaign whose listing completed: the outcomes to record in its state. */
  outcomes: z.array(z.object({ campaign_id: z.number().int(), jobs: z.array(RecordedOutcomeSchema) })),
  /** Who carried the run (absent in closing records before 0.3): a queue-carried run is announced. */
  driver: z.enum(['local', 'queues']).optional(),
});
export type ClosingRecord = z.infer<typeof ClosingRecordSchema>;

export interface RunRecords {
  record: RunRecord;
  plans: Map<number, PlanRecord>;
  units: Map<string, UnitSummary>;
  /** Requests of steps that failed before writing their records. */
  unrecorded: RequestCounts;
}

/** Reads a run's records; `undefined` when the run has none (finished already, or unknown). */
export async function readRunRecords(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<RunRecords | undefined> {
  const keys = await listAll(deps.storage, STATE_KEYS.runPrefix(runId));
  const runKey = STATE_KEYS.runRecord(runId);
  if (!keys.includes(runKey)) return undefined;
  // A key listed a moment ago and gone now: another finisher closed the run meanwhile.
  let vanished = false;
  const read = async <T>(
    key: string,
    schema: Parameters<typeof parseRecord<T>>[0],
  ): Promise<T | undefined> => {
    const found = await deps.storage.get(key);
    if (!found) vanished = true;
    return found ? parseRecord(schema, found.body, key) : undefined;
  };
  const plans = new Map<number, PlanRecord>();
  const units = new Map<string, UnitSummary>();
  let unrecorded = emptyRequestCounts();
  await mapPool(keys, STATE_WRITE_CONCURRENCY, async (key) => {
    if (key.startsWith(STATE_KEYS.requestsPrefix(runId))) {
      const counts = await read(key, RequestCountsSchema);
      if (counts) unrecorded = addRequestCounts(unrecorded, counts);
    }
    if (key.startsWith(STATE_KEYS.plansPrefix(runId))) {
      const plan = await read(key, PlanRecordSchema);
      if (plan) plans.set(plan.campaign_id, plan);
    } else if (key.startsWith(STATE_KEYS.unitsPrefix(runId))) {
      const unit = await read(key, UnitSummarySchema);
      if (unit) units.set(unit.unit, unit);
    }
  });
  const record = await read(runKey, RunRecordSchema);
  return record && !vanished ? { record, plans, units, unrecorded } : undefined;
}

/** True while a run takes work: it has a run record and has not started closing nor closed (three GETs). */
export async function runIsOpen(deps: ExportDeps, runId: string): Promise<boolean> {
  const [record, closing, closed] = await Promise.all([
    deps.storage.get(STATE_KEYS.runRecord(runId)),
    deps.storage.get(STATE_KEYS.closing(runId)),
    isClosed(deps.storage, runId),
  ]);
  // Once closing has started, what the run publishes is frozen: later work would be dropped.
  return record !== undefined && closing === undefined && !closed;
}

/** Keeps the requests of a step that failed before writing its record, for the manifest. */
export async function recordUnrecordedRequests(deps: ExportDeps, runId: string, requests: RequestCounts) {
  if (requests.total === 0) return;
  const key = STATE_KEYS.requests(runId, randomHex(randomOf(deps), 16));
  await deps.storage.put(key, encodeRecord(requests));
}

/** Ids of the runs that have records under `state/runs/` and no tombstone: not closed yet. */
export async function openRuns(deps: Pick<ExportDeps, 'storage'>): Promise<string[]> {
  const runs = await runFolders(deps);
  return [...runs].filter(([id, keys]) => !keys.includes(STATE_KEYS.closed(id))).map(([id]) => id);
}

/** Every run's keys under `state/runs/`, by run id, in run id order. */
export async function runFolders(deps: Pick<ExportDeps, 'storage'>): Promise<Map<string, string[]>> {
  const runs = new Map<string, string[]>();
  for await (const key of deps.storage.list(STATE_KEYS.runsPrefix)) {
    const id = runIdOfStateKey(key);
    if (id === undefined) continue;
    const keys = runs.get(id) ?? [];
    keys.push(key);
    runs.set(id, keys);
  }
  return runs;
}

/** True when every campaign was planned and every planned job has a final outcome. */
export function isComplete({ record, plans, units }: RunRecords): boolean {
  if (record.fatal) return true;
  if (record.campaign_ids.some((id) => !plans.has(id))) return false;
  for (const plan of plans.values()) {
    for (const name of plan.units) {
      const unit = units.get(name);
      if (!unit || Object.values(unit.jobs).some((r) => r.outcome === 'pending')) return false;
    }
  }
  return true;
}

/**
 * Counts, requests and status of a run; every listed job gets exactly one outcome. `files` is
 * empty: publishing fills it in.
 */
export function buildManifest(records: RunRecords, finishedAt: Date): Manifest {
  const { record, plans, units } = records;
  const counts = emptyCounts();
  let requests = addRequestCounts(record.requests, records.unrecorded);
  let fatal: Fatal | undefined = record.fatal;
  counts.campaigns = record.campaign_ids.length + record.campaigns_invalid;
  counts.campaigns_invalid = record.campaigns_invalid;
  counts.duplicates = record.duplicates;
  // A campaign whose jobs were never listed (its plan kept failing, or its pages contradicted
  // themselves): its jobs are unknown.
  const unlisted = record.fatal
    ? []
    : record.campaign_ids.filter((id) => {
        const plan = plans.get(id);
        return plan === undefined || plan.unlisted !== undefined;
      });
  const partlyListed: number[] = [];
  const notFound: number[] = [];
  for (const plan of plans.values()) {
    requests = addRequestCounts(requests, plan.requests);
    counts.duplicates += plan.duplicates;
    if (plan.unlisted !== undefined) continue;
    fatal ??= plan.fatal;
    if (plan.jobs_invalid > 0) partlyListed.push(plan.campaign_id);
    counts.jobs += plan.jobs;
    counts.reports_unchanged += plan.unchanged.length;
    counts.reports_invalid += plan.jobs_invalid;
    let accounted = plan.unchanged.length + plan.jobs_invalid;
    // A job counts once, whatever unit it stands in (units are cut once per plan; this is a guard).
    const counted = new Set<string>();
    for (const name of plan.units) {
      const unit = units.get(name);
      if (!unit) continue;
      requests = addRequestCounts(requests, unit.requests);
      fatal ??= unit.fatal;
      for (const [jobId, result] of Object.entries(unit.jobs)) {
        if (result.outcome === 'pending' || counted.has(jobId)) continue;
        counted.add(jobId);
        counts[OUTCOME_COUNTER[result.outcome]]++;
        if (result.outcome === 'not_found') notFound.push(Number(jobId));
        accounted++;
      }
    }
    // Jobs listed but never brought to an outcome (unit lost, still pending, listing cut short).
    counts.reports_failed += plan.jobs - accounted;
  }
  return ManifestSchema.parse({
    run_id: record.run_id,
    dt: record.dt,
    mode: record.mode,
    status: runStatus(counts, fatal !== undefined, unlisted.length),
    started_at: record.started_at,
    finished_at: finishedAt.toISOString(),
    counts,
    requests,
    files: [],
    ...(record.company_name !== undefined ? { company_name: record.company_name } : {}),
    ...(record.table_format !== undefined ? { table_format: record.table_format } : {}),
    ...(unlisted.length > 0 ? { unlisted_campaigns: unlisted } : {}),
    ...(partlyListed.length > 0 ? { partially_listed_campaigns: partlyListed.sort((a, b) => a - b) } : {}),
    ...(notFound.length > 0 ? { not_found_jobs: notFound.sort((a, b) => a - b) } : {}),
    ...(fatal
      ? { error: { message: fatal.message, ...(fatal.error_code ? { error_code: fatal.error_code } : {}) } }
      : {}),
  });
}

/** The outcomes to record in each campaign's state (campaigns whose listing completed). */
function stateUpdates({ plans, units }: RunRecords): ClosingRecord['outcomes'] {
  const updates: ClosingRecord['outcomes'] = [];
  for (const plan of plans.values()) {
    // A campaign that answered 404 for its jobs listed none: its state forgets them all, as the
    // latest views and current tables do, so that they are fetched again should it come back.
    if (plan.fatal || plan.unlisted !== undefined) continue;
    const outcomes: ClosingRecord['outcomes'][number]['jobs'] = plan.unchanged.map((j) => ({
      ...j,
      outcome: 'unchanged',
    }));
    for (const name of plan.units) {
      for (const [jobId, result] of Object.entries(units.get(name)?.jobs ?? {})) {
        // A job still pending when the run ends failed in it; the next run asks again.
        const outcome = result.outcome === 'pending' ? 'failed' : result.outcome;
        outcomes.push({ job_id: Number(jobId), fp: result.fp, outcome });
      }
    }
    updates.push({ campaign_id: plan.campaign_id, jobs: outcomes });
  }
  return updates;
}

/** Every file the run's records list as staged: start, plans, and every delivery of every unit. */
function stagedFiles({ record, plans, units }: RunRecords): FileEntry[] {
  const files = [...record.staged];
  for (const plan of plans.values()) {
    files.push(...plan.staged);
    for (const name of plan.units) files.push(...(units.get(name)?.staged ?? []));
  }
  return files;
}

/** The closing record of a run: what it will publish and record, from its records now. */
export function closingOf(records: RunRecords, finishedAt: Date): ClosingRecord {
  const manifest = buildManifest(records, finishedAt);
  // A failed run publishes nothing and records nothing: its jobs are asked for again.
  const failed = manifest.status === 'failed';
  return {
    manifest,
    staged: failed ? [] : stagedFiles(records),
    outcomes: failed ? [] : stateUpdates(records),
    driver: records.record.driver,
  };
}

/** The closing record of a run, if its closing has started. */
export async function readClosing(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<ClosingRecord | undefined> {
  const key = STATE_KEYS.closing(runId);
  const found = await deps.storage.get(key);
  if (!found) return undefined;
  const record = parseRecord(z.union([ClosedClosingSchema, ClosingRecordSchema]), found.body, key);
  return 'closed' in record ? undefined : record;
}

/**
 * What a closed run's closing record becomes: it stays (small) as long as the tombstone, so that
 * its create-if-absent keeps failing and no closer ever makes a second closing record.
 */
const ClosedClosingSchema = z.object({ closed: z.literal(true), run_id: z.string() });

/** The manifest of a run, if it was written. */
async function readManifest(deps: ExportDeps, key: string): Promise<Manifest | undefined> {
  const found = await deps.storage.get(key);
  return found ? parseRecord(ManifestSchema, found.body, key) : undefined;
}

/**
 * Writes the closing record unless one exists; returns the closing record of the run, or
 * `undefined` when the run was closed meanwhile.
 */
async function startClosing(deps: ExportDeps, closing: ClosingRecord): Promise<ClosingRecord | undefined> {
  const runId = closing.manifest.run_id;
  try {
    await deps.storage.put(STATE_KEYS.closing(runId), encodeRecord(closing), { ifNoneMatch: '*' });
    return closing;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Another finisher started first: finish what it froze.
    return readClosing(deps, runId);
  }
}

/** Publishes the run's files and writes its manifest (once); returns the manifest of record. */
async function publishAndRecord(
  deps: ExportDeps,
  closing: ClosingRecord,
  options: FinishOptions,
): Promise<Manifest> {
  // A run closed for an interrupted one says by whom (whether or not its own closing had begun).
  const manifest: Manifest = options.recoveredBy
    ? { ...closing.manifest, recovered_by: options.recoveredBy }
    : closing.manifest;
  const key = manifestKey(manifest.dt, manifest.run_id);
  const existing = await readManifest(deps, key);
  if (existing) return existing; // Interrupted after the manifest: the data is out already.
  let files: FileEntry[] = [];
  let iceberg: Manifest['iceberg'];
  if (closing.staged.length > 0) {
    await options.checkLock?.();
    try {
      const footers = new Map<string, Uint8Array>();
      files = await publishRun(deps.storage, manifest, closing.staged, {
        ...options.publish,
        onFooter: (key, footer) => footers.set(key, footer),
      });
      // The commit is the publish of an Iceberg run: its snapshots make the files visible.
      if (tableFormatOf(manifest) === 'iceberg') {
        await options.checkLock?.();
        iceberg = await commitIcebergRun(deps, manifest, files, footers);
      }
    } catch (error) {
      // A second finisher may have completed the run (and cleared the staging) meanwhile.
      const stored = await readManifest(deps, key);
      if (stored) return stored;
      throw error;
    }
  }
  const published: Manifest = { ...manifest, files, ...(iceberg && { iceberg }) };
  try {
    await deps.storage.put(key, encodeManifest(published), { ifNoneMatch: '*' });
    return published;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Written by another finisher of the same closing: the manifest of record is that one.
    const stored = await readManifest(deps, key);
    if (stored) return stored;
    throw new StorageError(`manifest ${key} was refused and is not there`, key, {
      cause: error,
      retryable: true,
    });
  }
}

/**
 * Finishes a run, or takes up the finishing of one that was cut short: publishes its files,
 * writes its manifest (once: a second finisher keeps the first), records its outcomes in the
 * incremental state, announces it (once), writes its tombstone, deletes its staging area and
 * records, and releases the output's lock if the run holds it. Returns the manifest when this
 * call closed the run (wrote its tombstone); `undefined` when the run is not complete and not
 * forced, has no records, or was closed by another finisher (nothing is counted twice).
 */
export async function finishRun(
  deps: ExportDeps,
  runId: string,
  options: FinishOptions,
): Promise<Manifest | undefined> {
  if (await isClosed(deps.storage, runId)) return undefined;
  let closing = await readClosing(deps, runId);
  if (!closing) {
    const records = options.records ?? (await readRunRecords(deps, runId));
    if (!records || (!options.force && !isComplete(records))) return undefined;
    await options.checkLock?.();
    closing = await startClosing(deps, closingOf(records, deps.now()));
  }
  // A closing record made after the run closed (its own was deleted) is a late closer's.
  if (!closing || (await isClosed(deps.storage, runId))) return undefined;
  const manifest = await publishAndRecord(deps, closing, options);
  await recordTableFormat(deps.storage, manifest);
  // After the manifest: a job is "unchanged" next time only if its rows are in a run with one.
  await mapPool(closing.outcomes, STATE_WRITE_CONCURRENCY, async ({ campaign_id, jobs }) => {
    const listed = new Set(jobs.map((o) => o.job_id));
    await saveOutcomes(deps.storage, campaign_id, runId, jobs, listed, deps);
  });
  if (!options.announce && closing.driver === 'queues') {
    // A CLI closing a run the Lambdas carried cannot announce it: finish-run takes the run up
    // from its closing record (publishing and the state are done already) and announces it.
    deps.log.info('run published; its announcement is left to finish-run', { run_id: runId });
    return undefined;
  }
  if (options.announce && !(await announceOnce(deps, manifest, options.announce))) return undefined;
  const token = randomHex(randomOf(deps), 16);
  options.beforeTombstone?.();
  const closedHere = await writeTombstone(deps.storage, {
    run_id: runId,
    manifest: manifestKey(manifest.dt, runId),
    closed_at: deps.now().toISOString(),
    token,
  });
  // The closing record stays, shrunk, beside the tombstone: a late closer's create-if-absent
  // fails on it, so a closed run never gets a second closing record.
  await deps.storage.put(STATE_KEYS.closing(runId), encodeRecord({ closed: true, run_id: runId }));
  const keep = new Set([STATE_KEYS.closed(runId), STATE_KEYS.closing(runId)]);
  const keys = await listAll(deps.storage, STATE_KEYS.runPrefix(runId));
  await deps.storage.delete(keys.filter((key) => !keep.has(key)));
  await (options.release ?? (() => releaseLockOf(deps.storage, runId, deps.now())))();
  if (!closedHere) return undefined;
  deps.log.info('run finished', { run_id: runId, status: manifest.status, ...manifest.counts });
  return manifest;
}

/**
 * Announces a run unless it was announced or another finisher is announcing it; false when
 * this finisher should stop here (the other one completes the close).
 */
async function announceOnce(
  deps: ExportDeps,
  manifest: Manifest,
  announce: (manifest: Manifest) => Promise<void>,
): Promise<boolean> {
  const claim = await claimAnnouncement(
    deps.storage,
    manifest.run_id,
    deps.now(),
    randomHex(randomOf(deps), 16),
  );
  if (claim.kind === 'busy') return false;
  if (claim.kind === 'done') return true;
  // The claim is a create-if-absent: it succeeds again once the closed run's records are gone.
  if (await isClosed(deps.storage, manifest.run_id)) return false;
  try {
    await announce(manifest);
  } catch (error) {
    await claim.failed(deps.now()).catch(() => undefined);
    throw error;
  }
  // Accepted: from here the tombstone is what keeps others from announcing it again, so a claim
  // that cannot be marked done (a 503) does not stop this finisher from writing it. Marking it
  // is retried first: if the tombstone then fails too, a claim left "in progress" is taken over
  // after its lease, and the run announced a second time.
  await markDone(deps, () => claim.done(deps.now())).catch((error: unknown) =>
    deps.log.warn('could not mark the announcement done', {
      run_id: manifest.run_id,
      error: String(error),
    }),
  );
  return true;
}

/** Tries of marking an announcement done, backing off from 200 ms (about 6 s in all). */
const MARK_DONE_ATTEMPTS = 5;

async function markDone(deps: ExportDeps, mark: () => Promise<void>): Promise<void> {
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await mark();
    } catch (error) {
      if (attempt >= MARK_DONE_ATTEMPTS || !(error instanceof StorageError) || !error.retryable) throw error;
      await sleep(200 * 2 ** (attempt - 1));
    }
  }
}
