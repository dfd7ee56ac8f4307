/**
 * Writing and reading a table's manifests: the run's data manifest, any manifest of entries
 * (`writeManifest`, also for a current table's rewrites and delete files), and the manifests a
 * snapshot names.
 */
import { ExporterError } from '../errors.js';
import type { Storage } from '../storage/storage.js';
import {
  CONTENT,
  type DataFile,
  decodeManifestList,
  encodeManifest,
  type FieldSummary,
  type ManifestEntry,
  type ManifestFile,
  STATUS,
} from './avro.js';
import type { IcebergCatalog } from './catalog.js';
import { stringifyJson } from './json.js';
import { keyOfLocation, locationOfKey, metadataPrefix, sameId } from './locations.js';
import { type IcebergTableName, partitionSpec, SCHEMA_ID } from './schema.js';
import { boundsUnder, currentSchemaOf } from './schema-evolution.js';
import type { PartitionSpec, TableMetadata } from './types.js';

/** One data file of the run, as published. */
export interface CommitFile {
  /** Storage key of the file (under the table's `data/`). */
  key: string;
  dt: string;
  /** Metrics from its footer (`metrics.ts`). */
  metrics: Pick<
    DataFile,
    'record_count' | 'column_sizes' | 'value_counts' | 'null_value_counts' | 'lower_bounds' | 'upper_bounds'
  >;
  bytes: number;
}

/** Summary of the `dt` values of a manifest's files, for the manifest list's partition field. */
function partitionSummary(dts: readonly string[]): FieldSummary[] {
  const sorted = [...dts].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return [
    {
      contains_null: false,
      contains_nan: false,
      lower_bound: Buffer.from(sorted[0]!, 'utf8'),
      upper_bound: Buffer.from(sorted[sorted.length - 1]!, 'utf8'),
    },
  ];
}

/** A new file's manifest entry: added by `snapshotId`, its sequence numbers inherited. */
export function addedEntry(
  storage: Storage,
  snapshotId: number,
  file: Pick<CommitFile, 'key' | 'dt' | 'bytes' | 'metrics'> & {
    content: number;
    sortOrderId: number | null;
  },
): ManifestEntry {
  return {
    status: STATUS.ADDED,
    snapshot_id: snapshotId,
    sequence_number: null,
    file_sequence_number: null,
    data_file: {
      content: file.content,
      file_path: locationOfKey(storage, file.key),
      file_format: 'PARQUET',
      partition: { dt: file.dt },
      record_count: file.metrics.record_count,
      file_size_in_bytes: file.bytes,
      column_sizes: file.metrics.column_sizes,
      value_counts: file.metrics.value_counts,
      null_value_counts: file.metrics.null_value_counts,
      nan_value_counts: null,
      lower_bounds: file.metrics.lower_bounds,
      upper_bounds: file.metrics.upper_bounds,
      key_metadata: null,
      split_offsets: null,
      equality_ids: null,
      sort_order_id: file.sortOrderId,
    },
  };
}

/** The header of a manifest of `table` written on `metadata`: its current schema, as the spec asks. */
export const headerOf = (table: IcebergTableName, metadata: TableMetadata, content: 'data' | 'deletes') => {
  const spec = defaultSpecOf(table, metadata);
  return {
    schema: stringifyJson(currentSchemaOf(metadata)),
    schemaId: metadata['current-schema-id'],
    partitionSpec: stringifyJson(spec.fields),
    partitionSpecId: spec['spec-id'],
    content,
  };
};

/**
 * The partition spec the commit writes under: the table's default spec, as the table holds it
 * (the commit builds only on a spec equal to the exporter's by meaning, `sameSpec`, whose id and
 * field names another engine may have changed); the exporter's own before the table has one.
 */
export function defaultSpecOf(table: IcebergTableName, metadata: TableMetadata): PartitionSpec {
  return (
    metadata['partition-specs'].find((s) => s['spec-id'] === metadata['default-spec-id']) ??
    partitionSpec(table)
  );
}

/**
 * Writes a manifest of `entries` at `key`, its header the current schema of `metadata` (the
 * commit's base), and returns its manifest-list entry. ADDED entries without sequence numbers
 * inherit `sequenceNumber`; `min_sequence_number` is the lowest data sequence number of the
 * live entries.
 */
export async function writeManifest(
  storage: Storage,
  key: string,
  table: IcebergTableName,
  metadata: TableMetadata,
  entries: readonly ManifestEntry[],
  added: { snapshotId: number; sequenceNumber: number; content: number },
): Promise<ManifestFile> {
  const bytes = await encodeManifest(
    entries,
    headerOf(table, metadata, added.content === CONTENT.DATA ? 'data' : 'deletes'),
  );
  await storage.put(key, bytes);
  const count = (status: number) => entries.filter((e) => e.status === status);
  const rows = (list: readonly ManifestEntry[]) =>
    list.reduce((n, e) => n + Number(e.data_file.record_count), 0);
  const live = entries.filter((e) => e.status !== STATUS.DELETED);
  const sequences = live.map((e) => Number(e.sequence_number ?? added.sequenceNumber));
  return {
    manifest_path: locationOfKey(storage, key),
    manifest_length: bytes.length,
    partition_spec_id: defaultSpecOf(table, metadata)['spec-id'],
    content: added.content,
    sequence_number: added.sequenceNumber,
    min_sequence_number: sequences.length > 0 ? Math.min(...sequences) : added.sequenceNumber,
    added_snapshot_id: added.snapshotId,
    added_files_count: count(STATUS.ADDED).length,
    existing_files_count: count(STATUS.EXISTING).length,
    deleted_files_count: count(STATUS.DELETED).length,
    added_rows_count: rows(count(STATUS.ADDED)),
    existing_rows_count: rows(count(STATUS.EXISTING)),
    deleted_rows_count: rows(count(STATUS.DELETED)),
    partitions: partitionSummary(entries.map((e) => e.data_file.partition.dt ?? '')),
    key_metadata: null,
  };
}

/**
 * Writes the run's data manifest on `metadata` (deterministic name and bytes for a base's schema:
 * a rebase onto another schema writes another file) and returns its list entry, sequence
 * numbers unset.
 */
export async function writeDataManifest(
  storage: Storage,
  catalog: IcebergCatalog,
  request: { table: IcebergTableName; runId: string; files: readonly CommitFile[] },
  snapshotId: number,
  metadata: TableMetadata,
): Promise<Omit<ManifestFile, 'sequence_number' | 'min_sequence_number'> | undefined> {
  if (request.files.length === 0) return undefined;
  const schema = currentSchemaOf(metadata);
  const entries = request.files.map((f) => {
    const entry = addedEntry(storage, snapshotId, { ...f, content: CONTENT.DATA, sortOrderId: 0 });
    // A column another engine promoted (int→long): bounds in the table's type (schema-evolution.ts).
    entry.data_file.lower_bounds = boundsUnder(schema, entry.data_file.lower_bounds);
    entry.data_file.upper_bounds = boundsUnder(schema, entry.data_file.upper_bounds);
    return entry;
  });
  const schemaId = metadata['current-schema-id'];
  const suffix = schemaId === SCHEMA_ID ? 'm0' : `m0-s${schemaId}`;
  const key = `${metadataPrefix(storage, catalog, request.table)}${request.runId}-${snapshotId}-${suffix}.avro`;
  // The sequence number is unused here: every entry is ADDED and inherits it from the list.
  const {
    sequence_number: _s,
    min_sequence_number: _m,
    ...file
  } = await writeManifest(storage, key, request.table, metadata, entries, {
    snapshotId,
    sequenceNumber: 0,
    content: CONTENT.DATA,
  });
  return file;
}

/** The manifests of the current snapshot of `metadata` (none for a table without one). */
export async function currentManifests(storage: Storage, metadata: TableMetadata): Promise<ManifestFile[]> {
  const current = metadata['current-snapshot-id'];
  if (current === undefined || current === null || BigInt(current) === -1n) return [];
  const snapshot = metadata.snapshots?.find((s) => sameId(s['snapshot-id'], current));
  if (!snapshot)
    throw new ExporterError(`Iceberg metadata names current snapshot ${current} but does not hold it`);
  const found = await storage.get(keyOfLocation(storage, snapshot['manifest-list']));
  if (!found)
    throw new ExporterError(`Iceberg manifest list ${snapshot['manifest-list']} is missing`, {
      retryable: true,
    });
  return decodeManifestList(found.body);
}
