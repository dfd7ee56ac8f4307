/**
 * The payloads that cross the AWS edge, in the core so that what sends them (the schedules in
 * CDK, a person invoking by hand) and what reads them (the handlers) share one definition.
 */
import * as z from 'zod';
import { DtSchema, ModeSchema } from '../export/state/records.js';

/**
 * EventBridge Scheduler replaces this text in a target's input with the time the invocation was
 * scheduled for (ISO 8601, UTC, e.g. `2026-11-23T02:00:00Z`).
 */
export const SCHEDULED_TIME = '<aws.scheduler.scheduled-time>';

/**
 * start-run's input. `scheduled_time` comes from a schedule: every delivery of one scheduled
 * time starts at most one run (Scheduler delivers at least once). A hand-started run has none.
 */
export const StartRunEventSchema = z.object({
  mode: ModeSchema.default('incremental'),
  date: DtSchema.optional(),
  scheduled_time: z.iso.datetime({ offset: true }).optional(),
  /**
   * A full run's estimate (its size from the listings' totals, at the stack's pace): `only`
   * answers it and starts nothing (no lock, nothing written: `aws start --full` says it before
   * it starts the run); `skip` starts the run without it (said already). Absent: a full run
   * estimates itself before its campaigns are planned, and logs it.
   */
  estimate: z.enum(['only', 'skip']).optional(),
});
export type StartRunEvent = z.input<typeof StartRunEventSchema>;

/**
 * Why a backfill dated `date` must not start, or undefined: Athena's partition projection starts
 * at `projectionStart` (the stack's `projectionStartDate`), so a `dt` before it would be written
 * and never seen. start-run refuses such a start; the `aws start` command refuses it before
 * invoking, from the stack's `ProjectionStartDate` output.
 */
export function backfillBeforeProjection(
  date: string | undefined,
  projectionStart: string | undefined,
): string | undefined {
  if (date === undefined || projectionStart === undefined || date >= projectionStart) return undefined;
  return (
    `date ${date} is before the partition projection's start ${projectionStart}, so Athena would not see ` +
    `the run: redeploy with projectionStartDate ${date} or earlier (deploy/<stage>.json), then start it again`
  );
}

/** The input a schedule of `mode` sends (Scheduler fills in the scheduled time). */
export const scheduledStartInput = (mode: z.infer<typeof ModeSchema>): StartRunEvent => ({
  mode,
  scheduled_time: SCHEDULED_TIME,
});

/**
 * What start-run answers a full run with, besides its id (shared/export/run/estimate.ts): the
 * run's size from the listings' totals and the pace the stack sets, from which `aws start`
 * says how long the run takes and what shortens it.
 */
export const FullRunEstimateSchema = z.object({
  size: z.object({
    campaigns: z.number().int().nonnegative(),
    counted: z.number().int().nonnegative(),
    reports: z.number().int().nonnegative(),
    range: z.object({ low: z.number().nonnegative(), high: z.number().nonnegative() }).optional(),
    requests: z.number().int().nonnegative(),
  }),
  /** Requests per second the deployment's functions send together at most (the budget the leasers share). */
  rate: z.number().positive(),
  /** The stack's `rateCeiling`. */
  rate_ceiling: z.number().positive(),
  /** The stack's `runDeadlineMinutes`. */
  deadline_minutes: z.number().positive(),
});
export type FullRunEstimate = z.infer<typeof FullRunEstimateSchema>;
