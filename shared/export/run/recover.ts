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
import { STATE_KEYS } from '../layout.js';
import { sweepClosedRun } from '../state/tombstone.js';
import type { ExportDeps } from './context.js';
import { type FinishOptions, finishRun, readClosing, readRunRecords, runFolders } from './finish-run.js';

export interface RecoverOptions {
  /** The run that holds the lock now; its own records are left alone. */
  by: string;
  announce?: FinishOptions['announce'];
}

/**
 * A temp file of a storage write older than this is a dead writer's: a live write renames its
 * temp file within seconds (a 256 MB publish included).
 */
const DEBRIS_AGE_MS = 60 * 60_000;

/** Closes every open run but `by` (each one logged; one that cannot be closed is left for the next run). */
export async function recoverOpenRuns(deps: ExportDeps, options: RecoverOptions): Promise<void> {
  const now = deps.now();
  for (const [runId, keys] of await runFolders(deps)) {
    if (runId === options.by) continue;
    try {
      if (keys.includes(STATE_KEYS.closed(runId))) {
        await sweepClosedRun(deps.storage, runId, keys, now);
        continue;
      }
      const closing = await readClosing(deps, runId);
      const records = closing ? undefined : await readRunRecords(deps, runId);
      if (!closing && !records) {
        await deps.storage.delete(keys);
        deps.log.warn('deleted the leftovers of a run that has no record', {
          run_id: runId,
          keys: keys.length,
        });
        continue;
      }
      deps.log.warn('closing a run left open by an interrupted exporter', { run_id: runId, by: options.by });
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
  const swept = await deps.storage.sweep?.({ olderThanMs: DEBRIS_AGE_MS, now });
  if (swept && swept.removed.length > 0)
    deps.log.info('removed storage debris', { files: swept.removed.length });
}
