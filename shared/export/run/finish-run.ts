/**
 * Step 4 of a run: when every unit has an outcome for every job (or the caller says the run
 * is over: queues drained, deadline passed), turn the run's records into the manifest, record
 * the outcomes in the incremental state, and clear the run's working records.
 */
import { randomUUID } from 'node:crypto';
import { PreconditionFailedError } from '../../errors.js';
import { manifestKey, runIdOfStateKey, STATE_KEYS } from '../layout.js';
import { type RecordedOutcome, saveOutcomes } from '../state/incremental.js';
import { emptyCounts, type Manifest, ManifestSchema, OUTCOME_COUNTER, runStatus } from '../state/manifest.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  encodeRecord,
  type Fatal,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  type RequestCounts,
  RequestCountsSchema,
  type RunRecord,
  RunRecordSchema,
  type UnitSummary,
  UnitSummarySchema,
} from '../state/records.js';
import type { ExportDeps } from './context.js';
import { mapPool } from './pool.js';

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
}

export interface RunRecords {
  record: RunRecord;
  plans: Map<number, PlanRecord>;
  units: Map<string, UnitSummary>;
  /** Requests of steps that failed before writing their records. */
  unrecorded: RequestCounts;
}

/** Reads a run's records; `undefined` when the run has none (finished already, or unknown). */
export async function readRunRecords(deps: ExportDeps, runId: string): Promise<RunRecords | undefined> {
  const keys: string[] = [];
  for await (const key of deps.storage.list(STATE_KEYS.runPrefix(runId))) keys.push(key);
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

/** True while a run has not finished (its run record exists): one GET. */
export async function runIsOpen(deps: ExportDeps, runId: string): Promise<boolean> {
  return (await deps.storage.get(STATE_KEYS.runRecord(runId))) !== undefined;
}

/** Keeps the requests of a step that failed before writing its record, for the manifest. */
export async function recordUnrecordedRequests(deps: ExportDeps, runId: string, requests: RequestCounts) {
  if (requests.total === 0) return;
  const key = STATE_KEYS.requests(runId, randomUUID());
  await deps.storage.put(key, encodeRecord(requests));
}

/** Ids of the runs that have working records, i.e. have not finished. */
export async function openRuns(deps: ExportDeps): Promise<string[]> {
  const ids = new Set<string>();
  for await (const key of deps.storage.list(STATE_KEYS.runsPrefix)) {
    const id = runIdOfStateKey(key);
    if (id) ids.add(id);
  }
  return [...ids];
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

/** Counts, requests and status of a run; every listed job gets exactly one outcome. */
export function buildManifest(records: RunRecords, finishedAt: Date): Manifest {
  const { record, plans, units } = records;
  const counts = emptyCounts();
  let requests = addRequestCounts(record.requests, records.unrecorded);
  let fatal: Fatal | undefined = record.fatal;
  counts.campaigns = record.campaign_ids.length + record.campaigns_invalid;
  // A campaign whose jobs were never listed (its plan kept failing): its jobs are unknown.
  const unlisted = record.fatal ? [] : record.campaign_ids.filter((id) => !plans.has(id));
  for (const plan of plans.values()) {
    requests = addRequestCounts(requests, plan.requests);
    fatal ??= plan.fatal;
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
    ...(unlisted.length > 0 ? { unlisted_campaigns: unlisted } : {}),
    ...(fatal
      ? { error: { message: fatal.message, ...(fatal.error_code ? { error_code: fatal.error_code } : {}) } }
      : {}),
  });
}

/** The outcomes to record in each campaign's state (campaigns whose listing completed). */
function stateUpdates({ plans, units }: RunRecords): Map<number, RecordedOutcome[]> {
  const updates = new Map<number, RecordedOutcome[]>();
  for (const plan of plans.values()) {
    if (plan.fatal || plan.campaign_gone) continue;
    const outcomes: RecordedOutcome[] = plan.unchanged.map((j) => ({ ...j, outcome: 'exported' }));
    for (const name of plan.units) {
      for (const [jobId, result] of Object.entries(units.get(name)?.jobs ?? {})) {
        // A job still pending when the run ends failed in it; the next run asks again.
        const outcome = result.outcome === 'pending' ? 'failed' : result.outcome;
        outcomes.push({ job_id: Number(jobId), fp: result.fp, outcome });
      }
    }
    updates.set(plan.campaign_id, outcomes);
  }
  return updates;
}

/**
 * Finishes a run: records the outcomes in the incremental state, writes its manifest (once:
 * a second finisher keeps the first), announces it, and deletes the run's working records.
 * Returns the manifest, or `undefined` when the run is not complete and not forced.
 */
export async function finishRun(
  deps: ExportDeps,
  runId: string,
  options: FinishOptions,
): Promise<Manifest | undefined> {
  const records = options.records ?? (await readRunRecords(deps, runId));
  if (!records || (!options.force && !isComplete(records))) return undefined;
  const manifest = buildManifest(records, deps.now());
  // State first, manifest last: a manifest means the run is fully recorded.
  const updates = stateUpdates(records);
  await mapPool([...updates], STATE_WRITE_CONCURRENCY, async ([campaignId, outcomes]) => {
    await saveOutcomes(deps.storage, campaignId, runId, outcomes, new Set(outcomes.map((o) => o.job_id)));
  });
  const key = manifestKey(manifest.dt, runId);
  let written = manifest;
  try {
    await deps.storage.put(key, encodeRecord(manifest), {
      ifNoneMatch: '*',
    });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Another finisher wrote it first: announce and return that one, the manifest of record.
    const stored = await deps.storage.get(key);
    if (stored) written = parseRecord(ManifestSchema, stored.body, key);
    deps.log.warn('run already finished by another finisher', { run_id: runId });
  }
  await options.announce?.(written);
  const keys: string[] = [];
  for await (const key of deps.storage.list(STATE_KEYS.runPrefix(runId))) keys.push(key);
  await deps.storage.delete(keys);
  deps.log.info('run finished', { run_id: runId, status: written.status, ...written.counts });
  return written;
}
