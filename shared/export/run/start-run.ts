/**
 * Step 1 of a run: take the output's lock (one run at a time; before any API request), close
 * runs left open by interrupted ones, verify the key, list every campaign, stage the campaigns
 * snapshot, and record the run. A fatal API error is recorded (the run then ends as failed),
 * not thrown; a lock held by another run throws `OutputLockedError`.
 */

import type { CampaignItem } from '../../api/schemas.js';
import { describeError, OutputLockedError, PreconditionFailedError } from '../../errors.js';
import { campaignRow } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { dtOf, STATE_KEYS } from '../layout.js';
import { type AcquireOptions, OutputLock } from '../state/lock.js';
import {
  emptyRequestCounts,
  encodeRecord,
  type Fatal,
  fatalOf,
  type Mode,
  type RunRecord,
  type RunRef,
  type TableFormat,
} from '../state/records.js';
import { checkTableFormat } from '../state/table-format.js';
import { type ExportDeps, newRunId, randomOf, requestCounts } from './context.js';
import { ListingTally } from './listing.js';
import { type RecoverOptions, recoverOpenRuns } from './recover.js';
import { stageStep } from './staging.js';

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
  recovery?: Pick<RecoverOptions, 'handOnAt' | 'leaseMs' | 'maxOutputBytes'> | undefined;
}

export interface StartedRun {
  run: RunRef;
  record: RunRecord;
  campaigns: CampaignItem[];
  /** The output's lock, held by this run until it finishes (none when started `unlocked`). */
  lock: OutputLock | undefined;
}

export async function startRun(deps: ExportDeps, input: StartRunInput): Promise<StartedRun> {
  let lock: OutputLock | undefined;
  let startedAt: Date;
  let runId: string;
  if (input.lock === 'unlocked') {
    startedAt = deps.now();
    runId = newRunId(startedAt, deps.random);
  } else {
    // The run starts when it holds the output: its id then sorts after every run before it.
    const { renewEveryMs, ...acquire } = input.lock;
    lock = await OutputLock.acquire(deps.storage, {
      ...acquire,
      newRunId: (at) => newRunId(at, randomOf(deps)),
      now: deps.now,
      // Only a given clock: the lock's own renewal timer is unref'd, so it never keeps a CLI alive.
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      random: randomOf(deps),
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
    };
    // Before anything is written: a run in another format than the output's would miss reports.
    await checkTableFormat(deps.storage, run);
    // Recorded before anything it stages, and before it closes others: whoever takes the output
    // after an interruption finds this run and closes it (as failed) instead of deleting its files.
    const stub = startingRecord(run, input.driver, startedAt);
    const { etag } = await deps.storage.put(STATE_KEYS.runRecord(runId), encodeRecord(stub), {
      ifNoneMatch: '*',
    });
    // Runs left open by interrupted ones: closed before this one starts (the lock says none runs).
    if (lock) await recoverOpenRuns(deps, { ...input.recovery, by: runId, announce: input.announce });
    const { record, campaigns } = await recordStart(deps, input, run, startedAt, etag);
    return { run, record, campaigns, lock };
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

/** Verifies, lists the campaigns, stages their snapshot and writes the run record. */
async function recordStart(
  deps: ExportDeps,
  input: StartRunInput,
  run: RunRef,
  startedAt: Date,
  startingEtag: string,
): Promise<Pick<StartedRun, 'record' | 'campaigns'>> {
  const api = deps.api();
  const campaigns: CampaignItem[] = [];
  const rawLines = new JsonLinesBuffer();
  const rows = new TableBuffer(run);
  const ctx = { runId: run.run_id, exportedAt: deps.now() };
  const tally = new ListingTally(deps, run, rawLines);
  let fatal: Fatal | undefined;
  let companyName: string | undefined;
  try {
    ({ companyName } = await api.verify());
    deps.log.info('key verified', { company: companyName, run_id: run.run_id });
    for await (const listed of api.campaigns()) {
      const campaign = await tally.take(listed);
      if (campaign === undefined) continue;
      campaigns.push(campaign);
      rows.add('campaigns', campaignRow(campaign, ctx, listed.raw));
    }
  } catch (error) {
    fatal = fatalOf(error);
    deps.log.error('run stopped', { run_id: run.run_id, ...fatal });
  }

  const staged = fatal
    ? []
    : await stageStep(deps.storage, run.run_id, 'campaigns', 'campaigns', rows, rawLines);
  const record: RunRecord = {
    ...run,
    driver: input.driver,
    started_at: startedAt.toISOString(),
    campaign_ids: campaigns.map((c) => c.id),
    campaigns_invalid: tally.invalid,
    duplicates: tally.duplicates,
    ...(companyName !== undefined ? { company_name: companyName } : {}),
    staged,
    requests: requestCounts(api),
    ...(fatal ? { fatal } : {}),
  };
  try {
    // Over its own first record only: a run closed meanwhile (it lost the output while it
    // listed, and the next run closed it) must not come back to life.
    await deps.storage.put(STATE_KEYS.runRecord(run.run_id), encodeRecord(record), { ifMatch: startingEtag });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    throw new OutputLockedError(`run ${run.run_id} was closed by another run while it started`, {
      cause: error,
      hint: 'it lost the output (its lock expired); run again',
    });
  }
  return { record, campaigns };
}
