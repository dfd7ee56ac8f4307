/**
 * The run manifest (docs/ingest.md#the-run-manifest): what a run did, counted so that every
 * listed job has exactly one outcome.
 */
import * as z from 'zod';
import { SchemaDriftSchema } from '../schema-drift.js';
import { SCHEMA_CONTRACTS } from '../tables.js';
import {
  DtSchema,
  FileEntrySchema,
  type JobOutcome,
  ModeSchema,
  RequestCountsSchema,
  RunIdSchema,
  TableFormatSchema,
} from './records.js';

/** One file a run published (manifest `files`), for ingestion that copies files instead of listing prefixes. */
export const PublishedFileSchema = FileEntrySchema;
export type PublishedFile = z.infer<typeof PublishedFileSchema>;

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
  /** Campaign list items that failed validation (quarantined; they make the run partial). Absent from manifests before 0.2. */
  campaigns_invalid: count.default(0),
  /** Items listed again on a later page (campaigns and jobs); one whose content differed is quarantined. */
  duplicates: count.default(0),
  /**
   * Jobs left for the next run: the run's deadline closed it while their work was still queued
   * (a backfill larger than one run). Not failed: the next run asks for them again. Absent when 0.
   */
  reports_deferred: count.optional(),
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
  /** The files the run published, data before manifest; empty for a failed run (it publishes nothing). */
  files: z.array(PublishedFileSchema),
  /** The company the key belongs to, as the verify endpoint named it (absent when verify failed). */
  company_name: z.string().optional(),
  /** Campaigns whose jobs could not be listed in this run (their jobs are not counted); status is then partial. */
  unlisted_campaigns: z.array(z.number().int()).optional(),
  /**
   * Campaigns whose job listing held items that failed validation (quarantined): the listing
   * is not complete, so the latest views and current tables drop none of the campaign's jobs on it.
   */
  partially_listed_campaigns: z.array(z.number().int()).optional(),
  /** Jobs whose report answered 404 in this run (counted in reports_not_found), ascending. */
  not_found_jobs: z.array(z.number().int()).optional(),
  /**
   * Set when the run was interrupted (its process killed, its lock expired) and a later run
   * closed it: that run's id. It published what it had finished; the rest is counted failed.
   */
  recovered_by: RunIdSchema.optional(),
  /** `iceberg` when the run wrote Iceberg tables (absent: Hive, as before the option). */
  table_format: TableFormatSchema.optional(),
  /**
   * Iceberg runs: the catalog and, per table the run committed to, its snapshot and the
   * metadata file in which that snapshot is current (or was, when it was read back).
   */
  iceberg: z
    .object({
      catalog: z.enum(['file', 'glue']),
      tables: z.record(
        z.string(),
        z.object({ snapshot_id: z.number().int(), metadata_location: z.string() }),
      ),
    })
    .optional(),
  /**
   * `evolve` when the run kept reports that differ from the spec (their values that do not fit
   * in `_rescued`); absent for `freeze` runs (and manifests before the option), whose manifest is
   * as it was: only `evolve` is ever written.
   */
  schema_contract: z.enum(SCHEMA_CONTRACTS).optional(),
  /**
   * Evolve runs: how the run's exported reports differed from the spec, merged over its units
   * (`DriftTally`: by kind, most reports first, at most `DRIFT_ENTRIES_MAX` entries); `[]` when
   * they did not. Drift never makes a run partial or failed.
   */
  schema_drift: SchemaDriftSchema.optional(),
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
  deferred: 'reports_deferred',
};

/** A manifest as stored: one line of JSON, so that Athena's JSON SerDe reads the runs table. */
export const encodeManifest = (manifest: Manifest): string => `${JSON.stringify(manifest)}\n`;

export const emptyCounts = (): ManifestCounts => ({
  campaigns: 0,
  jobs: 0,
  reports_exported: 0,
  reports_unchanged: 0,
  reports_not_ready: 0,
  reports_not_found: 0,
  reports_invalid: 0,
  reports_failed: 0,
  campaigns_invalid: 0,
  duplicates: 0,
});

/**
 * The contract's status rule: failed on a fatal error; partial when reports failed or were
 * invalid (invalid job items count as invalid reports), when campaign items were invalid, or
 * when campaigns could not be listed; succeeded otherwise.
 */
export function runStatus(counts: ManifestCounts, fatal: boolean, unlistedCampaigns = 0): RunStatus {
  if (fatal) return 'failed';
  const incomplete =
    counts.reports_failed + counts.reports_invalid + counts.campaigns_invalid + unlistedCampaigns;
  return incomplete > 0 ? 'partial' : 'succeeded';
}
