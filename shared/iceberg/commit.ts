/**
 * A run's commit to one Iceberg table: one snapshot that adds the run's data files, swapped in
 * through the catalog with optimistic concurrency. The publish step of the run lifecycle, so it
 * keeps the lifecycle's rules:
 *
 * - Idempotent. The snapshot id is derived from the run id and the table, and the data
 *   manifest's bytes from the files alone: a commit done again (a second finisher, the next run
 *   after a crash, a retry after a lost answer) first loads the table, finds its snapshot and
 *   changes nothing.
 * - A lost race rebases. Appends commute: the loser loads the new current metadata and builds
 *   its snapshot again on top of it (new parent, next sequence number, the current manifests
 *   plus its own), until it wins or finds its snapshot there.
 * - Nothing is visible before the swap: manifests and manifest lists are new files that no
 *   metadata names until the catalog's pointer moves; a loser's manifest list stays unreferenced
 *   (the orphan-file step removes it).
 *
 * Snapshots older than the table's `history.expire.max-snapshot-age-ms` are expired at each
 * commit (at least `history.expire.min-snapshots-to-keep` kept), and the metadata log holds at
 * most `write.metadata.previous-versions-max` entries; files only they named are deleted after
 * the swap (see `maintenance.ts`).
 */
import { createHash } from 'node:crypto';
import { ExporterError } from '../errors.js';
import { STATE_KEYS } from '../export/layout.js';
import type { SchemaContract } from '../export/tables.js';
import type { Storage } from '../storage/storage.js';
import {
  CONTENT,
  type DataFile,
  decodeManifest,
  decodeManifestList,
  encodeManifest,
  encodeManifestList,
  type FieldSummary,
  type Long,
  type ManifestEntry,
  type ManifestFile,
  STATUS,
} from './avro.js';
import type { CatalogTable, IcebergCatalog } from './catalog.js';
import { parseJson, stringifyJson } from './json.js';
import { mergeManifests } from './merge.js';
import {
  type IcebergTableName,
  icebergSchema,
  lastColumnId,
  partitionSpec,
  SCHEMA_ID,
  SPEC_ID,
  TABLE_PROPERTIES,
} from './schema.js';
import { currentSchemaOf, sameFields, sameSpec, schemaFor, withSchema } from './schema-evolution.js';
import type { IcebergSchema, Snapshot, TableMetadata } from './types.js';

/** Attempts of one commit before it gives up (each one lost a race to another writer). */
export const MAX_COMMIT_ATTEMPTS = 10;

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

export interface CommitRequest {
  table: IcebergTableName;
  runId: string;
  files: readonly CommitFile[];
  /** Extra snapshot summary properties (the run's counts). */
  summary?: Readonly<Record<string, string>>;
  /**
   * The schema contract the run's files were written with (`icebergParquetTable`); absent:
   * `freeze`, as a run whose records predate the option (`schemaContractOf`). The table's
   * schema evolves to take them (`schema-evolution.ts`).
   */
  contract?: SchemaContract;
  now: Date;
  /**
   * What the commit changes in the table besides adding `files` (a current table's deletes,
   * `current.ts`). Called at every attempt with that attempt's base: deletes do not commute,
   * so a lost race computes them again. Absent: the base's manifests are carried as they are.
   */
  changeBase?: (base: BaseContext) => Promise<BaseChange>;
}

/** What {@link CommitRequest.changeBase} is given: the attempt's base and the snapshot it builds. */
export interface BaseContext {
  table: IcebergTableName;
  runId: string;
  metadata: TableMetadata;
  /** The base's current manifests. */
  manifests: readonly ManifestFile[];
  snapshotId: number;
  sequenceNumber: number;
}

/** Counts of what a {@link BaseChange} removed and added, for the snapshot summary. */
export interface ChangeCounts {
  removedDataFiles: number;
  removedRecords: number;
  removedDataSize: number;
  addedDeleteFiles: number;
  addedPositionDeletes: number;
  addedDeleteSize: number;
  removedDeleteFiles: number;
  removedPositionDeletes: number;
  removedDeleteSize: number;
}

/** The manifests the new snapshot carries instead of the base's (the run's data manifest is added to them). */
export interface BaseChange {
  manifests: ManifestFile[];
  counts: ChangeCounts;
}

export interface CommitOutcome {
  table: IcebergTableName;
  snapshotId: number;
  metadataLocation: string;
  /** False when the snapshot was already there (an earlier attempt of the same run made it). */
  committedNow: boolean;
}

/** The snapshot id of a run's commit to a table: 52 bits of a hash, a positive safe integer. */
export function snapshotIdOf(runId: string, table: string): number {
  const digest = createHash('sha256').update(`${table}\0${runId}`).digest();
  return Number(digest.readBigUInt64BE() >> 12n) || 1;
}

/** The key (relative to the storage root) of an absolute location under it. */
export function keyOfLocation(storage: Storage, location: string): string {
  const root = `${storage.location}/`;
  if (!location.startsWith(root)) {
    throw new ExporterError(`Iceberg file ${location} is outside the output ${storage.location}`);
  }
  return location.slice(root.length);
}

export const locationOfKey = (storage: Storage, key: string): string => `${storage.location}/${key}`;

/** A table's `metadata/` key prefix, from its location. */
export const metadataPrefix = (storage: Storage, catalog: IcebergCatalog, table: string) =>
  `${keyOfLocation(storage, catalog.tableLocation(table))}/metadata/`;

const sameId = (a: Long | null | undefined, b: Long | null | undefined) =>
  a !== undefined && a !== null && b !== undefined && b !== null && BigInt(a) === BigInt(b);

/** A deterministic UUID (v4 layout) from a name, for a new table's `table-uuid`. */
function uuidOf(name: string): string {
  const h = createHash('sha256').update(name).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * The metadata a commit builds on. A table holding snapshots: its own metadata, its schema
 * evolved when the run's files (`written`) need it (`schema-evolution.ts`); one of another
 * partition spec is not ours to write. A table without snapshots: its own metadata when it has
 * the exporter's spec and `written`'s schema, otherwise (no metadata yet, or Glue's initial
 * metadata made from the stack's columns, with ids of its own choosing) fresh metadata with
 * `written`'s schema (schema id 0), keeping the table's uuid and history.
 */
function baseMetadata(
  table: IcebergTableName,
  location: string,
  base: CatalogTable,
  written: IcebergSchema,
  now: Date,
): TableMetadata {
  const found = base.metadata;
  const spec = found?.['partition-specs'].find((s) => s['spec-id'] === found['default-spec-id']);
  const ownSpec = spec !== undefined && sameSpec(spec, partitionSpec(table));
  if (found && (found.snapshots?.length ?? 0) > 0) {
    if (!ownSpec) {
      throw new ExporterError(
        `the Iceberg table ${table} (${base.metadataLocation}) holds snapshots with another schema or partition spec: ` +
          'the exporter writes only tables of its own layout; drop the table or point the export elsewhere',
      );
    }
    return withSchema(found, schemaFor(table, found, written));
  }
  const schema = found?.schemas.find((s) => s['schema-id'] === found['current-schema-id']);
  if (found && ownSpec && schema && sameFields(schema, written)) return found;
  return {
    'format-version': 2,
    'table-uuid': found?.['table-uuid'] ?? uuidOf(location),
    location,
    'last-sequence-number': found?.['last-sequence-number'] ?? 0,
    'last-updated-ms': now.getTime(),
    'last-column-id': lastColumnId(written),
    'current-schema-id': SCHEMA_ID,
    schemas: [written],
    'default-spec-id': SPEC_ID,
    'partition-specs': [partitionSpec(table)],
    'last-partition-id': Math.max(...partitionSpec(table).fields.map((f) => f['field-id'])),
    'default-sort-order-id': 0,
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    properties: { ...(found?.properties ?? {}), ...TABLE_PROPERTIES },
    'current-snapshot-id': null,
    snapshots: [],
    'snapshot-log': [],
    'metadata-log': found?.['metadata-log'] ?? [],
    refs: {},
  };
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

/** A data file's manifest entry: added by `snapshotId`, its sequence number inherited. */
function dataEntry(storage: Storage, snapshotId: number, file: CommitFile): ManifestEntry {
  return {
    status: STATUS.ADDED,
    snapshot_id: snapshotId,
    sequence_number: null,
    file_sequence_number: null,
    data_file: {
      content: CONTENT.DATA,
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
      sort_order_id: 0,
    },
  };
}

/** The header of a manifest of `table` written on `metadata`: its current schema, as the spec asks. */
const headerOf = (table: IcebergTableName, metadata: TableMetadata, content: 'data' | 'deletes') => ({
  schema: stringifyJson(currentSchemaOf(metadata)),
  schemaId: metadata['current-schema-id'],
  partitionSpec: stringifyJson(partitionSpec(table).fields),
  partitionSpecId: SPEC_ID,
  content,
});

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
    partition_spec_id: SPEC_ID,
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
async function writeDataManifest(
  storage: Storage,
  catalog: IcebergCatalog,
  request: CommitRequest,
  snapshotId: number,
  metadata: TableMetadata,
): Promise<Omit<ManifestFile, 'sequence_number' | 'min_sequence_number'> | undefined> {
  if (request.files.length === 0) return undefined;
  const entries = request.files.map((f) => dataEntry(storage, snapshotId, f));
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

const num = (v: string | undefined) => Number(v ?? 0);

/** No change to the base: an append. */
export const NO_CHANGE: ChangeCounts = {
  removedDataFiles: 0,
  removedRecords: 0,
  removedDataSize: 0,
  addedDeleteFiles: 0,
  addedPositionDeletes: 0,
  addedDeleteSize: 0,
  removedDeleteFiles: 0,
  removedPositionDeletes: 0,
  removedDeleteSize: 0,
};

/**
 * The snapshot summary (the spec's "Snapshot summary" keys), totals carried from the parent:
 * `append` when nothing was removed or deleted, `overwrite` otherwise.
 */
function summaryOf(
  parent: Snapshot | undefined,
  request: CommitRequest,
  change: ChangeCounts,
): Snapshot['summary'] {
  const added = request.files.length;
  const records = request.files.reduce((n, f) => n + Number(f.metrics.record_count), 0);
  const size = request.files.reduce((n, f) => n + f.bytes, 0);
  const p = parent?.summary ?? { operation: 'append' };
  const changed =
    change.removedDataFiles +
      change.addedDeleteFiles +
      change.removedDeleteFiles +
      change.addedPositionDeletes >
    0;
  return {
    operation: changed ? 'overwrite' : 'append',
    'run-id': request.runId,
    'added-data-files': String(added),
    'added-records': String(records),
    'added-files-size': String(size + change.addedDeleteSize),
    'changed-partition-count': String(new Set(request.files.map((f) => f.dt)).size),
    ...(changed && {
      'deleted-data-files': String(change.removedDataFiles),
      'deleted-records': String(change.removedRecords),
      'removed-files-size': String(change.removedDataSize + change.removedDeleteSize),
      'added-delete-files': String(change.addedDeleteFiles),
      'added-position-delete-files': String(change.addedDeleteFiles),
      'added-position-deletes': String(change.addedPositionDeletes),
      'removed-delete-files': String(change.removedDeleteFiles),
      'removed-position-delete-files': String(change.removedDeleteFiles),
      'removed-position-deletes': String(change.removedPositionDeletes),
    }),
    'total-data-files': String(num(p['total-data-files']) + added - change.removedDataFiles),
    'total-records': String(num(p['total-records']) + records - change.removedRecords),
    'total-files-size': String(
      num(p['total-files-size']) +
        size +
        change.addedDeleteSize -
        change.removedDataSize -
        change.removedDeleteSize,
    ),
    'total-delete-files': String(
      num(p['total-delete-files']) + change.addedDeleteFiles - change.removedDeleteFiles,
    ),
    'total-position-deletes': String(
      num(p['total-position-deletes']) + change.addedPositionDeletes - change.removedPositionDeletes,
    ),
    'total-equality-deletes': p['total-equality-deletes'] ?? '0',
    ...request.summary,
  };
}

/**
 * The next metadata: `base` with the new snapshot current, expired snapshots dropped and the
 * metadata log bounded. Returns the manifest lists of the snapshots it expired.
 */
function nextMetadata(
  base: TableMetadata,
  baseLocation: string | undefined,
  snapshot: Snapshot,
  now: number,
): { metadata: TableMetadata; expired: Snapshot[]; droppedMetadata: string[] } {
  const props = base.properties ?? {};
  const maxAge = Number(props['history.expire.max-snapshot-age-ms'] ?? DEFAULT_MAX_SNAPSHOT_AGE_MS);
  const minKeep = Math.max(1, Number(props['history.expire.min-snapshots-to-keep'] ?? 1));
  const previousMax = Math.max(0, Number(props['write.metadata.previous-versions-max'] ?? 100));
  const all = [...(base.snapshots ?? []), snapshot];
  // Newest first: keep the newest `minKeep`, and every one younger than the maximum age.
  const byAge = [...all].sort((a, b) => b['timestamp-ms'] - a['timestamp-ms']);
  const keep = new Set(
    byAge
      .filter((s, i) => i < minKeep || now - s['timestamp-ms'] <= maxAge)
      .map((s) => BigInt(s['snapshot-id'])),
  );
  keep.add(BigInt(snapshot['snapshot-id']));
  const kept = all.filter((s) => keep.has(BigInt(s['snapshot-id'])));
  const expired = all.filter((s) => !keep.has(BigInt(s['snapshot-id'])));
  const log = [
    ...(base['metadata-log'] ?? []),
    ...(baseLocation ? [{ 'timestamp-ms': base['last-updated-ms'], 'metadata-file': baseLocation }] : []),
  ];
  const droppedMetadata = log.slice(0, Math.max(0, log.length - previousMax)).map((e) => e['metadata-file']);
  return {
    metadata: {
      ...base,
      'last-sequence-number': snapshot['sequence-number'],
      'last-updated-ms': snapshot['timestamp-ms'],
      'current-snapshot-id': snapshot['snapshot-id'],
      snapshots: kept,
      'snapshot-log': [
        ...(base['snapshot-log'] ?? []).filter((e) => keep.has(BigInt(e['snapshot-id']))),
        { 'timestamp-ms': snapshot['timestamp-ms'], 'snapshot-id': snapshot['snapshot-id'] },
      ],
      'metadata-log': log.slice(log.length - Math.min(log.length, previousMax)),
      refs: { ...(base.refs ?? {}), main: { 'snapshot-id': snapshot['snapshot-id'], type: 'branch' } },
    },
    expired,
    droppedMetadata,
  };
}

/** Snapshots are kept 7 days by default (Iceberg's own default is 5): time travel over a week of runs. */
export const DEFAULT_MAX_SNAPSHOT_AGE_MS = 7 * 24 * 3_600_000;

/**
 * Commits a run's files to one table: its snapshot, or nothing when the snapshot is already
 * there. Throws a retryable error after {@link MAX_COMMIT_ATTEMPTS} lost races.
 */
export async function commitRun(
  storage: Storage,
  catalog: IcebergCatalog,
  request: CommitRequest,
): Promise<CommitOutcome> {
  const snapshotId = snapshotIdOf(request.runId, request.table);
  const location = catalog.tableLocation(request.table);
  const written = icebergSchema(request.table, request.contract ?? 'freeze');
  // The run's data manifest, written once per schema of the bases it is committed on.
  let ours: { schemaId: number; file: Awaited<ReturnType<typeof writeDataManifest>> } | undefined;
  for (let attempt = 1; attempt <= MAX_COMMIT_ATTEMPTS; attempt++) {
    const loaded = await catalog.load(request.table);
    const base = await adoptLostPointer(storage, request.table, loaded);
    if (base !== loaded && base.metadata?.snapshots?.some((s) => sameId(s['snapshot-id'], snapshotId))) {
      // Committed before the pointer was lost: point the catalog at it again, nothing more.
      const result = await catalog.commit(loaded, base.metadata);
      if (!result.committed) continue;
      await keepPointer(storage, request.table, result.metadataLocation);
      return {
        table: request.table,
        snapshotId,
        metadataLocation: result.metadataLocation,
        committedNow: false,
      };
    }
    if (base.metadata?.snapshots?.some((s) => sameId(s['snapshot-id'], snapshotId))) {
      return {
        table: request.table,
        snapshotId,
        metadataLocation: base.metadataLocation!,
        committedNow: false,
      };
    }
    const metadata = baseMetadata(request.table, location, base, written, request.now);
    if (ours?.schemaId !== metadata['current-schema-id']) {
      ours = {
        schemaId: metadata['current-schema-id'],
        file: await writeDataManifest(storage, catalog, request, snapshotId, metadata),
      };
    }
    const sequence = metadata['last-sequence-number'] + 1;
    const parentId = metadata['current-snapshot-id'];
    const parent = metadata.snapshots?.find((s) => sameId(s['snapshot-id'], parentId));
    const baseManifests = await currentManifests(storage, metadata);
    const change = request.changeBase
      ? await request.changeBase({
          table: request.table,
          runId: request.runId,
          metadata,
          manifests: baseManifests,
          snapshotId,
          sequenceNumber: sequence,
        })
      : { manifests: baseManifests, counts: NO_CHANGE };
    const carried = await mergeManifests(
      {
        storage,
        keyOf: (location) => keyOfLocation(storage, location),
        locationOf: (key) => locationOfKey(storage, key),
        metadataPrefix: metadataPrefix(storage, catalog, request.table),
        header: headerOf(request.table, metadata, 'data'),
        snapshotId,
        sequenceNumber: sequence,
        minCountToMerge: metadata.properties?.['commit.manifest.min-count-to-merge'],
      },
      change.manifests,
    );
    const manifests = [
      ...carried,
      ...(ours.file ? [{ ...ours.file, sequence_number: sequence, min_sequence_number: sequence }] : []),
    ];
    const listBytes = await encodeManifestList(manifests, {
      snapshotId,
      parentSnapshotId: parent?.['snapshot-id'],
      sequenceNumber: sequence,
    });
    const digest = createHash('sha256').update(listBytes).digest('hex').slice(0, 12);
    const listKey = `${metadataPrefix(storage, catalog, request.table)}snap-${snapshotId}-${sequence}-${digest}.avro`;
    await storage.put(listKey, listBytes);
    // Snapshot times never go back, whatever this machine's clock says.
    const timestamp = Math.max(request.now.getTime(), metadata['last-updated-ms'] + 1);
    const snapshot: Snapshot = {
      'snapshot-id': snapshotId,
      ...(parent && { 'parent-snapshot-id': parent['snapshot-id'] }),
      'sequence-number': sequence,
      'timestamp-ms': timestamp,
      'manifest-list': locationOfKey(storage, listKey),
      summary: summaryOf(parent, request, change.counts),
      'schema-id': metadata['current-schema-id'],
    };
    const next = nextMetadata(metadata, base.metadataLocation, snapshot, timestamp);
    const result = await catalog.commit(base, next.metadata);
    if (result.committed) {
      await keepPointer(storage, request.table, result.metadataLocation);
      await removeUnreferenced(storage, next.metadata, manifests, next.expired, next.droppedMetadata);
      return {
        table: request.table,
        snapshotId,
        metadataLocation: result.metadataLocation,
        committedNow: true,
      };
    }
  }
  throw new ExporterError(
    `the Iceberg commit of run ${request.runId} to ${request.table} lost ${MAX_COMMIT_ATTEMPTS} races in a row to other writers; it is retried`,
    { retryable: true },
  );
}

/** Keys of locations under the storage root; others (not ours to delete) are left out. */
function keysOf(storage: Storage, locations: Iterable<string>): string[] {
  return [...locations].flatMap((location) => {
    try {
      return [keyOfLocation(storage, location)];
    } catch {
      return [];
    }
  });
}

/**
 * After a swap: deletes what no kept snapshot references any more. Snapshots only ever expire
 * oldest first, and a table's history is one line, so "no kept snapshot" means "not the
 * oldest kept one, nor anything after it":
 * - the manifest lists of expired snapshots, and the metadata files that fell off the log;
 * - manifests named by an expired snapshot's list but not by the oldest kept snapshot's list
 *   (a manifest, once replaced by a rewrite, never comes back);
 * - data and delete files removed by a snapshot that expired now: such a file has a DELETED
 *   entry, carrying the removing snapshot's id, in the current manifests (a rewrite carries
 *   DELETED entries over while their snapshot is kept, see `current.ts`); every snapshot that
 *   still read the file is older than the one that removed it, so it expired too.
 * Best effort: a file left behind is an orphan, which costs storage only. History tables never
 * rewrite a manifest nor remove a file, so for them only the first point applies.
 */
async function removeUnreferenced(
  storage: Storage,
  metadata: TableMetadata,
  manifests: readonly ManifestFile[],
  expired: readonly Snapshot[],
  metadataFiles: readonly string[],
) {
  const doomed = new Set<string>([...expired.map((s) => s['manifest-list']), ...metadataFiles]);
  try {
    if (expired.length > 0) {
      const oldest = [...(metadata.snapshots ?? [])].sort(
        (a, b) => a['sequence-number'] - b['sequence-number'],
      )[0];
      const keptManifests = new Set(
        (oldest ? await manifestsOf(storage, oldest) : []).map((m) => m.manifest_path),
      );
      for (const manifest of manifests) keptManifests.add(manifest.manifest_path);
      for (const snapshot of expired) {
        for (const m of await manifestsOf(storage, snapshot)) {
          if (!keptManifests.has(m.manifest_path)) doomed.add(m.manifest_path);
        }
      }
      const gone = new Set(expired.map((s) => BigInt(s['snapshot-id'])));
      for (const manifest of manifests.filter((m) => m.deleted_files_count > 0)) {
        const found = await storage.get(keyOfLocation(storage, manifest.manifest_path));
        for (const entry of found ? await decodeManifest(found.body) : []) {
          if (
            entry.status === STATUS.DELETED &&
            entry.snapshot_id !== null &&
            gone.has(BigInt(entry.snapshot_id))
          )
            doomed.add(entry.data_file.file_path);
        }
      }
    }
  } catch {
    // Reading what to delete failed: delete the rest; the others stay as orphans.
  }
  const keys = keysOf(storage, doomed);
  if (keys.length > 0) await storage.delete(keys).catch(() => undefined);
}

/** The manifests a snapshot's list names; none when the list cannot be read. */
async function manifestsOf(storage: Storage, snapshot: Snapshot): Promise<ManifestFile[]> {
  const found = await storage.get(keyOfLocation(storage, snapshot['manifest-list'])).catch(() => undefined);
  return found ? decodeManifestList(found.body) : [];
}

/**
 * Records the metadata file a commit made current (`state/iceberg/<table>.json`), best effort:
 * it is only read when the catalog has lost its pointer.
 */
async function keepPointer(storage: Storage, table: string, metadataLocation: string): Promise<void> {
  await storage
    .put(STATE_KEYS.icebergPointer(table), `${JSON.stringify({ metadata_location: metadataLocation })}\n`)
    .catch(() => undefined);
}

/**
 * The table to build on: as loaded, unless the catalog lost its pointer — no metadata, or
 * metadata without a snapshot — while the exporter had committed snapshots (a CloudFormation
 * update of a Glue Iceberg table rewrites its parameters and drops `metadata_location`; Glue
 * then knows no metadata, or its own fresh one). Then the last metadata the exporter committed
 * is the base, and the catalog's own version is kept for the swap, so the table's history,
 * snapshots and files stay whole instead of starting again from nothing.
 */
async function adoptLostPointer(
  storage: Storage,
  table: string,
  loaded: CatalogTable,
): Promise<CatalogTable> {
  if ((loaded.metadata?.snapshots?.length ?? 0) > 0) return loaded;
  const record = await storage.get(STATE_KEYS.icebergPointer(table));
  if (!record) return loaded;
  const { metadata_location: location } = JSON.parse(Buffer.from(record.body).toString('utf8')) as {
    metadata_location: string;
  };
  if (location === loaded.metadataLocation) return loaded;
  const found = await storage.get(keyOfLocation(storage, location));
  if (!found) return loaded;
  const metadata = parseJson(Buffer.from(found.body).toString('utf8')) as TableMetadata;
  if ((metadata.snapshots?.length ?? 0) === 0) return loaded;
  return { ...loaded, metadata };
}
