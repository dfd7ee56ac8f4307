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
import { PreconditionFailedError, StorageError } from '../../errors.js';
import { manifestKey, runIdOfStateKey, STATE_KEYS } from '../../layout.js';
import { claimAnnouncement } from '../state/announcement.js';
import { takeClosingLease } from '../state/closing-lease.js';
import { campaignsWithState, forgetRunsBefore, saveOutcomes } from '../state/incremental.js';
import { releaseLockOf } from '../state/lock.js';
import { encodeManifest, type Manifest, ManifestSchema } from '../state/manifest.js';
import {
  addRequestCounts,
  encodeRecord,
  type FileEntry,
  parseRecord,
  type RequestCounts,
  tableFormatOf,
} from '../state/records.js';
import { recordCatalog, recordTableFormat, switchesTableFormat } from '../state/table-format.js';
import { isClosed, writeTombstone } from '../state/tombstone.js';
import {
  type ClosingRecord,
  closedClosing,
  outcomesOf,
  publishesFiles,
  readClosing,
  startClosing,
  writeClosingPieces,
} from './closing.js';
import { commitIcebergRun } from './commit-iceberg.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { mapPool } from './pool.js';
import type { PublishOptions } from './publish.js';
import { HandedOn, publishClosing, tailMs } from './publish-closing.js';
import {
  isComplete,
  isCompleteInStorage,
  type RecordsSource,
  type RunRecords,
  RunVanished,
  readRunRecord,
  recordsInMemory,
  recordsInStorage,
} from './run-records.js';

/** State objects written at once when a run finishes. */
const STATE_WRITE_CONCURRENCY = 8;
/** Keys deleted per request when a closed run's records go (S3 DeleteObjects takes 1,000). */
const DELETE_BATCH = 1_000;

export interface FinishOptions {
  /** End the run even if units are missing or pending: their jobs are counted failed (or deferred). */
  force: boolean;
  /** The run's records, when the caller holds them (tests); default: read from storage, as a stream. */
  records?: RunRecords | undefined;
  /** Requests of the caller's steps that failed before writing their records (a CLI's own run). */
  unrecorded?: RequestCounts | undefined;
  /**
   * The run's deadline closed it while its work was still queued: jobs whose unit never
   * reported are deferred to the next run (manifest `reports_deferred`), not failed.
   */
  deferUnreported?: boolean | undefined;
  /**
   * Epoch ms (by `deps.now()`) after which this finisher starts no further output, nor the steps
   * after the publish once it did some of it, and hands the closing on (throws `HandedOn`), so
   * that it ends within half its timeout (`finisherLimits`). Absent: no limit (CLI).
   */
  handOnAt?: number | undefined;
  /**
   * Epoch ms by which this finisher must have ended (`finisherLimits`): instead of `handOnAt`,
   * an output is started only if it can end by then (`outputInFlightMs`), and the Iceberg commit
   * and the steps after the publish only if their `tailMs` fits; else it hands on.
   */
  endBy?: number | undefined;
  /**
   * Epoch ms (by `deps.now()`) after which freezing the closing reads no further campaign's
   * records: the freeze is given up (`HandedOn`; the pieces it wrote are named by no record, and
   * go with the run's records when it closes) and left to a finisher without this limit
   * (finish-run). start-run's recovery: freezing is linear in the run's records (BENCHMARKS.md,
   * freeze). Absent: no limit.
   */
  freezeBy?: number | undefined;
  /**
   * Outputs of more staged input than this are left to the next finisher (`HandedOn`): a
   * finisher with less time or CPU than finish-run's (start-run's recovery) writes small ones only.
   */
  maxOutputBytes?: number | undefined;
  /**
   * Take the run's closing lease for this long (longer than the finisher can live): one finisher
   * at a time works on a closing; one that finds it held returns `undefined`. Absent: no lease
   * (a CLI finishing its own run, which holds the output's lock).
   */
  leaseMs?: number | undefined;
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
  return [...runs].filter(([, folder]) => !folder.closed).map(([id]) => id);
}

/** What a run's folder under `state/runs/` shows by its keys alone. */
export interface RunFolder {
  /** It has a tombstone. */
  closed: boolean;
}

/**
 * Every run that has keys under `state/runs/`, by run id, in run id order. One listing; only
 * the tombstones are kept of the keys (a large run has ~130,000 keys while it is open).
 */
export async function runFolders(deps: Pick<ExportDeps, 'storage'>): Promise<Map<string, RunFolder>> {
  const runs = new Map<string, RunFolder>();
  for await (const key of deps.storage.list(STATE_KEYS.runsPrefix)) {
    const id = runIdOfStateKey(key);
    if (id === undefined) continue;
    const folder = runs.get(id) ?? { closed: false };
    if (key === STATE_KEYS.closed(id)) folder.closed = true;
    runs.set(id, folder);
  }
  return runs;
}

/** The manifest of a run, if it was written. */
async function readManifest(deps: ExportDeps, key: string): Promise<Manifest | undefined> {
  const found = await deps.storage.get(key);
  return found ? parseRecord(ManifestSchema, found.body, key) : undefined;
}

/**
 * Publishes the run's files and writes its manifest (once); returns the manifest of record, and
 * whether this call did some of the long work (wrote an output, committed the Iceberg tables).
 */
async function publishAndRecord(
  deps: ExportDeps,
  closing: ClosingRecord,
  options: FinishOptions,
): Promise<{ manifest: Manifest; worked: boolean }> {
  // A run closed for an interrupted one says by whom (whether or not its own closing had begun).
  const manifest: Manifest = options.recoveredBy
    ? { ...closing.manifest, recovered_by: options.recoveredBy }
    : closing.manifest;
  const key = manifestKey(manifest.dt, manifest.run_id);
  const existing = await readManifest(deps, key);
  // Interrupted after the manifest: the data is out already.
  if (existing) return { manifest: existing, worked: false };
  let files: FileEntry[] = [];
  let iceberg: Manifest['iceberg'];
  let worked = false;
  if (publishesFiles(closing)) {
    await options.checkLock?.();
    try {
      const published = await publishClosing(deps, manifest, closing, {
        ...options.publish,
        handOnAt: options.handOnAt,
        endBy: options.endBy,
        maxOutputBytes: options.maxOutputBytes,
      });
      files = published.files;
      worked = published.written > 0;
      // The commit is the publish of an Iceberg run: its snapshots make the files visible.
      if (tableFormatOf(manifest) === 'iceberg') {
        // A finisher that published outputs and has no time left leaves the commit to the next.
        if (published.written > 0) handOnIfDue(deps, options, manifest, 2);
        await options.checkLock?.();
        iceberg = await commitIcebergRun(deps, manifest, files, published.footers);
        worked = true;
      }
    } catch (error) {
      if (error instanceof HandedOn) throw error;
      // A second finisher may have completed the run (and cleared the staging) meanwhile.
      const stored = await readManifest(deps, key);
      if (stored) return { manifest: stored, worked };
      throw error;
    }
  }
  const published: Manifest = { ...manifest, files, ...(iceberg && { iceberg }) };
  try {
    await deps.storage.put(key, encodeManifest(published), { ifNoneMatch: '*' });
    return { manifest: published, worked };
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Written by another finisher of the same closing: the manifest of record is that one.
    const stored = await readManifest(deps, key);
    if (stored) return { manifest: stored, worked };
    throw new StorageError(`manifest ${key} was refused and is not there`, key, {
      cause: error,
      retryable: true,
    });
  }
}

/**
 * Throws `HandedOn` once the finisher's time is up: with `endBy`, when `steps` steps of the
 * run's `tailMs` no longer fit before it (the Iceberg commit and what follows: 2; what follows: 1).
 */
function handOnIfDue(deps: ExportDeps, options: FinishOptions, manifest: Manifest, steps: number): void {
  const now = deps.now().getTime();
  const due =
    options.endBy !== undefined
      ? now + steps * tailMs(manifest.counts.jobs) > options.endBy
      : options.handOnAt !== undefined && now >= options.handOnAt;
  if (due) throw new HandedOn(`run ${manifest.run_id}: its finisher's time is up; the next one goes on`);
}

/** Freezes the closing from the run's records; `undefined` when there is nothing to close (yet). */
async function freezeClosing(
  deps: ExportDeps,
  runId: string,
  options: FinishOptions,
): Promise<ClosingRecord | undefined> {
  let source: RecordsSource | undefined;
  if (options.records) {
    if (!options.force && !isComplete(options.records)) return undefined;
    source = recordsInMemory(options.records);
  } else {
    source = await recordsInStorage(deps, runId);
    if (!source || (!options.force && !(await isCompleteInStorage(deps, source.record)))) return undefined;
  }
  if (options.unrecorded)
    source = { ...source, unrecorded: addRequestCounts(source.unrecorded, options.unrecorded) };
  await options.checkLock?.();
  try {
    const { freezeBy } = options;
    const checkTime =
      freezeBy === undefined
        ? undefined
        : () => {
            if (deps.now().getTime() >= freezeBy)
              throw new HandedOn(`run ${runId}: freezing its closing takes longer than this finisher has`);
          };
    const closing = await writeClosingPieces(deps, source, deps.now(), {
      deferUnreported: options.deferUnreported,
      checkTime,
    });
    return await startClosing(deps, closing);
  } catch (error) {
    // A record listed a moment ago is gone: another finisher closed the run meanwhile.
    if (error instanceof RunVanished) return undefined;
    throw error;
  }
}

/**
 * Finishes a run, or takes up the finishing of one that was cut short: publishes its files,
 * writes its manifest (once: a second finisher keeps the first), records its outcomes in the
 * incremental state, announces it (once), writes its tombstone, deletes its staging area and
 * records, and releases the output's lock if the run holds it. Returns the manifest when this
 * call closed the run (wrote its tombstone); `undefined` when the run is not complete and not
 * forced, has no records, is being closed by another finisher that holds its lease, or was
 * closed by another finisher (nothing is counted twice). Throws `HandedOn` when `handOnAt`
 * passed first: what it did is kept, and the next finisher goes on from there.
 */
export async function finishRun(
  deps: ExportDeps,
  runId: string,
  options: FinishOptions,
): Promise<Manifest | undefined> {
  if (await isClosed(deps.storage, runId)) return undefined;
  const closing = (await readClosing(deps, runId)) ?? (await freezeClosing(deps, runId, options));
  // A closing record made after the run closed (its own was deleted) is a late closer's.
  if (!closing || (await isClosed(deps.storage, runId))) return undefined;
  const lease =
    options.leaseMs === undefined
      ? undefined
      : await takeClosingLease(
          deps.storage,
          runId,
          randomHex(randomOf(deps), 16),
          deps.now(),
          options.leaseMs,
        );
  if (options.leaseMs !== undefined && !lease) {
    deps.log.info('another finisher is closing the run', { run_id: runId });
    return undefined;
  }
  try {
    return await closeFrom(deps, runId, closing, options);
  } finally {
    await lease?.release();
  }
}

/** Steps 2 to 6 of closing, from a frozen closing record. */
async function closeFrom(
  deps: ExportDeps,
  runId: string,
  closing: ClosingRecord,
  options: FinishOptions,
): Promise<Manifest | undefined> {
  const { manifest, worked } = await publishAndRecord(deps, closing, options);
  // A finisher that published and has no time left leaves the rest (the state, the records'
  // deletion: a minute or two at 1M reports) to the next, which starts with it; one that did
  // none of the publish goes on, so that every look makes progress.
  if (worked) handOnIfDue(deps, options, manifest, 1);
  // A switch of the output's format: the state forgets the earlier runs (their rows are in the
  // other format's tables) before the switch is recorded, so that a closing taken up after a
  // crash in between forgets them too; once recorded, nothing counts exported what the
  // recorded format's tables lack (this run's jobs are saved below, later runs' stand).
  if (await switchesTableFormat(deps.storage, manifest)) {
    await mapPool(await campaignsWithState(deps.storage), STATE_WRITE_CONCURRENCY, (campaignId) =>
      forgetRunsBefore(deps.storage, campaignId, runId, deps),
    );
  }
  await recordTableFormat(deps.storage, manifest);
  // The catalog the run committed to (commit-iceberg.ts: the file catalog when deps name none).
  await recordCatalog(deps.storage, manifest, deps.catalog ? await deps.catalog.ref() : { kind: 'file' });
  // After the manifest: a job is "unchanged" next time only if its rows are in a run with one.
  // One campaign's outcomes at a time (a few in flight); applying them again changes nothing.
  // Not handed on: two requests a campaign, done within seconds even for thousands of them.
  const saving = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  for await (const { campaign_id, jobs } of outcomesOf(deps, closing)) {
    while (saving.size >= STATE_WRITE_CONCURRENCY) await Promise.race(saving);
    if (failure) break;
    const listed = new Set(jobs.map((o) => o.job_id));
    const task: Promise<void> = saveOutcomes(deps.storage, campaign_id, runId, jobs, listed, deps)
      .catch((error: unknown) => {
        failure ??= { error };
      })
      .finally(() => saving.delete(task));
    saving.add(task);
  }
  await Promise.all(saving);
  if (failure) throw failure.error;
  // A run closed before its start recorded it whole (a start that lost the output while it
  // listed): its `starting` record goes before the tombstone, so that the start's write over it
  // (If-Match: start-run.ts recordStart) fails even when this closer dies right after the
  // tombstone; and before the announcement, which the tombstone follows at once.
  if ((await readRunRecord(deps, runId))?.starting) await deps.storage.delete([STATE_KEYS.runRecord(runId)]);
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
  await deps.storage.put(STATE_KEYS.closing(runId), closedClosing(runId));
  await deleteRunRecords(deps, runId);
  await (options.release ?? (() => releaseLockOf(deps.storage, runId, deps.now())))();
  if (!closedHere) return undefined;
  deps.log.info('run finished', { run_id: runId, status: manifest.status, ...manifest.counts });
  return manifest;
}

/** Deletes a closed run's keys but its tombstone and closing marker, a batch at a time as they are listed. */
async function deleteRunRecords(deps: ExportDeps, runId: string): Promise<void> {
  const keep = new Set([STATE_KEYS.closed(runId), STATE_KEYS.closing(runId)]);
  let batch: string[] = [];
  for await (const key of deps.storage.list(STATE_KEYS.runPrefix(runId))) {
    if (keep.has(key)) continue;
    batch.push(key);
    if (batch.length >= DELETE_BATCH) {
      await deps.storage.delete(batch);
      batch = [];
    }
  }
  await deps.storage.delete(batch);
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
