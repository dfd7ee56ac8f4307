/**
 * Step 1 of a run: take the output's lock (one run at a time; before any API request), close
 * runs left open by interrupted ones, check its table format against what the output then
 * holds (`state/table-format.ts`: a format switch that was interrupted is completed first),
 * verify the key, list every campaign (checkpointed in pieces: `campaign-listing.ts`), stage the campaigns snapshot, and record the run. A fatal API
 * error is recorded (the run then ends as failed), not thrown; a lock held by another run throws
 * `OutputLockedError`. Given a deadline (AWS), the listing hands on before it: the run stays
 * `starting`, holding the output, and `continueStart` (a later delivery) lists the rest and
 * records the run.
 */

import {
  ApiError,
  describeError,
  ExporterError,
  OutputLockedError,
  PreconditionFailedError,
} from '../../errors.js';
import { dtOf, STATE_KEYS } from '../../layout.js';
import { type AcquireOptions, OutputLock } from '../state/lock.js';
import {
  emptyRequestCounts,
  encodeRecord,
  type Fatal,
  fatalOf,
  type Mode,
  parseRecord,
  type RunRecord,
  RunRecordSchema,
  type RunRef,
  type TableFormat,
} from '../state/records.js';
import { checkTableFormat } from '../state/table-format.js';
import { isClosed } from '../state/tombstone.js';
import type { SchemaContract } from '../tables.js';
import { type CampaignListingOptions, listCampaigns, markHandedOn } from './campaign-listing.js';
import { type ExportDeps, newRunId, randomOf, requestCounts } from './context.js';
import { recordUnrecordedRequests } from './finish-run.js';
import { type RecoverOptions, recoverOpenRuns } from './recover.js';

/**
 * How long a run may stay `starting` (verifying, listing the campaigns) before finish-run may
 * judge it dead and close it as failed: start-run's timeout (infra/constructs/functions.ts; a
 * test holds them together). A CLI finishes its own runs.
 */
export const RUN_START_GRACE_MS = 5 * 60_000;

/**
 * How long a start may hold the lock without its first record before the lock counts as free:
 * that record is its very next write, so this covers S3's retries with room to spare, and a
 * start that died right after taking the lock blocks others for this plus the clock allowance
 * both ways (4 minutes), under start-run's timeout.
 */
export const FIRST_RECORD_GRACE_MS = 2 * 60_000;

export interface StartRunInput {
  mode: Mode;
  /** The dt= partition; default: the start date, UTC. */
  dt?: string | undefined;
  /** How the run writes its tables; default `hive`. */
  tableFormat?: TableFormat | undefined;
  /**
   * How the run treats reports that differ from the spec. Absent: `freeze`, as the run record
   * reads (`schemaContractOf`); the entry points pass their setting, `evolve` by default
   * (DEFAULT_SCHEMA_CONTRACT).
   */
  schemaContract?: SchemaContract | undefined;
  /** Who carries the run's steps: this process (CLI) or the queues (AWS). */
  driver: RunRecord['driver'];
  /**
   * The output's lock: how long it lasts unless renewed, how long to wait for another run's.
   * `unlocked`: the caller has made sure no other run writes the output (tests and benchmarks
   * that drive the steps one by one); no lock is taken and no interrupted run is closed.
   */
  lock:
    | (Omit<AcquireOptions, 'newRunId' | 'now' | 'sleep' | 'random'> & { renewEveryMs?: number })
    | 'unlocked';
  /** Announces a run this start closed for an interrupted one (AWS: its ExportRunFinished event). */
  announce?: RecoverOptions['announce'];
  /**
   * Limits on closing the runs it finds left open (AWS: a closing handed on before start-run's
   * timeout, under the closing lease, so that finish-run and start-run never work on one at once).
   */
  recovery?: Pick<RecoverOptions, 'handOnAt' | 'leaseMs' | 'freezeBy' | 'maxOutputBytes'> | undefined;
  /**
   * AWS: when the campaign listing must hand on, and the plan messages sent as its pieces are
   * stored (`campaign-listing.ts`). Absent (CLI): it lists to the end, whatever it takes.
   */
  listing?: Pick<CampaignListingOptions, 'deadline' | 'send'> | undefined;
}

export interface StartedRun {
  run: RunRef;
  record: RunRecord;
  /** The output's lock, held by this run until it finishes (none when started `unlocked`). */
  lock: OutputLock | undefined;
}

/** A listing handed on: checkpointed before the deadline; a later delivery lists from `nextPage` on. */
export interface HandedOnListing {
  kind: 'handed-on';
  nextPage: number;
  pagesRead: number;
}

/** What one delivery of a run's start came to: the run recorded, or its listing handed on. */
export type StartStep = ({ kind: 'recorded' } & StartedRun) | (HandedOnListing & Omit<StartedRun, 'record'>);

/**
 * Starts a run to the end, in this process (the CLI, the tests): no deadline, so the listing
 * never hands on, though it is checkpointed all the same.
 */
export async function startRun(deps: ExportDeps, input: StartRunInput): Promise<StartedRun> {
  const step = await startRunStep(deps, { ...input, listing: undefined });
  if (step.kind === 'handed-on') {
    // Only a deadline hands on; kept as a check so that a change to that shows here at once.
    await step.lock?.release().catch(() => undefined);
    throw new ExporterError(`run ${step.run.run_id}: the campaign listing handed on without a deadline`);
  }
  return { run: step.run, record: step.record, lock: step.lock };
}

/**
 * One delivery of a run's start: the lock, recovery, and the listing as far as `input.listing`'s
 * deadline allows. A listing handed on leaves the run `starting` and the lock held:
 * {@link continueStart} takes it up.
 */
export async function startRunStep(deps: ExportDeps, input: StartRunInput): Promise<StartStep> {
  let lock: OutputLock | undefined;
  let startedAt: Date;
  let runId: string;
  if (input.lock === 'unlocked') {
    startedAt = deps.now();
    runId = (deps.newRunId ?? newRunId)(startedAt, deps.random);
  } else {
    // The run starts when it holds the output: its id then sorts after every run before it.
    const { renewEveryMs, ...acquire } = input.lock;
    lock = await OutputLock.acquire(deps.storage, {
      ...acquire,
      newRunId: (at, previous) => (deps.newRunId ?? newRunId)(at, randomOf(deps), previous),
      now: deps.now,
      // Only a given clock: the lock's own renewal timer is unref'd, so it never keeps a CLI alive.
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      random: randomOf(deps),
      ...(deps.process ? { process: deps.process } : {}),
      // Reported, never taken for a dead holder: the lease is judged on the storage's clock.
      onClockSkew: (skew) => deps.log.warn(skew.message, { clock: skew.clock, skew_ms: skew.skewMs }),
    });
    // From the moment it holds the output, whatever recovery, verify or the listing make it wait.
    if (renewEveryMs !== undefined) {
      lock.keepAlive(renewEveryMs, (error) =>
        deps.log.warn('could not renew the output lock', { run_id: runId, error: describeError(error) }),
      );
    }
    startedAt = lock.acquiredAt;
    runId = lock.runId;
  }
  try {
    const run: RunRef = {
      run_id: runId,
      dt: input.dt ?? dtOf(startedAt),
      mode: input.mode,
      // Hive runs keep the records they always had.
      ...(input.tableFormat === 'iceberg' && { table_format: 'iceberg' as const }),
      // Frozen runs too: their records stay byte for byte what they were before the option.
      ...(input.schemaContract === 'evolve' && { schema_contract: 'evolve' as const }),
    };
    // Recorded before anything it stages, and before it closes others: whoever takes the output
    // after an interruption finds this run and closes it (as failed) instead of deleting its files.
    const stub = startingRecord(run, input.driver, startedAt);
    const { etag } = await deps.storage.put(STATE_KEYS.runRecord(runId), encodeRecord(stub), {
      ifNoneMatch: '*',
    });
    // Runs left open by interrupted ones: closed before this one starts (the lock says none runs),
    // each in its own format; a format switch among them is completed and recorded.
    const leftOpen = lock
      ? await recoverOpenRuns(deps, { ...input.recovery, by: runId, announce: input.announce })
      : [];
    // Then against what the output holds now: a run in another format than the output's would miss reports.
    try {
      await checkTableFormat(deps.storage, run, leftOpen);
    } catch (error) {
      // Refused before any request: it leaves no run to close (it holds the output, nobody races it).
      await deps.storage.delete([STATE_KEYS.runRecord(runId)]);
      throw error;
    }
    const step = await recordStart(deps, { ...run, driver: input.driver, startedAt, etag }, input.listing);
    return { ...step, run, lock };
  } catch (error) {
    // Nothing will finish a run that has no record: let the output go (fatal API answers are
    // recorded, not thrown; this is a storage failure or a bug).
    await lock?.release().catch(() => undefined);
    throw error;
  }
}

/** The first record of a run: says it is starting, and fails it if nothing replaces it. */
function startingRecord(run: RunRef, driver: RunRecord['driver'], startedAt: Date): RunRecord {
  return {
    ...run,
    driver,
    started_at: startedAt.toISOString(),
    campaign_ids: [],
    campaigns_invalid: 0,
    duplicates: 0,
    staged: [],
    requests: emptyRequestCounts(),
    fatal: { message: 'the run was interrupted while it started, before it listed the campaigns' },
    starting: true,
  };
}

/** Where a run's start stands: its reference, and the first record it wrote (to write over). */
interface Starting extends RunRef {
  driver: RunRecord['driver'];
  startedAt: Date;
  /** The `starting` record's etag: the whole record is written over it, and over nothing else. */
  etag: string;
}

/** What a continuation of a run's start came to. */
export type ContinueStep =
  | { kind: 'recorded'; record: RunRecord }
  | HandedOnListing
  /** The run was closed (or never recorded): nothing to go on with. */
  | { kind: 'gone' };

/**
 * A later delivery of a run's start whose listing was handed on (AWS: a continuation message on
 * the plan queue): lists the campaigns from where the stored pieces end and records the run, or
 * hands on again. Any number of deliveries, at once or apart, record the run once; one that
 * finds the run recorded returns its record (its plan messages may not all be sent yet).
 */
export async function continueStart(
  deps: ExportDeps,
  run: RunRef,
  listing: Pick<CampaignListingOptions, 'deadline' | 'send'> = {},
): Promise<ContinueStep> {
  const key = STATE_KEYS.runRecord(run.run_id);
  const found = await deps.storage.get(key);
  if (!found || (await isClosed(deps.storage, run.run_id))) return { kind: 'gone' };
  const record = parseRecord(RunRecordSchema, found.body, key);
  if (!record.starting) return { kind: 'recorded', record };
  const starting: Starting = {
    ...run,
    driver: record.driver,
    startedAt: new Date(record.started_at),
    etag: found.etag,
  };
  // A retryable failure comes back as the message's next delivery, after a checkpoint.
  return recordStart(deps, starting, { ...listing, throwRetryable: true });
}

/**
 * Verifies, lists the campaigns (from the stored pieces on), and writes the run record; or,
 * when the listing's deadline came first, keeps this delivery's requests and hands on.
 */
async function recordStart(
  deps: ExportDeps,
  start: Starting,
  listingOptions: CampaignListingOptions = {},
): Promise<{ kind: 'recorded'; record: RunRecord } | HandedOnListing> {
  const { driver, startedAt, etag: startingEtag, ...run } = start;
  const api = deps.api();
  let fatal: Fatal | undefined;
  let companyName: string | undefined;
  let listing: Awaited<ReturnType<typeof listCampaigns>> | undefined;
  try {
    ({ companyName } = await api.verify());
    deps.log.info('key verified', { company: companyName, run_id: run.run_id });
  } catch (error) {
    if (listingOptions.throwRetryable && error instanceof ApiError && error.retryable) throw error;
    fatal = fatalOf(error);
    deps.log.error('run stopped', { run_id: run.run_id, ...fatal });
  }
  if (!fatal) {
    listing = await listCampaigns(deps, run, api, listingOptions);
    if (listing.end.kind === 'fatal') fatal = listing.end.fatal;
    if (listing.end.kind === 'handed-on') {
      // This delivery's requests have no run record to go in: kept for the manifest.
      await recordUnrecordedRequests(deps, run.run_id, requestCounts(api));
      await markHandedOn(deps, run.run_id);
      deps.log.info('campaign listing handed on before the deadline', {
        run_id: run.run_id,
        pages_read: listing.pagesRead,
        next_page: listing.end.nextPage,
      });
      return { kind: 'handed-on', nextPage: listing.end.nextPage, pagesRead: listing.pagesRead };
    }
  }
  const record: RunRecord = {
    ...run,
    driver,
    started_at: startedAt.toISOString(),
    campaign_ids: listing?.campaignIds ?? [],
    campaigns_invalid: listing?.invalid ?? 0,
    duplicates: listing?.duplicates ?? 0,
    ...(companyName !== undefined ? { company_name: companyName } : {}),
    staged: fatal ? [] : (listing?.staged ?? []),
    requests: requestCounts(api),
    ...(fatal ? { fatal } : {}),
  };
  try {
    // Over its own first record only: a run closed meanwhile (it lost the output while it
    // listed, and the next run closed it) must not come back to life.
    await deps.storage.put(STATE_KEYS.runRecord(run.run_id), encodeRecord(record), { ifMatch: startingEtag });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Another delivery of a handed-on start recorded the run first, from the same pieces: its record stands.
    const stored = await deps.storage.get(STATE_KEYS.runRecord(run.run_id));
    if (stored && !(await isClosed(deps.storage, run.run_id))) {
      const winner = parseRecord(RunRecordSchema, stored.body, STATE_KEYS.runRecord(run.run_id));
      if (!winner.starting) {
        await recordUnrecordedRequests(deps, run.run_id, requestCounts(api));
        return { kind: 'recorded', record: winner };
      }
    }
    throw new OutputLockedError(`run ${run.run_id} was closed by another run while it started`, {
      cause: error,
      hint: 'it lost the output (its lock expired); run again',
    });
  }
  return { kind: 'recorded', record };
}
