/**
 * The finisher's decision, run on a schedule in AWS: which open runs to close now. A complete
 * run closes at once; an overdue one regardless; an incomplete one when two looks in a row find
 * the queues empty (SQS counts are approximate and lag); a CLI run only past its deadline (it
 * finishes itself).
 */

import { STATE_KEYS } from '../layout.js';
import type { Manifest } from '../state/manifest.js';
import { encodeRecord } from '../state/records.js';
import type { ExportDeps } from './context.js';
import { finishRun, isComplete, openRuns, readClosing, readRunRecords } from './finish-run.js';

export interface CloseRunsOptions {
  /** Now, in epoch milliseconds. */
  now: number;
  /** A run open longer than this is closed whatever its state. */
  deadlineMs: number;
  /** True when no work of any run is queued, visible, in flight or delayed. */
  queuesDrained(): Promise<boolean>;
  /** Announces a closed run (called before its records are cleared). */
  announce(manifest: Manifest): Promise<void>;
}

export interface ClosedRun {
  manifest: Manifest;
  /** Closed by its deadline with work still missing. */
  unfinished: boolean;
}

export interface CloseRunsResult {
  closed: ClosedRun[];
  /** Runs that could not be closed this time; the others were not held back. */
  failures: { runId: string; error: unknown }[];
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

export async function closeRuns(deps: ExportDeps, options: CloseRunsOptions): Promise<CloseRunsResult> {
  const result: CloseRunsResult = { closed: [], failures: [] };
  let drained: boolean | undefined;
  for (const runId of await openRuns(deps)) {
    try {
      if (await readClosing(deps, runId)) {
        // Its closing started and was cut short (a timeout, a second finisher): take it up.
        const manifest = await finishRun(deps, runId, { force: true, announce: options.announce });
        if (manifest) result.closed.push({ manifest, unfinished: false });
        continue;
      }
      const records = await readRunRecords(deps, runId);
      if (!records) continue; // Finished meanwhile, or a start that failed before writing its record.
      const complete = isComplete(records);
      const overdue = options.now - Date.parse(records.record.started_at) > options.deadlineMs;
      if (records.record.driver === 'local' && !overdue) continue;
      if (!complete && !overdue) {
        drained ??= await options.queuesDrained();
        if (!(await drainedTwice(deps, runId, drained, options.now))) continue;
      }
      const manifest = await finishRun(deps, runId, { force: true, records, announce: options.announce });
      if (manifest) result.closed.push({ manifest, unfinished: !complete && overdue });
    } catch (error) {
      deps.log.error('could not finish run', { run_id: runId, error: String(error) });
      result.failures.push({ runId, error });
    }
  }
  return result;
}
