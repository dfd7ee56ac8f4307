/**
 * The publish step of an Iceberg run: after its data files are written (`publish.ts`), one
 * snapshot per table that got rows, committed through the catalog (Glue in AWS, the file
 * catalog elsewhere). Idempotent like every step of closing (`shared/iceberg/commit.ts`): a
 * finisher that takes a closing up again finds the snapshots made before and commits the rest.
 */

import { ExporterError } from '../../errors.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import { type CommitFile, commitRun } from '../../iceberg/commit.js';
import { jobIdsOf, supersedeJobs } from '../../iceberg/current.js';
import { FileCatalog } from '../../iceberg/file-catalog.js';
import { dataFileMetrics } from '../../iceberg/metrics.js';
import { currentTableOf, icebergParquetTable } from '../../iceberg/schema.js';
import { icebergDataKey } from '../layout.js';
import type { Manifest } from '../state/manifest.js';
import type { FileEntry } from '../state/records.js';
import { REPORT_TABLES, TABLE_NAMES } from '../tables.js';
import type { ExportDeps } from './context.js';

/** A Parquet file's last bytes: enough for any footer of ours (a few KB per row group). */
const TAIL_BYTES = 4 * 1024 * 1024;

/** The footer bytes of a published file, read back when publishing did not hand them over. */
async function footerOf(deps: ExportDeps, key: string): Promise<Uint8Array> {
  const found = await deps.storage.get(key);
  if (!found) throw new ExporterError(`published file ${key} is missing`, { retryable: true });
  return found.body.subarray(Math.max(0, found.body.length - TAIL_BYTES));
}

/**
 * Commits a run's published Parquet files, one snapshot per table that has any, then, when the
 * run exported reports, one snapshot per current table (`shared/iceberg/current.ts`); returns
 * what the manifest says of them (catalog, and per table the snapshot id and metadata location).
 */
export async function commitIcebergRun(
  deps: ExportDeps,
  manifest: Pick<Manifest, 'run_id' | 'dt' | 'mode' | 'status' | 'counts'>,
  files: readonly FileEntry[],
  footers: ReadonlyMap<string, Uint8Array>,
): Promise<NonNullable<Manifest['iceberg']>> {
  const catalog = deps.catalog ?? new FileCatalog(deps.storage);
  const tables: NonNullable<Manifest['iceberg']>['tables'] = {};
  const summary = {
    'exporter.dt': manifest.dt,
    'exporter.mode': manifest.mode,
    'exporter.status': manifest.status,
    'exporter.reports-exported': String(manifest.counts.reports_exported),
  };
  const committed = new Map<string, CommitFile[]>();
  for (const table of TABLE_NAMES) {
    const own = files.filter((f) => f.format === 'parquet' && f.table_or_entity === table);
    if (own.length === 0) continue;
    const parquet = icebergParquetTable(table);
    const commitFiles = await Promise.all(
      own.map(async (f) => ({
        key: f.key,
        dt: manifest.dt,
        bytes: f.bytes,
        metrics: dataFileMetrics(footers.get(f.key) ?? (await footerOf(deps, f.key)), parquet),
      })),
    );
    committed.set(table, commitFiles);
    const outcome = await commitRun(deps.storage, catalog, {
      table,
      runId: manifest.run_id,
      files: commitFiles,
      summary,
      now: deps.now(),
    });
    tables[table] = { snapshot_id: outcome.snapshotId, metadata_location: outcome.metadataLocation };
  }
  const reports = committed.get('reports') ?? [];
  if (reports.length > 0) {
    Object.assign(tables, await commitCurrentTables(deps, catalog, manifest, committed, summary));
  }
  return { catalog: catalog.kind, tables };
}

/**
 * One snapshot per current table: the run's data files, copied under the current table (never
 * shared: an engine's maintenance of one table would delete files the other still reads), and
 * position deletes of the older rows of every job in the run's `reports` files.
 */
async function commitCurrentTables(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  manifest: Pick<Manifest, 'run_id' | 'dt'>,
  committed: ReadonlyMap<string, readonly CommitFile[]>,
  summary: Readonly<Record<string, string>>,
): Promise<NonNullable<Manifest['iceberg']>['tables']> {
  const jobs = new Set<number>();
  for (const f of committed.get('reports') ?? []) {
    const found = await deps.storage.get(f.key);
    if (!found) throw new ExporterError(`published file ${f.key} is missing`, { retryable: true });
    for (const id of await jobIdsOf(found.body)) jobs.add(id);
  }
  const tables: NonNullable<Manifest['iceberg']>['tables'] = {};
  for (const base of REPORT_TABLES) {
    const table = currentTableOf(base);
    const files: CommitFile[] = [];
    for (const f of committed.get(base) ?? []) {
      const stem = f.key.slice(f.key.lastIndexOf('/') + 1, -'.parquet'.length);
      const key = icebergDataKey(table, manifest.dt, stem);
      const found = await deps.storage.get(f.key);
      if (!found) throw new ExporterError(`published file ${f.key} is missing`, { retryable: true });
      await deps.storage.put(key, found.body);
      files.push({ ...f, key });
    }
    const outcome = await commitRun(deps.storage, catalog, {
      table,
      runId: manifest.run_id,
      files,
      summary,
      now: deps.now(),
      changeBase: supersedeJobs(deps.storage, catalog, jobs),
    });
    tables[table] = { snapshot_id: outcome.snapshotId, metadata_location: outcome.metadataLocation };
  }
  return tables;
}
