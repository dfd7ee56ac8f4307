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
 * Snapshots are expired at each commit as Java's `RemoveSnapshots` does: those no ref (a branch
 * within its retention, or a tag) keeps and older than the table's
 * `history.expire.max-snapshot-age-ms`; the metadata log holds at most
 * `write.metadata.previous-versions-max` entries; files only they named are deleted after the
 * swap (`maintenance.ts`). The parts live beside it: the base metadata (`base-metadata.ts`),
 * the manifests (`manifests.ts`), the snapshot summary (`summary.ts`), the upkeep
 * (`maintenance.ts`), locations (`locations.ts`).
 */
import { createHash } from 'node:crypto';
import { ExporterError } from '../errors.js';
import type { SchemaContract } from '../export/tables.js';
import type { Storage } from '../storage/storage.js';
import { encodeManifestList, type ManifestFile } from './avro.js';
import { adoptLostPointer, baseMetadata, keepPointer } from './base-metadata.js';
import type { IcebergCatalog } from './catalog.js';
import { keyOfLocation, locationOfKey, metadataPrefix, sameId } from './locations.js';
import { nextMetadata, removeUnreferenced } from './maintenance.js';
import { type CommitFile, currentManifests, headerOf, writeDataManifest } from './manifests.js';
import { mergeManifests } from './merge.js';
import { type IcebergTableName, icebergSchema } from './schema.js';
import { type ChangeCounts, NO_CHANGE, summaryOf } from './summary.js';
import type { Snapshot, TableMetadata } from './types.js';

/** Attempts of one commit before it gives up (each one lost a race to another writer). */
export const MAX_COMMIT_ATTEMPTS = 10;

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
