/**
 * Step 3 of a run, once per unit: fetch the unit's reports, stage one raw file and one
 * Parquet file per table for the whole unit, quarantine invalid bodies, and record each job's
 * outcome and the files staged. A unit delivered again resumes: it fetches only the jobs still
 * pending and names its files by attempt; only files its summary lists are ever published, so
 * no (job_id, run_id) gets rows twice, even when a delivery died between its files and its summary.
 */
import { DEFAULT_TIMEOUT_MS, type ReportOutcome, type ValidationIssue } from '../../api/client.js';
import { fetcherWaitSeconds } from '../../api/fetcher-slots.js';
import { describeError, PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import { RUN_DEFAULTS } from '../../run-defaults.js';
import { appendEvolvedReportRows, namedJobId } from '../format/evolve-rows.js';
import { appendReportRows } from '../format/flatten.js';
import { jsonTextOf } from '../format/json-text.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { rawLine } from '../raw-lines.js';
import { DriftTally } from '../schema-drift.js';
import { quarantine } from '../state/quarantine.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  encodeRecord,
  fatalOf,
  parseRecord,
  type Unit,
  type UnitJobResult,
  type UnitSummary,
  UnitSummarySchema,
} from '../state/records.js';
import { schemaContractOf } from '../tables.js';
import { type ExportDeps, randomHex, randomOf, requestCounts } from './context.js';
import { mapPool } from './pool.js';
import { stageStep } from './staging.js';
import { stopStartingAfter } from './time-budget.js';

/**
 * Reports asked for at once within a unit: the limiter's ceiling, so that every report of the
 * unit waits in the limiter, which keeps in flight what rate x latency needs.
 */
export const DEFAULT_FETCH_CONCURRENCY = RUN_DEFAULTS.concurrency.value;

/**
 * The longest a unit's wrap-up takes once its last report is in: its rows encoded and staged
 * (100 large reports: 0.7-1.0 s of CPU here, BENCHMARKS.md unit-memory; about 2.4 s at
 * export-reports' 0.43 vCPU, 5 s with the load of that run), quarantines and the summary written.
 */
export const EXPORT_WRAP_UP_MS = 20_000;

/**
 * When, in ms after an export-reports invocation of `timeoutMs` starts, it sends no further
 * request: one sent just before may take the request timeout (no retry of it is sent later),
 * and the unit's wrap-up after it; the invocation then ends within half its timeout. The
 * 300 s timeout: 100 s, the third of it a batch must fit at the rate ceiling
 * (infra/constructs/functions.ts), so a batch at the configured pace is never cut.
 */
export const exportSendMs = (timeoutMs: number): number =>
  stopStartingAfter(timeoutMs, DEFAULT_TIMEOUT_MS + EXPORT_WRAP_UP_MS);

export interface ExportUnitOptions {
  /** Read the unit's summary first and fetch only its pending jobs (a redelivery). */
  resume: boolean;
  concurrency?: number;
  /** Called as each report gets its result (progress); `pending` will be asked again later. */
  onReport?: (result: UnitJobResult) => void;
}

/** Reads the summary of an earlier delivery of a unit, if there was one. */
export async function readUnitSummary(deps: ExportDeps, unit: Unit): Promise<UnitSummary | undefined> {
  return (await readStoredSummary(deps, unit))?.summary;
}

async function readStoredSummary(
  deps: ExportDeps,
  unit: Unit,
): Promise<{ summary: UnitSummary; etag: string } | undefined> {
  const key = STATE_KEYS.unit(unit.run_id, unit.unit);
  const found = await deps.storage.get(key);
  return found ? { summary: parseRecord(UnitSummarySchema, found.body, key), etag: found.etag } : undefined;
}

function resultOf(outcome: ReportOutcome, fp: string): UnitJobResult {
  switch (outcome.kind) {
    case 'ok':
    case 'unchecked':
      return { fp, outcome: 'exported' };
    case 'not_ready':
      return { fp, outcome: 'not_ready', detail: outcome.reason };
    case 'not_found':
      return { fp, outcome: 'not_found' };
    case 'invalid':
      return { fp, outcome: 'invalid', detail: invalidDetail(outcome.issues) };
    case 'failed':
      return {
        fp,
        outcome: outcome.retryable ? 'pending' : 'failed',
        detail: outcome.error.errorCode ?? outcome.error.message,
      };
  }
}

/**
 * Longest text kept from an issue in a unit summary or a quarantine record: a refused cell's
 * message quotes the cell, which may be megabytes long.
 */
const DETAIL_CHARS = 300;

const clip = (text: string): string =>
  text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS - 1)}…` : text;

/** What made a report invalid, in a line: its first issue (the quarantine record has them all). */
function invalidDetail(issues: readonly ValidationIssue[]): string {
  const [first] = issues;
  if (first === undefined) return 'invalid';
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more issue(s))` : '';
  return clip(`${first.path ? `${first.path}: ` : ''}${first.message}${more}`);
}

/**
 * A report that names another job than the one asked for is a provider bug: invalid, not data.
 * Under `evolve`, a report whose `job.id` is absent or not an integer names none, and lands.
 */
function sameJob(outcome: ReportOutcome, jobId: number): ReportOutcome {
  const named =
    outcome.kind === 'ok'
      ? outcome.report.job.id
      : outcome.kind === 'unchecked'
        ? namedJobId(outcome.raw)
        : undefined;
  if (named === undefined || named === jobId) return outcome;
  return {
    kind: 'invalid',
    issues: [{ path: 'data.job.id', code: 'custom', message: `names job ${named}, asked for job ${jobId}` }],
    body: jsonTextOf({ data: (outcome as Fetched).raw }),
  };
}

type Fetched = Extract<ReportOutcome, { kind: 'ok' | 'unchecked' }>;

/** What a unit writes: the rows of every table and the raw lines, staged together at its end. */
interface UnitBuffers {
  rows: TableBuffer;
  rawLines: JsonLinesBuffer;
  /** How the unit's reports differed from the spec (`evolve`): only reports that were added count. */
  drift: DriftTally;
}

/**
 * Adds one report's rows and raw line to the unit's buffers, all or nothing, and returns its
 * outcome. A report that cannot be written (a value the row builder or a Parquet column
 * refuses, a raw line JSON cannot hold) comes back `invalid`, its issue naming the step that
 * failed: one report must not stop its unit, nor every later run that asks for it again.
 * Synchronous, so no other report's rows come in between.
 */
function addReport(
  buffers: UnitBuffers,
  fetched: Fetched,
  unit: Unit,
  jobId: number,
  at: Date,
): ReportOutcome {
  // Its rows are checked as the encoder will check them, and dropped again unless the raw line
  // goes in too (dropping only shortens arrays: it cannot fail half-way).
  const mark = buffers.rows.mark();
  let step = 'row builder';
  const drift = new DriftTally();
  try {
    const ids = { campaignId: unit.campaign_id, jobId };
    const ctx = { runId: unit.run_id, exportedAt: at };
    if (fetched.kind === 'ok') appendReportRows(buffers.rows, fetched.report, ids, ctx);
    else {
      drift.startReport(jobId);
      appendEvolvedReportRows(buffers.rows, fetched.raw, ids, ctx, drift);
    }
    buffers.rows.check(mark);
    step = 'raw line';
    // Adds nothing when it throws (JsonLinesBuffer.add is all or nothing).
    buffers.rawLines.add(
      rawLine(unit.run_id, at.toISOString(), fetched.raw, { campaign_id: ids.campaignId, job_id: jobId }),
    );
  } catch (error) {
    buffers.rows.truncate(mark);
    const cause =
      error instanceof Error && error.cause !== undefined ? ` (${describeError(error.cause)})` : '';
    const message = clip(`${step}: ${describeError(error)}${cause}`);
    return {
      kind: 'invalid',
      issues: [{ path: 'data', code: 'unwritable', message }],
      // The `ok` outcome carries the parsed body, not its text: kept as its JSON text.
      body: jsonTextOf({ data: fetched.raw }),
    };
  }
  if (!drift.empty) buffers.drift.merge(drift.entries());
  return fetched;
}

export async function exportUnit(
  deps: ExportDeps,
  unit: Unit,
  options: ExportUnitOptions,
): Promise<UnitSummary> {
  const stored = options.resume ? await readStoredSummary(deps, unit) : undefined;
  const previous = stored?.summary;
  const attempt = (previous?.attempt ?? 0) + 1;
  const results: Record<string, UnitJobResult> = { ...previous?.jobs };
  const todo = unit.jobs.filter((job) => {
    const done = results[job.job_id];
    return !done || done.outcome === 'pending';
  });

  const api = deps.api();
  const rows = new TableBuffer(unit);
  const rawLines = new JsonLinesBuffer();
  const drift = new DriftTally();
  if (previous?.drift) drift.merge(previous.drift);
  const contract = schemaContractOf(unit);
  let fatal: UnitSummary['fatal'];
  try {
    await mapPool(todo, options.concurrency ?? DEFAULT_FETCH_CONCURRENCY, async (job) => {
      const fetched = sameJob(await api.getReport(unit.campaign_id, job.job_id, contract), job.job_id);
      const fetchedAt = deps.now();
      const outcome =
        fetched.kind === 'ok' || fetched.kind === 'unchecked'
          ? addReport({ rows, rawLines, drift }, fetched, unit, job.job_id, fetchedAt)
          : fetched;
      const result = resultOf(outcome, job.fp);
      results[job.job_id] = result;
      if (outcome.kind === 'invalid') {
        await quarantine(deps.storage, unit, {
          name: `campaign-${unit.campaign_id}-job-${job.job_id}`,
          body: outcome.body,
          issues: outcome.issues,
          fetched_at: fetchedAt.toISOString(),
        });
      }
      options.onReport?.(result);
    });
  } catch (error) {
    // A fatal answer (revoked key, IP restriction) stops the unit; what it fetched is still written.
    fatal = fatalOf(error);
    deps.log.error('unit stopped', { unit: unit.unit, run_id: unit.run_id, ...fatal });
  }

  // Named by attempt and by this delivery: two deliveries at once never write the same keys.
  const stem = `${unit.unit}-a${attempt}-${randomHex(randomOf(deps), 8)}`;
  const staged = await stageStep(deps.storage, unit.run_id, 'reports', stem, rows, rawLines);
  const summary: UnitSummary = {
    unit: unit.unit,
    campaign_id: unit.campaign_id,
    attempt,
    jobs: results,
    staged: [...(previous?.staged ?? []), ...staged],
    requests: addRequestCounts(previous?.requests ?? emptyRequestCounts(), requestCounts(api)),
    ...(fatal ? { fatal } : {}),
    ...(!drift.empty && { drift: drift.entries() }),
  };
  const key = STATE_KEYS.unit(unit.run_id, unit.unit);
  try {
    // Over the summary it resumed from only: of two deliveries at once, one result counts, and
    // the other's files (never listed in a summary) are never published.
    await deps.storage.put(
      key,
      encodeRecord(summary),
      stored ? { ifMatch: stored.etag } : { ifNoneMatch: '*' },
    );
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const winner = await readStoredSummary(deps, unit);
    if (!winner) throw error;
    deps.log.info('unit recorded by another delivery of its message', {
      unit: unit.unit,
      run_id: unit.run_id,
    });
    return winner.summary;
  }
  return summary;
}

/** Jobs of a unit still waiting for another delivery. */
export const pendingJobs = (summary: UnitSummary): number =>
  Object.values(summary.jobs).filter((r) => r.outcome === 'pending').length;

/**
 * What becomes of a unit after a delivery: `done` (its message is deleted), `retry` (it goes
 * back to its queue and resumes on the next delivery), `hand-on` (it goes on in a new
 * message, which counts no delivery towards the queue's maxReceiveCount), or `wait` (its
 * invocation got no fetcher slot: a new message too, delivered after `delaySeconds`).
 */
export type UnitNext =
  | { kind: 'done'; pending: number }
  | { kind: 'retry'; pending: number }
  | { kind: 'hand-on'; pending: number }
  | { kind: 'wait'; delaySeconds: number };

/** A delivery of a unit as the decision sees it (`unitDelivery` gathers it). */
export interface UnitDeliveryFacts {
  summary: UnitSummary;
  /** Reports this delivery got an outcome for (not `pending`). */
  decided: number;
  /** The invocation's time for requests was up before this delivery began. */
  reachedLate: boolean;
  /** The invocation's time for requests is up now. */
  timeUp: boolean;
  /** This delivery's receive count, and the queue's maximum (then the DLQ). */
  receiveCount: number;
  maxReceiveCount: number;
}

/**
 * The rule of export-reports for a unit after a delivery. A unit cut short by its invocation's
 * time for requests goes on in a new message when the delivery got some of its reports, or
 * had no time at all: each message of the chain gets reports or meets a fresh invocation, so
 * the chain ends. A unit with jobs still pending otherwise (429 storm, 5xx, a cut with no
 * progress) is retried until its last delivery, which leaves them to end the run as failed.
 * A fatal answer stops the unit: nothing is pending.
 *
 * @example
 * unitNext({ summary, decided: 3, reachedLate: false, timeUp: true, receiveCount: 1, maxReceiveCount: 5 })
 * // { kind: 'hand-on', pending: … } when jobs are still pending
 */
export function unitNext(facts: UnitDeliveryFacts): UnitNext {
  const pending = facts.summary.fatal ? 0 : pendingJobs(facts.summary);
  if (pending > 0 && (facts.decided > 0 || facts.reachedLate) && facts.timeUp) {
    return { kind: 'hand-on', pending };
  }
  if (pending > 0 && facts.receiveCount < facts.maxReceiveCount) return { kind: 'retry', pending };
  return { kind: 'done', pending };
}

/**
 * One delivery of a unit by an invocation that sends no request once `msUntilStop()` is zero
 * or less: pass `onReport` to `exportUnit`, then `next` says what becomes of the unit
 * (`unitNext`). Taken when the delivery begins, so that a unit its batch reached late is seen
 * as such.
 *
 * @example
 * const delivery = unitDelivery(msUntilStop, { receiveCount, maxReceiveCount });
 * const summary = await exportUnit(deps, unit, { resume: true, onReport: delivery.onReport });
 * if (delivery.next(summary).kind === 'hand-on') await send(unit);
 */
export function unitDelivery(
  msUntilStop: () => number,
  receive: { receiveCount: number; maxReceiveCount: number },
): { onReport: (result: UnitJobResult) => void; next: (summary: UnitSummary) => UnitNext } {
  const reachedLate = msUntilStop() <= 0;
  let decided = 0;
  return {
    onReport: (result) => {
      if (result.outcome !== 'pending') decided++;
    },
    next: (summary) => unitNext({ summary, decided, reachedLate, timeUp: msUntilStop() <= 0, ...receive }),
  };
}

/**
 * The rule of export-reports for a batch whose invocation found every fetcher slot taken
 * (shared/api/fetcher-slots.ts): it sends no request, reads and writes nothing, and each unit
 * goes on in a new message delivered after `delaySeconds` (`fetcherWaitSeconds`), which counts
 * no delivery towards maxReceiveCount: nothing was tried. A unit of a finished run waits too,
 * and is dropped by the delivery that gets a slot (`runStep`): checking here would cost three
 * reads per wait, to spare a wait that only a run closed by its deadline while another run
 * fetches can meet.
 *
 * @example
 * const next = unitWaits(deps);
 * await send(units, { delaySeconds: next.delaySeconds });
 */
export function unitWaits(deps: Pick<ExportDeps, 'random'>): Extract<UnitNext, { kind: 'wait' }> {
  return { kind: 'wait', delaySeconds: fetcherWaitSeconds(randomOf(deps)) };
}
