/**
 * The publish step of an Iceberg run: after its data files are written (`publish.ts`), one
 * snapshot per table that got rows, committed through the catalog (Glue in AWS, the file
 * catalog elsewhere). Idempotent like every step of closing (`shared/iceberg/commit.ts`): a
 * finisher that takes a closing up again finds the snapshots made before and commits the rest.
 */

import { ExporterError } from '../../errors.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import { commitRun, snapshotIdOf } from '../../iceberg/commit.js';
import { anySuperseded, type SupersedeRule, supersedeJobs } from '../../iceberg/current.js';
import { idColumnGroups, PositionRuns } from '../../iceberg/current-scan.js';
import { FileCatalog } from '../../iceberg/file-catalog.js';
import { locationOfKey } from '../../iceberg/locations.js';
import type { CommitFile } from '../../iceberg/manifests.js';
import { dataFileMetrics } from '../../iceberg/metrics.js';
import { currentTableOf, type IcebergTableName, icebergParquetTable } from '../../iceberg/schema.js';
import { icebergDataKey } from '../../layout.js';
import { readRange } from '../../storage/storage.js';
import type { Manifest } from '../state/manifest.js';
import type { FileEntry } from '../state/records.js';
import { REPORT_TABLES, schemaContractOf, TABLE_NAMES } from '../tables.js';
import type { ExportDeps } from './context.js';
import { claimOutputCatalog } from './output-catalog.js';
import { blockedByNewerRuns, newerRunCheck, supersedeRuleOf } from './supersede-rule.js';

/** A Parquet file's last bytes: enough for any footer of ours (a few KB per row group). */
const TAIL_BYTES = 4 * 1024 * 1024;

/** The footer bytes of a published file, read back when publishing did not hand them over. */
async function footerOf(deps: ExportDeps, key: string): Promise<Uint8Array> {
  const found = await deps.storage.get(key);
  if (!found) throw new ExporterError(`published file ${key} is missing`, { retryable: true });
  return found.body.subarray(Math.max(0, found.body.length - TAIL_BYTES));
}

/** What commitIcebergRun reads of the manifest: the run, and what its listings and 404s delete. */
type RunOf = Pick<
  Manifest,
  | 'run_id'
  | 'schema_contract'
  | 'dt'
  | 'mode'
  | 'status'
  | 'counts'
  | 'unlisted_campaigns'
  | 'partially_listed_campaigns'
  | 'not_found_jobs'
>;

/**
 * Commits a run's published Parquet files, one snapshot per table that has any, then one
 * snapshot per current table that the run adds rows to or deletes rows from
 * (`shared/iceberg/current.ts`); returns what the manifest says of them (catalog, and per table
 * the snapshot id and metadata location).
 */
export async function commitIcebergRun(
  deps: ExportDeps,
  manifest: RunOf,
  files: readonly FileEntry[],
  footers: ReadonlyMap<string, Uint8Array>,
): Promise<NonNullable<Manifest['iceberg']>> {
  const catalog = deps.catalog ?? new FileCatalog(deps.storage);
  await claimOutputCatalog(deps.storage, catalog);
  const tables: NonNullable<Manifest['iceberg']>['tables'] = {};
  const summary = {
    'exporter.dt': manifest.dt,
    'exporter.mode': manifest.mode,
    'exporter.status': manifest.status,
    'exporter.reports-exported': String(manifest.counts.reports_exported),
  };
  const committed = new Map<string, CommitFile[]>();
  const contract = schemaContractOf(manifest);
  for (const table of TABLE_NAMES) {
    const own = files.filter((f) => f.format === 'parquet' && f.table_or_entity === table);
    if (own.length === 0) continue;
    const parquet = icebergParquetTable(table, contract);
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
      contract,
      now: deps.now(),
    });
    tables[table] = { snapshot_id: outcome.snapshotId, metadata_location: outcome.metadataLocation };
  }
  const rule = await supersedeRuleOf(deps, manifest, committed);
  // A run closed after newer runs committed keeps out its rows of the jobs they superseded.
  const { blocked, newer } = await blockedByNewerRuns(
    deps,
    catalog,
    manifest.run_id,
    committed.get('reports') ?? [],
  );
  if (rule.jobs.size > 0 || rule.listings.size > 0) {
    Object.assign(
      tables,
      await commitCurrentTables(deps, catalog, manifest, committed, summary, rule, blocked, newer),
    );
  }
  return { catalog: catalog.kind, tables };
}

/** Bytes of a published file read at a time while it is copied under a current table. */
const COPY_PART_BYTES = 8 * 1024 * 1024;

/**
 * Copies a published file of `bytes` bytes to `to`, a part at a time (a stream of ranged reads
 * into a streamed write), so that a 256 MB file is never held whole. A storage without ranged
 * reads (a test's wrapper) copies it whole.
 */
async function copyPublished(deps: ExportDeps, from: string, to: string, bytes: number): Promise<void> {
  const missing = () => new ExporterError(`published file ${from} is missing`, { retryable: true });
  const storage = deps.storage;
  if (!storage.getRange) {
    const found = await storage.get(from);
    if (!found) throw missing();
    await storage.put(to, found.body);
    return;
  }
  async function* parts() {
    for (let at = 0; at < bytes; at += COPY_PART_BYTES) {
      const end = Math.min(bytes, at + COPY_PART_BYTES);
      const part = await readRange(storage, from, at, end);
      if (!part) throw missing();
      // The manifest gives the copy the same size: a shorter object would make a corrupt file.
      if (part.length !== end - at)
        throw new ExporterError(`published file ${from} is shorter than its ${bytes} bytes`, {
          retryable: true,
        });
      yield part;
    }
  }
  await storage.putStream(to, parts());
}

/**
 * A snapshot per current table the run changes: the run's data files, copied under the current
 * table (never shared: an engine's maintenance of one table would delete files the other still
 * reads), and position deletes of the rows `rule` supersedes. A table the run adds no file to
 * gets a snapshot only when the rule deletes some of its rows (or an earlier attempt made it).
 */
async function commitCurrentTables(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  manifest: Pick<Manifest, 'run_id' | 'dt' | 'schema_contract'>,
  committed: ReadonlyMap<string, readonly CommitFile[]>,
  summary: Readonly<Record<string, string>>,
  rule: SupersedeRule,
  blocked: ReadonlySet<number>,
  newer: ReadonlySet<string>,
): Promise<NonNullable<Manifest['iceberg']>['tables']> {
  const tables: NonNullable<Manifest['iceberg']>['tables'] = {};
  for (const base of REPORT_TABLES) {
    const table = currentTableOf(base);
    const files: CommitFile[] = [];
    // Rows of the run's own files that newer runs superseded: deleted in the same snapshot.
    const own = new Map<string, { file_path: string; pos: number }[]>();
    for (const f of committed.get(base) ?? []) {
      const { rows, hits } = await blockedRows(deps, f, blocked);
      // A file whose every row a newer run superseded is not added at all.
      if (hits.count > 0 && hits.count === rows) continue;
      const stem = f.key.slice(f.key.lastIndexOf('/') + 1, -'.parquet'.length);
      const key = icebergDataKey(table, manifest.dt, stem);
      await copyPublished(deps, f.key, key, f.bytes);
      files.push({ ...f, key });
      if (hits.count === 0) continue;
      const list = own.get(f.dt) ?? [];
      const path = locationOfKey(deps.storage, key);
      for (const pos of hits.positions()) list.push({ file_path: path, pos });
      own.set(f.dt, list);
    }
    if (files.length === 0 && !(await changes(deps, catalog, table, manifest.run_id, rule))) continue;
    const outcome = await commitRun(deps.storage, catalog, {
      table,
      runId: manifest.run_id,
      files,
      summary,
      contract: schemaContractOf(manifest),
      now: deps.now(),
      changeBase: newerRunCheck(newer, supersedeJobs(deps.storage, catalog, rule, own)),
    });
    tables[table] = { snapshot_id: outcome.snapshotId, metadata_location: outcome.metadataLocation };
  }
  return tables;
}

/** The positions of a published file's rows whose job is in `blocked`, out of its rows. */
async function blockedRows(
  deps: ExportDeps,
  f: CommitFile,
  blocked: ReadonlySet<number>,
): Promise<{ rows: number; hits: PositionRuns }> {
  const hits = new PositionRuns();
  let rows = 0;
  if (blocked.size === 0) return { rows: Number(f.metrics.record_count), hits };
  for await (const group of idColumnGroups(deps.storage, f.key, f.bytes, ['job_id'])) {
    for (const job of group.job_id) {
      if (blocked.has(job)) hits.add(rows);
      rows++;
    }
  }
  return { rows, hits };
}

/** True when the run's snapshot of `table` is there already, or the rule deletes rows of it. */
async function changes(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  table: IcebergTableName,
  runId: string,
  rule: SupersedeRule,
): Promise<boolean> {
  const { metadata } = await catalog.load(table);
  const ours = BigInt(snapshotIdOf(runId, table));
  if (metadata?.snapshots?.some((s) => BigInt(s['snapshot-id']) === ours)) return true;
  return anySuperseded(deps.storage, catalog, table, rule);
}
