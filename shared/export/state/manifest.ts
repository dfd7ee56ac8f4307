/**
 * The run manifest (CONTRACT.md, "Run manifest"): what a run did, counted so that every
 * listed job has exactly one outcome.
 */
import * as z from 'zod';
import { DtSchema, type JobOutcome, ModeSchema, RequestCountsSchema, RunIdSchema } from './records.js';

const count = z.number().int().nonnegative();

export const ManifestCountsSchema = z.object({
  campaigns: count,
  jobs: count,
  reports_exported: count,
  reports_unchanged: count,
  reports_not_ready: count,
  reports_not_found: count,
  reports_invalid: count,
  reports_failed: count,
});
export type ManifestCounts = z.infer<typeof ManifestCountsSchema>;

export const RunStatusSchema = z.enum(['succeeded', 'partial', 'failed']);
export type RunStatus = z.infer<typeof RunStatusSchema>;

export const ManifestSchema = z.object({
  run_id: RunIdSchema,
  dt: DtSchema,
  mode: ModeSchema,
  status: RunStatusSchema,
  started_at: z.string(),
  finished_at: z.string(),
  counts: ManifestCountsSchema,
  requests: RequestCountsSchema,
  /** Campaigns whose jobs could not be listed in this run (their jobs are not counted); status is then partial. */
  unlisted_campaigns: z.array(z.number().int()).optional(),
  /** Present when status is "failed": the one-line reason, with the API's error_code. */
  error: z.object({ message: z.string(), error_code: z.string().optional() }).optional(),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/** The manifest counter of each job outcome. */
export const OUTCOME_COUNTER: Record<JobOutcome, keyof ManifestCounts> = {
  exported: 'reports_exported',
  unchanged: 'reports_unchanged',
  not_ready: 'reports_not_ready',
  not_found: 'reports_not_found',
  invalid: 'reports_invalid',
  failed: 'reports_failed',
};

export const emptyCounts = (): ManifestCounts => ({
  campaigns: 0,
  jobs: 0,
  reports_exported: 0,
  reports_unchanged: 0,
  reports_not_ready: 0,
  reports_not_found: 0,
  reports_invalid: 0,
  reports_failed: 0,
});

/**
 * The contract's status rule: failed on a fatal error; partial when reports failed or were
 * invalid, or when campaigns could not be listed; succeeded otherwise.
 */
export function runStatus(counts: ManifestCounts, fatal: boolean, unlistedCampaigns = 0): RunStatus {
  if (fatal) return 'failed';
  return counts.reports_failed + counts.reports_invalid + unlistedCampaigns > 0 ? 'partial' : 'succeeded';
}
