/**
 * Runs left open by interrupted ones (a killed CLI, a lock that expired), closed by the run
 * that takes the output's lock next. Such a run is closed, not continued: what it finished
 * (every unit whose record it wrote) is published under its own run id with a manifest
 * (`recovered_by` names the closing run), the jobs it never finished are counted failed, and
 * the new run asks for those again. A run that had started closing is finished as frozen.
 * Keys of a run that has no run record (a start that died before writing it, or a unit that
 * wrote after its run closed) are deleted.
 */
import { describeError } from '../../errors.js';
import { listAll } from '../../storage/storage.js';
import { STATE_KEYS } from '../layout.js';
import type { ExportDeps } from './context.js';
import { type FinishOptions, finishRun, openRuns, readClosing, readRunRecords } from './finish-run.js';

export interface RecoverOptions {
  /** The run that holds the lock now; its own records are left alone. */
  by: string;
  announce?: FinishOptions['announce'];
}

/** Closes every open run but `by` (each one logged; one that cannot be closed is left for the next run). */
export async function recoverOpenRuns(deps: ExportDeps, options: RecoverOptions): Promise<void> {
  for (const runId of await openRuns(deps)) {
    if (runId === options.by) continue;
    const closing = await readClosing(deps, runId);
    const records = closing ? undefined : await readRunRecords(deps, runId);
    if (!closing && !records) {
      const keys = await listAll(deps.storage, STATE_KEYS.runPrefix(runId));
      await deps.storage.delete(keys);
      deps.log.warn('deleted the leftovers of a run that never recorded its start', {
        run_id: runId,
        keys: keys.length,
      });
      continue;
    }
    deps.log.warn('closing a run left open by an interrupted exporter', { run_id: runId, by: options.by });
    try {
      await finishRun(deps, runId, {
        force: true,
        records,
        recoveredBy: options.by,
        announce: options.announce,
      });
    } catch (error) {
      // Left for the next run to try again; this run goes on.
      deps.log.error('could not close an interrupted run', { run_id: runId, error: describeError(error) });
    }
  }
}
