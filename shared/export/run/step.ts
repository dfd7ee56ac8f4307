/**
 * The control around one step of a run (plan a campaign, export a unit), the same whoever carries
 * it: the SQS handlers in AWS and the local run. A step of a run that has finished is dropped;
 * a step that fails before writing its record leaves its requests for the manifest.
 */
import { describeError } from '../../errors.js';
import type { RequestCounts } from '../state/records.js';
import { countingRequests, type ExportDeps } from './context.js';
import { recordUnrecordedRequests, runIsOpen } from './finish-run.js';

export interface StepOptions {
  /**
   * Check first that the run still takes work (default true). Work carried by queues may come
   * late or be redriven; it must not write what the manifest does not count. A local run owns
   * its run and skips the check.
   */
  gate?: boolean;
  /**
   * Keeps the requests of a step that failed before its record. Default: a requests record in
   * the run's state, which finishing adds to the manifest.
   */
  keepRequests?: (requests: RequestCounts) => Promise<void> | void;
}

/** What a step came to: its value, or dropped because its run has finished. A failure throws. */
export type StepResult<T> = { ran: true; value: T } | { ran: false };

/**
 * Runs one step of run `runId` with `deps` whose clients count their requests.
 *
 * @example
 * const result = await runStep(deps, unit.run_id, (d) => exportUnit(d, unit, { resume: true }));
 * if (!result.ran) return; // the run has finished
 */
export async function runStep<T>(
  deps: ExportDeps,
  runId: string,
  step: (deps: ExportDeps) => Promise<T>,
  options: StepOptions & { gate: false },
): Promise<{ ran: true; value: T }>;
export async function runStep<T>(
  deps: ExportDeps,
  runId: string,
  step: (deps: ExportDeps) => Promise<T>,
  options?: StepOptions,
): Promise<StepResult<T>>;
export async function runStep<T>(
  deps: ExportDeps,
  runId: string,
  step: (deps: ExportDeps) => Promise<T>,
  options: StepOptions = {},
): Promise<StepResult<T>> {
  if ((options.gate ?? true) && !(await runIsOpen(deps, runId))) return { ran: false };
  const counting = countingRequests(deps);
  try {
    return { ran: true, value: await step(counting.deps) };
  } catch (error) {
    const keep = options.keepRequests ?? ((requests) => recordUnrecordedRequests(deps, runId, requests));
    try {
      await keep(counting.requests());
    } catch (keepError) {
      // The step's own error is the one to report; its requests are only missing from the count.
      deps.log.warn('could not keep the requests of a failed step', {
        run_id: runId,
        error: describeError(keepError),
      });
    }
    throw error;
  }
}
