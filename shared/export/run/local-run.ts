/**
 * A whole run in one process (CLI, demo, tests): the same steps the Lambdas run, with
 * in-process concurrency instead of SQS between them. Units with retryable failures get
 * further rounds, as an SQS redelivery would give them.
 */
import { describeError, ExporterError, InterruptedError, OutputLockedError } from '../../errors.js';
import { manifestKey } from '../../layout.js';
import { WindowFactsKeeper } from '../state/api-windows.js';
import type { LockWait } from '../state/lock.js';
import { type Manifest, ManifestSchema } from '../state/manifest.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  type Mode,
  parseRecord,
  type RequestCounts,
  type TableFormat,
  type Unit,
  type UnitJobResult,
  type UnitSummary,
} from '../state/records.js';
import type { SchemaContract } from '../tables.js';
import type { ExportDeps } from './context.js';
import type { SizeEstimate } from './estimate.js';
import { DEFAULT_FETCH_CONCURRENCY, exportUnit, pendingJobs } from './export-unit.js';
import { finishRun } from './finish-run.js';
import { sizeOfRun } from './job-counts.js';
import { DEFAULT_UNIT_SIZE, type PlannedCampaign, planCampaign } from './plan-campaign.js';
import { mapPool } from './pool.js';
import { type StartedRun, startRun } from './start-run.js';
import { runStep } from './step.js';

export interface LocalRunOptions {
  mode: Mode;
  dt?: string | undefined;
  /** How the run writes its tables; default `hive`. */
  tableFormat?: TableFormat | undefined;
  /** How the run treats reports that differ from the spec; absent: `freeze` (StartRunInput). */
  schemaContract?: SchemaContract | undefined;
  unitSize?: number;
  /** Campaigns listed at once. */
  planConcurrency?: number;
  /**
   * Units in flight at once. Two by default: while one unit waits for its last answers and
   * stages its files, the next one's requests keep the API busy (at 1 s of latency a unit of
   * 100 at 50 req/s spends a third of its time on that tail). Memory is two units' worth.
   */
  unitConcurrency?: number;
  /** Reports fetched at once within a unit. */
  fetchConcurrency?: number;
  /** Extra rounds for units whose jobs failed retryably (429 storms, 5xx) after the client's own retries. */
  retryRounds?: number;
  /**
   * Published outputs written at once when the run finishes (default
   * {@link LOCAL_PUBLISH_CONCURRENCY}). The bytes published do not depend on it.
   */
  publishConcurrency?: number;
  /** Wait up to this long for another run to release the output (default: refuse at once). */
  waitForLockMs?: number;
  /** Told when that wait starts and when it ends with the lock taken (the CLI says both). */
  onLockWait?: (wait: LockWait) => void;
  /**
   * A full run counts its campaigns' jobs before it plans them (job-counts.ts) and says its
   * size in an `estimate` event: a few requests, counted in the manifest. Default off.
   */
  estimate?: boolean;
  onProgress?: (event: ProgressEvent) => void;
  /**
   * Stops the run (Ctrl-C): the same signal ends the API clients' requests (ExportDeps.api).
   * The run stops before it publishes and rejects with InterruptedError, its lock released: it
   * leaves what a crashed run leaves, which the next run closes (recover.ts).
   */
  signal?: AbortSignal;
}

export type ProgressEvent =
  | { type: 'started'; runId: string; campaigns: number }
  /** A full run's size from the listings' totals, before its jobs are listed (`estimate` option). */
  | { type: 'estimate'; size: SizeEstimate }
  | { type: 'planned'; campaignId: number; jobs: number; toFetch: number }
  /** One report fetched and written; `again`: in a later round, for a job counted already. */
  | { type: 'report'; outcome: UnitJobResult['outcome']; again: boolean }
  | { type: 'unit'; unit: string; jobs: number; exported: number };

const DEFAULTS = { planConcurrency: 4, unitConcurrency: 2, retryRounds: 2 };

/**
 * Outputs a run in one process publishes at once: one, so that two regroups (each a gathered
 * row group and a decoded column) never add up, whatever the data. Regrouping is synchronous
 * work on the one JavaScript thread, so a second output overlaps only reads and writes. Measured
 * at 100,000 reports (BENCHMARKS.md, cli-memory): 337 MB peak against 341 MB with two, where
 * the long raw `reports` stream happened to pair with each table and no two regroups overlapped.
 * finish-run keeps PUBLISH_CONCURRENCY (two).
 */
export const LOCAL_PUBLISH_CONCURRENCY = 1;

/**
 * A CLI run's lock lasts this long unless renewed: a run killed on another host blocks the
 * output for at most this long (on the same machine, a dead holder's lock is free at once).
 */
export const LOCAL_LOCK_TTL_MS = 60_000;
/** The lock is renewed this often, a third of its life: two renewals may fail before it expires. */
const LOCK_RENEW_MS = LOCAL_LOCK_TTL_MS / 3;

const exportedJobs = (summary: UnitSummary): number =>
  Object.values(summary.jobs).filter((r) => r.outcome === 'exported').length;

/** Runs start → plan → export → finish and returns the manifest (status failed on a fatal error). */
export async function runExport(deps: ExportDeps, options: LocalRunOptions): Promise<Manifest> {
  // The API's windows as earlier runs learnt them, given to the limiter before its first request.
  const windows = deps.windows;
  const keeper =
    windows &&
    new WindowFactsKeeper({ storage: deps.storage, baseUrl: windows.baseUrl, log: deps.log, now: deps.now });
  windows?.startFrom(await keeper?.read());
  try {
    return await lockedRun(deps, options);
  } finally {
    // What the limiter learnt, when it differs from what it was given: a run that got no answer
    // learnt nothing and writes nothing. Not after a Ctrl-C: the process is to stop now.
    if (keeper && !options.signal?.aborted) await keeper.keep(windows.learnt());
  }
}

async function lockedRun(deps: ExportDeps, options: LocalRunOptions): Promise<Manifest> {
  const started = await startRun(deps, {
    mode: options.mode,
    dt: options.dt,
    tableFormat: options.tableFormat,
    schemaContract: options.schemaContract,
    driver: 'local',
    lock: {
      ttlMs: LOCAL_LOCK_TTL_MS,
      // Renewed from the moment it is held: recovery, verify and a listing that waits out a
      // Retry-After all come before the first report.
      renewEveryMs: LOCK_RENEW_MS,
      ...(options.waitForLockMs ? { waitMs: options.waitForLockMs } : {}),
      ...(options.onLockWait ? { onWait: options.onLockWait } : {}),
      // A Ctrl-C while it waits for another run's lock ends the wait: no run has started.
      ...(options.signal ? { signal: options.signal } : {}),
    },
  });
  const lock = started.lock!; // Taken: the run was not started unlocked.
  try {
    return await runSteps(deps, options, started);
  } finally {
    // Released by finishing; released here too when the run stopped on an error (a no-op otherwise).
    await lock.release().catch(() => undefined);
  }
}

async function runSteps(deps: ExportDeps, options: LocalRunOptions, started: StartedRun): Promise<Manifest> {
  const emit = options.onProgress ?? (() => {});
  const lock = started.lock!;
  emit({ type: 'started', runId: started.run.run_id, campaigns: started.record.campaign_ids.length });

  // A fatal answer (revoked key, IP restriction) anywhere stops the work; the run ends failed.
  let stopped = Boolean(started.record.fatal);
  // Finishing reads the run's records back from storage, a campaign at a time: holding every
  // unit's summary here would grow with the run (~30 KB each). Kept here: what storage lacks
  // (the requests of steps that failed before their records) and each unit's exported count.
  let unrecorded = emptyRequestCounts();
  const exportedSoFar = new Map<string, number>();
  // This process owns the run (no gate), and keeps the requests of failed steps itself.
  const stepOptions = {
    gate: false,
    keepRequests: (requests: RequestCounts) => {
      unrecorded = addRequestCounts(unrecorded, requests);
    },
  } as const;
  if (!stopped && options.estimate && options.mode === 'full') {
    const size = await sizeOfRun(deps, started.record, { keep: stepOptions.keepRequests });
    if (size) emit({ type: 'estimate', size });
  }
  if (!stopped) {
    const units: Unit[] = [];
    await mapPool(
      started.record.campaign_ids,
      options.planConcurrency ?? DEFAULTS.planConcurrency,
      async (id) => {
        let planned: PlannedCampaign;
        try {
          ({ value: planned } = await runStep(
            deps,
            started.run.run_id,
            (counted) =>
              planCampaign(
                counted,
                { ...started.run, campaign_id: id },
                options.unitSize ?? DEFAULT_UNIT_SIZE,
              ),
            stepOptions,
          ));
        } catch (error) {
          if (!(error instanceof ExporterError && error.retryable)) throw error;
          // The client's retry budget is spent: the campaign ends the run unlisted (status partial).
          deps.log.warn('could not list the jobs of a campaign', {
            campaign_id: id,
            error: describeError(error),
          });
          return;
        }
        units.push(...planned.units);
        const toFetch = planned.units.reduce((n, u) => n + u.jobs.length, 0);
        emit({ type: 'planned', campaignId: id, jobs: planned.record.jobs, toFetch });
        if (planned.record.fatal) stopped = true;
      },
    );

    let round: Unit[] = units;
    for (
      let attempt = 0;
      !stopped && round.length > 0 && attempt <= (options.retryRounds ?? DEFAULTS.retryRounds);
      attempt++
    ) {
      const again: Unit[] = [];
      await mapPool(round, options.unitConcurrency ?? DEFAULTS.unitConcurrency, async (unit) => {
        if (stopped) return; // Its jobs are counted failed.
        if (options.signal?.aborted) throw interruptedRun(options.signal, unit.run_id);
        const { value: summary } = await runStep(
          deps,
          unit.run_id,
          (counted) =>
            exportUnit(counted, unit, {
              resume: attempt > 0,
              concurrency: options.fetchConcurrency ?? DEFAULT_FETCH_CONCURRENCY,
              onReport: (result) => emit({ type: 'report', outcome: result.outcome, again: attempt > 0 }),
            }),
          stepOptions,
        );
        const exportedBefore = exportedSoFar.get(unit.unit) ?? 0;
        exportedSoFar.set(unit.unit, exportedJobs(summary));
        // A later round reports only what it added: its jobs were counted as done in round one.
        emit({
          type: 'unit',
          unit: unit.unit,
          jobs: attempt === 0 ? unit.jobs.length : 0,
          exported: exportedJobs(summary) - exportedBefore,
        });
        if (summary.fatal) stopped = true;
        else if (pendingJobs(summary) > 0) again.push(unit);
      });
      round = again;
    }
  }
  // Nothing is published once interrupted: the steps that stopped left their work unrecorded.
  if (options.signal?.aborted) throw interruptedRun(options.signal, started.run.run_id);
  const manifest = await finishRun(deps, started.run.run_id, {
    force: true,
    unrecorded,
    // The lock is still ours, checked before the closing is frozen and before publishing: a run
    // that stalled past its expiry, or that a finisher closed, must not close it again.
    checkLock: () => lock.check(),
    beforeTombstone: () => lock.stopRenewing(),
    release: () => lock.release(),
    publish: { concurrency: options.publishConcurrency ?? LOCAL_PUBLISH_CONCURRENCY },
  });
  if (!manifest) {
    // Closed by another finisher from this run's own closing record: published all the same.
    const key = manifestKey(started.run.dt, started.run.run_id);
    const stored = await deps.storage.get(key);
    if (stored) return parseRecord(ManifestSchema, stored.body, key);
    throw new OutputLockedError(`run ${started.run.run_id} was closed by another finisher`, {
      hint: 'it lost the output while it ran; run again',
    });
  }
  return manifest;
}

/** The error of a run stopped by `signal`, naming the run that the next one will close. */
function interruptedRun(signal: AbortSignal, runId: string): InterruptedError {
  return new InterruptedError(`run ${runId} was interrupted before it published`, { cause: signal.reason });
}
