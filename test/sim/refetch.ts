/**
 * 23 a recorded report is not fetched again: a unit delivery never asks the API for a job that
 * its unit's summary (`state/runs/<run>/units/<unit>.json`) recorded with an outcome (anything
 * but `pending`) before the delivery began. The design's promise (export-unit.ts, "A unit
 * delivered again resumes: it fetches only the jobs still pending"; export-reports.ts, "Always
 * resume"): a redelivery, a duplicate or a hand-on costs no request for a job already decided.
 *
 * Bound: the summary counts from the moment its write applied, and the delivery from the moment
 * its actor began (its resume read comes after): two deliveries at once, or one that began
 * before the other's summary was written, may both fetch a job. A CLI resumes nothing of
 * another's and is not checked (its units run in its own process).
 */
import { STATE_KEYS } from '../../shared/layout.js';
import type { Monitor } from './monitor.js';
import type { SimS3 } from './s3.js';
import type { Actor } from './scheduler.js';

const UNIT_SUMMARY = /^state\/runs\/([^/]+)\/units\/[^/]+\.json$/;

export class RefetchWatch {
  /** Per run: job id → when a unit summary of the run first recorded it decided. */
  readonly #decided = new Map<string, Map<string, number>>();

  constructor(
    s3: SimS3,
    private readonly monitor: Monitor,
    private readonly now: () => number,
  ) {
    s3.listeners.push((_actor, op, key, body) => {
      if (op !== 'put' || !body) return;
      const run = UNIT_SUMMARY.exec(key)?.[1];
      if (!run) return;
      const summary = JSON.parse(Buffer.from(body).toString('utf8')) as {
        jobs?: Record<string, { outcome: string }>;
      };
      const decided = this.#decided.get(run) ?? new Map<string, number>();
      this.#decided.set(run, decided);
      for (const [job, result] of Object.entries(summary.jobs ?? {})) {
        if (result.outcome !== 'pending' && !decided.has(job)) decided.set(job, this.now());
      }
    });
  }

  /** A report request by `actor` reached the API. */
  asked(actor: Actor, jobId: number): void {
    if (actor.kind !== 'unit') return;
    const run = actor.runFor(undefined);
    if (!run) return;
    const at = this.#decided.get(run)?.get(String(jobId));
    if (at !== undefined && at < actor.startedAt) {
      this.monitor.violate(
        '26 a recorded report is not fetched again',
        `${actor.name} asked for job ${jobId} of run ${run}, which a summary under ${STATE_KEYS.unitsPrefix(run)} had recorded decided ${((actor.startedAt - at) / 1000).toFixed(3)}s before the delivery began`,
        [run],
      );
    }
  }
}
