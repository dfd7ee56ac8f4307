/**
 * The `ExportRunFinished` event on EventBridge, for downstream ingestion: the run, its status
 * and counts, the manifest's key, and the files it published (keys with the bucket's prefix),
 * or only the manifest's key when the list would not fit in an event; for an Iceberg run, each
 * table's snapshot id and metadata location (as the manifest names them); for an evolve run, its
 * schema drift in short (per kind, the top paths). One definition for what
 * announces it (finish-run, start-run closing an interrupted run) and what reads it.
 */
import * as z from 'zod';
import { DriftKindSummarySchema, summarizeDrift } from '../export/state/drift-summary.js';
import {
  type Manifest,
  ManifestCountsSchema,
  ManifestSchema,
  PublishedFileSchema,
  RunStatusSchema,
} from '../export/state/manifest.js';
import { DtSchema, ModeSchema, RunIdSchema } from '../export/state/records.js';
import { manifestKey } from '../layout.js';

export const EVENT_SOURCE = 'campaign-report-exporter';
export const EVENT_DETAIL_TYPE = 'ExportRunFinished';
/**
 * EventBridge takes entries of up to 256 KB; the file list goes in the event while the detail
 * stays under this, and is otherwise read from the manifest (`files_in_manifest: true`).
 */
export const MAX_DETAIL_BYTES = 200 * 1024;

const DetailBaseSchema = z.object({
  /** The deployment's stage: two stages in one account put their events on one bus. */
  stage: z.string().min(1),
  run_id: RunIdSchema,
  dt: DtSchema,
  mode: ModeSchema,
  status: RunStatusSchema,
  bucket: z.string().min(1),
  /** The manifest's key in the bucket, with the data prefix. */
  manifest_key: z.string().min(1),
  counts: ManifestCountsSchema,
  /** Iceberg runs: the catalog and each table's snapshot (absent for Hive runs). */
  iceberg: ManifestSchema.shape.iceberg,
  /** Evolve runs: `evolve` (absent for freeze runs, whose event is as it was). */
  schema_contract: ManifestSchema.shape.schema_contract,
  /**
   * Evolve runs: the drift per kind with its top paths (`summarizeDrift`, a few KB at most);
   * `[]` when none. Every entry is in the manifest's `schema_drift`.
   */
  schema_drift: z.array(DriftKindSummarySchema).optional(),
});

/** The event's detail: everything an ingestion job needs to pick the run up. */
export const RunFinishedDetailSchema = z.union([
  DetailBaseSchema.extend({ files: z.array(PublishedFileSchema) }).strict(),
  DetailBaseSchema.extend({ files_in_manifest: z.literal(true) }).strict(),
]);
export type RunFinishedDetail = z.infer<typeof RunFinishedDetailSchema>;

/** Where the run's output lives: the stage, its bucket and the data prefix its keys carry. */
export interface DataLocation {
  stage: string;
  bucket: string;
  prefix: string;
}

/** The detail of a finished run's event, as JSON text within MAX_DETAIL_BYTES. */
export function runFinishedDetail(manifest: Manifest, where: DataLocation): string {
  const base = {
    stage: where.stage,
    run_id: manifest.run_id,
    dt: manifest.dt,
    mode: manifest.mode,
    status: manifest.status,
    bucket: where.bucket,
    manifest_key: `${where.prefix}${manifestKey(manifest.dt, manifest.run_id)}`,
    counts: manifest.counts,
    ...(manifest.iceberg && { iceberg: manifest.iceberg }),
    ...(manifest.schema_contract === 'evolve' && {
      schema_contract: manifest.schema_contract,
      schema_drift: summarizeDrift(manifest.schema_drift ?? []),
    }),
  };
  const files = manifest.files.map((f) => ({ ...f, key: `${where.prefix}${f.key}` }));
  const withFiles: RunFinishedDetail = { ...base, files };
  const detail = JSON.stringify(withFiles);
  if (Buffer.byteLength(detail) <= MAX_DETAIL_BYTES) return detail;
  const withoutFiles: RunFinishedDetail = { ...base, files_in_manifest: true };
  return JSON.stringify(withoutFiles);
}
