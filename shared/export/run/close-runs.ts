/**
 * The finisher's decision, run on a schedule in AWS: which open runs to close now. A complete
 * run closes at once; an overdue one regardless; an incomplete one when two looks in a row find
 * the queues empty (SQS counts are approximate and lag); a run still starting only once its
 * start has been silent longer than start-run can live (or, once its campaign listing was
 * handed on, than a continuation can take); a CLI run only past its deadline or once another
 * run holds the output, and only if its CLI no longer holds the output (it finishes itself).
 * Closed runs' folders are tidied (tombstones, late debris).
 */

import { STATE_KEYS } from '../../layout.js';
import { listAll } from '../../storage/storage.js';
import { LockRecordSchema, lockIsFree, MAX_CLOCK_SKEW_MS } from '../state/lock.js';
import type { Manifest } from '../state/manifest.js';
import { encodeRecord, parseRecord } from '../state/records.js';
import { sweepClosedRun } from '../state/tombstone.js';
import { HandedOnSchema, LISTING_HANDED_ON_GRACE_MS } from './campaign-listing.js';
import { readClosing } from './closing.js';
import type { ExportDeps } from './context.js';
import { finishRun, runFolders } from './finish-run.js';
import { HandedOn } from './publish-closing.js';
import { isCompleteInStorage, readRunRecord } from './run-records.js';
import { RUN_START_GRACE_MS } from './start-run.js';

export interface CloseRunsOptions {
  /** Now, in epoch milliseconds. */
  now: number;
  /** A run open longer than this is closed whatever its state. */
  deadlineMs: number;
  /** True when no work of any run is queued, visible, in flight or delayed. */
  queuesDrained(): Promise<boolean>;
  /** Announces a closed run (called before its records are cleared). */
  announce(manifest: Manifest): Promise<void>;
  /**
   * Epoch ms after which no further run is taken up, and (without `endBy`) a closing starts no
   * further step and is handed on to the next look. Absent: no limit.
   */
  handOnAt?: number | undefined;
  /** Epoch ms by which the finisher must have ended (`FinishOptions.endBy`). */
  endBy?: number | undefined;
  /** The closing lease's length: longer than a finisher can live (`FinishOptions.leaseMs`). */
  leaseMs?: number | undefined;
}

export interface ClosedRun {
  manifest: Manifest;
  /** Closed by its deadline with work still missing. */
  unfinished: boolean;
}

export interface CloseRunsResult {
  /** The runs this call closed (a run closed by another finisher at the same time is not here). */
  closed: ClosedRun[];
  /** Runs that could not be closed this time; the others were not held back. */
  failures: { runId: string; error: unknown }[];
  /** A run whose closing this call began or went on with, and handed on when its time was up. */
  handedOn: string[];
}

/** Marks a run whose queues look empty; true when the previous look had marked it already. */
async function drainedTwice(
  deps: ExportDeps,
  runId: string,
  drained: boolean,
  now: number,
): Promise<boolean> {
  const mark = STATE_KEYS.drainMark(runId);
  const marked = (await deps.storage.get(mark)) !== undefined;
  if (!drained) {
    if (marked) await deps.storage.delete([mark]);
    return false;
  }
  if (!marked)
    await deps.storage.put(mark, encodeRecord({ first_seen_empty_at: new Date(now).toISOString() }));
  return marked;
}

/** The run that holds the output's lock, by another clock's reckoning too; undefined when it is free. */
async function holderOf(deps: ExportDeps, now: number): Promise<string | undefined> {
  const found = await deps.storage.get(STATE_KEYS.lock);
  if (!found) return undefined;
  const lock = parseRecord(LockRecordSchema, found.body, STATE_KEYS.lock);
  return lockIsFree(lock, new Date(now)) ? undefined : lock.run_id;
}

/** True when the output's lock is held, by another clock's reckoning too, by `runId`. */
async function heldBy(deps: ExportDeps, runId: string, now: number): Promise<boolean> {
  return (await holderOf(deps, now)) === runId;
}

/** True when the run's campaign listing was handed on lately enough that a delivery may still be on it. */
async function listingHandedOnLately(deps: ExportDeps, runId: string, now: number): Promise<boolean> {
  const key = STATE_KEYS.listingHandedOn(runId);
  const found = await deps.storage.get(key);
  if (!found) return false;
  const { handed_on_at } = parseRecord(HandedOnSchema, found.body, key);
  return now - Date.parse(handed_on_at) <= LISTING_HANDED_ON_GRACE_MS + MAX_CLOCK_SKEW_MS;
}

export async function closeRuns(deps: ExportDeps, options: CloseRunsOptions): Promise<CloseRunsResult> {
  const result: CloseRunsResult = { closed: [], failures: [], handedOn: [] };
  let drained: boolean | undefined;
  const finish = {
    announce: options.announce,
    handOnAt: options.handOnAt,
    endBy: options.endBy,
    leaseMs: options.leaseMs,
  };
  // Whether this look has worked on a run's closing: it takes one at least, however late.
  let closedOne = false;
  for (const [runId, folder] of await runFolders(deps)) {
    // A run's closing started after the hand-on time could run past half the timeout: the next
    // look takes the runs left (sweeping a closed one's folder is quick, and goes on).
    const timeIsUp = options.handOnAt !== undefined && deps.now().getTime() >= options.handOnAt;
    if (!folder.closed && closedOne && timeIsUp) {
      deps.log.info('time is up: the next look takes the runs left', { run_id: runId });
      result.handedOn.push(runId);
      break;
    }
    try {
      if (folder.closed) {
        await sweepClosedRun(
          deps.storage,
          runId,
          await listAll(deps.storage, STATE_KEYS.runPrefix(runId)),
          new Date(options.now),
        );
        continue;
      }
      const closing = await readClosing(deps, runId);
      if (closing) {
        // A CLI closing its own run right now: leave it to the CLI.
        if (closing.driver === 'local' && (await heldBy(deps, runId, options.now))) continue;
        // Its closing started and was cut short (a timeout, a hand-on, a second finisher): take it up.
        closedOne = true;
        const manifest = await finishRun(deps, runId, { force: true, ...finish });
        if (manifest) result.closed.push({ manifest, unfinished: false });
        continue;
      }
      const record = await readRunRecord(deps, runId);
      if (!record) continue; // Closed meanwhile; a run's folder without its record is left to recovery.
      const age = options.now - Date.parse(record.started_at);
      if (record.starting) {
        // A start that died after its first record: closed (failed) once start-run cannot be
        // alive, nor a delivery its campaign listing was handed on to.
        if (age <= RUN_START_GRACE_MS + MAX_CLOCK_SKEW_MS) continue;
        if (await listingHandedOnLately(deps, runId, options.now)) continue;
        // A CLI that still holds the output is alive however long its campaign listing takes (a
        // large account's runs longer than start-run's grace): its start is its own to finish.
        if (record.driver === 'local' && (await heldBy(deps, runId, options.now))) continue;
        closedOne = true;
        const manifest = await finishRun(deps, runId, { force: true, ...finish });
        if (manifest) result.closed.push({ manifest, unfinished: true });
        continue;
      }
      const overdue = age > options.deadlineMs;
      // A CLI finishes its own run; past its deadline, or once another run holds the output (its
      // start's recovery closes this one, and may have left it here: recover.ts), only a CLI
      // that no longer holds the output is.
      let takenOver = false;
      if (record.driver === 'local') {
        const holder = await holderOf(deps, options.now);
        if (holder === runId || (!overdue && holder === undefined)) continue;
        // Closed as the start that took the output would have: its missing jobs failed.
        takenOver = !overdue;
      }
      const complete = await isCompleteInStorage(deps, record);
      if (!complete && !overdue && !takenOver) {
        drained ??= await options.queuesDrained();
        if (!(await drainedTwice(deps, runId, drained, options.now))) continue;
      }
      // Cut by its deadline while its work is still queued (a backfill larger than one run): the
      // jobs it never reached are deferred to the next run. Queues drained with work missing mean
      // lost work (messages in the dead-letter queues): those jobs failed.
      let deferUnreported = false;
      if (!complete && overdue && record.driver === 'queues') {
        drained ??= await options.queuesDrained();
        deferUnreported = !drained;
      }
      closedOne = true;
      const manifest = await finishRun(deps, runId, { force: true, deferUnreported, ...finish });
      if (manifest) result.closed.push({ manifest, unfinished: !complete && (overdue || takenOver) });
    } catch (error) {
      if (error instanceof HandedOn) {
        // This finisher's time is up: the next look goes on with this run, then the others.
        deps.log.info('handed the closing on to the next finisher', { run_id: runId });
        result.handedOn.push(runId);
        break;
      }
      deps.log.error('could not finish run', { run_id: runId, error: String(error) });
      result.failures.push({ runId, error });
    }
  }
  return result;
}
