/**
 * Runs left open by interrupted ones (a killed CLI, a lock that expired, a start that died),
 * closed by the run that takes the output's lock next. Such a run is closed, not continued:
 * what it finished (every unit whose record it wrote) is published under its own run id with a
 * manifest (`recovered_by` names the closing run), the jobs it never finished are counted
 * failed, and the new run asks for those again; a run interrupted while it started ends
 * failed. A run that had started closing is finished as frozen. Closed runs' folders are tidied
 * (late debris, old tombstones), and so is what the storage itself left of writes that never
 * completed. Keys of a run that has no run record (a step that wrote after its run closed and
 * its tombstone expired) are deleted.
 */
import { describeError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import { listAll } from '../../storage/storage.js';
import { type TableFormat, tableFormatOf } from '../state/records.js';
import { isClosed, sweepClosedRun } from '../state/tombstone.js';
import { readClosing } from './closing.js';
import type { ExportDeps } from './context.js';
import { type FinishOptions, finishRun, runFolders } from './finish-run.js';
import { HandedOn } from './publish-closing.js';
import { readRunRecord } from './run-records.js';

export interface RecoverOptions {
  /** The run that holds the lock now; its own records are left alone. */
  by: string;
  announce?: FinishOptions['announce'];
  /** Hand a long closing on when this time (epoch ms) has passed (`FinishOptions.handOnAt`). */
  handOnAt?: number | undefined;
  /** Take each closing's lease for this long (`FinishOptions.leaseMs`). */
  leaseMs?: number | undefined;
  /** Leave outputs larger than this to finish-run (`FinishOptions.maxOutputBytes`). */
  maxOutputBytes?: number | undefined;
  /** Give up freezing a closing past this time (epoch ms), leaving it to finish-run (`FinishOptions.freezeBy`). */
  freezeBy?: number | undefined;
}

/**
 * A temp file of a storage write older than this is a dead writer's: a live write renames its
 * temp file within seconds (a 256 MB publish included).
 */
const DEBRIS_AGE_MS = 60 * 60_000;

/** A run that recovery left open (handed on, being closed by another finisher, or failing to close). */
export interface RunLeftOpen {
  run_id: string;
  /** The format its tables are published in when it closes; undefined when its records could not be read. */
  table_format: TableFormat | undefined;
}

/**
 * Closes every open run but `by` (each one logged; one that cannot be closed is left for the
 * next run, or finish-run); returns the runs it left open, with the format each will publish in.
 */
export async function recoverOpenRuns(deps: ExportDeps, options: RecoverOptions): Promise<RunLeftOpen[]> {
  const now = deps.now();
  const leftOpen: RunLeftOpen[] = [];
  for (const [runId, folder] of await runFolders(deps)) {
    if (runId === options.by) continue;
    let closed = false;
    try {
      const keys = async () => listAll(deps.storage, STATE_KEYS.runPrefix(runId));
      if (folder.closed) {
        await sweepClosedRun(deps.storage, runId, await keys(), now);
        continue;
      }
      if (!(await readClosing(deps, runId)) && !(await readRunRecord(deps, runId))) {
        const left = await keys();
        await deps.storage.delete(left);
        deps.log.warn('deleted the leftovers of a run that has no record', {
          run_id: runId,
          keys: left.length,
        });
        continue;
      }
      deps.log.warn('closing a run left open by an interrupted exporter', { run_id: runId, by: options.by });
      closed = !!(await finishRun(deps, runId, {
        force: true,
        recoveredBy: options.by,
        announce: options.announce,
        handOnAt: options.handOnAt,
        leaseMs: options.leaseMs,
        maxOutputBytes: options.maxOutputBytes,
        freezeBy: options.freezeBy,
      }));
    } catch (error) {
      if (error instanceof HandedOn) {
        // finish-run's next look goes on (or freezes the run: a run another run's start took
        // the output from is closed by it, whatever its driver: close-runs.ts).
        deps.log.info('closing of an interrupted run left to finish-run', {
          run_id: runId,
          reason: error.message,
        });
      } else {
        // Left for the next run (or finish-run, for a closing handed on) to take up; this run goes on.
        deps.log.error('could not close an interrupted run', { run_id: runId, error: describeError(error) });
      }
    }
    if (!closed) {
      const open = await leftOpenRun(deps, runId).catch(() => ({ run_id: runId, table_format: undefined }));
      if (open) leftOpen.push(open);
    }
  }
  const swept = await deps.storage.sweep?.({ olderThanMs: DEBRIS_AGE_MS, now });
  if (swept && swept.removed.length > 0)
    deps.log.info('removed storage debris', { files: swept.removed.length });
  return leftOpen;
}

/** A run recovery did not close, if it is still open: its format, from its closing record or its run record. */
async function leftOpenRun(deps: ExportDeps, runId: string): Promise<RunLeftOpen | undefined> {
  if (await isClosed(deps.storage, runId)) return undefined;
  const run = (await readClosing(deps, runId))?.manifest ?? (await readRunRecord(deps, runId));
  // No record of its own: its leftovers are deleted by the next recovery, nothing of it is published.
  if (!run) return undefined;
  return { run_id: runId, table_format: tableFormatOf(run) };
}
