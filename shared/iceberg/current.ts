/**
 * The current tables (`<report table>_current`): the newest report of each job. A run's commit
 * to one adds the run's data files (copies of its history files) and supersedes every older row
 * of the jobs whose report the run exported (the job ids of its `reports` files, for all six
 * tables: a new report with fewer sections, or none, must still lose the old ones).
 *
 * Superseded rows are removed with Iceberg v2 position deletes: per partition of the files they
 * sit in, one delete file listing (file_path, pos), sorted. A data file whose rows are all
 * deleted is removed instead (a DELETED entry in a rewritten manifest), and so is a delete file
 * that points only at removed files. Readers skip deleted rows; equality deletes are not used
 * (not every engine reads them). BENCHMARKS.md ("iceberg-current") has the measurements behind
 * this choice.
 */
import { zstdDecompressSync } from 'node:zlib';
import { parquetReadObjects } from 'hyparquet';
import { icebergDataKey } from '../export/layout.js';
import { encodeParquet } from '../parquet/encode.js';
import type { ParquetTable } from '../parquet/schema.js';
import type { Storage } from '../storage/storage.js';
import { CONTENT, decodeManifest, type ManifestEntry, type ManifestFile, STATUS } from './avro.js';
import type { IcebergCatalog } from './catalog.js';
import {
  type BaseChange,
  type BaseContext,
  type ChangeCounts,
  keyOfLocation,
  locationOfKey,
  metadataPrefix,
  NO_CHANGE,
  writeManifest,
} from './commit.js';
import { dataFileMetrics } from './metrics.js';
import { baseTableOf, fieldId, type IcebergTableName, icebergParquetTable } from './schema.js';

/** The reserved field ids of a position delete file's columns (spec, "Position Delete Files"). */
export const DELETE_FILE_PATH_ID = 2147483546;
export const DELETE_POS_ID = 2147483545;

/** A position delete file's schema. */
export const POSITION_DELETES: ParquetTable = {
  name: 'position_deletes',
  columns: [
    { name: 'file_path', type: 'string', nullable: false, fieldId: DELETE_FILE_PATH_ID },
    { name: 'pos', type: 'bigint', nullable: false, fieldId: DELETE_POS_ID },
  ],
};

const compressors = {
  ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)),
};

/** How superseded rows leave a current table. `copy-on-write` is measured only (BENCHMARKS.md). */
export type SupersedeStrategy = 'position-deletes' | 'copy-on-write';

/** A manifest entry with what it inherits from its manifest filled in. */
function resolved(manifest: ManifestFile, entry: ManifestEntry): ManifestEntry {
  const inherits = entry.status === STATUS.ADDED;
  return {
    ...entry,
    snapshot_id: entry.snapshot_id ?? manifest.added_snapshot_id,
    sequence_number: entry.sequence_number ?? (inherits ? manifest.sequence_number : null),
    file_sequence_number: entry.file_sequence_number ?? (inherits ? manifest.sequence_number : null),
  };
}

async function readObject(storage: Storage, location: string): Promise<ArrayBuffer> {
  const found = await storage.get(keyOfLocation(storage, location));
  if (!found) throw new Error(`Iceberg file ${location} is missing`);
  const body = found.body;
  return body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
}

/** The (file_path, pos) rows of a position delete file. */
async function readDeletes(
  storage: Storage,
  location: string,
): Promise<{ file_path: string; pos: bigint }[]> {
  return (await parquetReadObjects({
    file: await readObject(storage, location),
    columns: ['file_path', 'pos'],
    compressors,
  })) as { file_path: string; pos: bigint }[];
}

/** True when the file's job_id bounds leave no room for any of `jobs` (ids sorted). */
function outsideBounds(entry: ManifestEntry, jobIdField: number, low: number, high: number): boolean {
  const bound = (m: ManifestEntry['data_file']['lower_bounds']) =>
    m?.find((kv) => kv.key === jobIdField)?.value;
  const lower = bound(entry.data_file.lower_bounds);
  const upper = bound(entry.data_file.upper_bounds);
  return (
    (upper !== undefined && upper.readBigInt64LE() < BigInt(low)) ||
    (lower !== undefined && lower.readBigInt64LE() > BigInt(high))
  );
}

/** A row as hyparquet reads it, made a row the encoder takes (longs as numbers). */
function encodable(row: Record<string, unknown>): Record<string, never> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) out[k] = typeof v === 'bigint' ? Number(v) : v;
  return out as Record<string, never>;
}

const entryOf = (
  storage: Storage,
  key: string,
  content: number,
  dt: string,
  bytes: Uint8Array,
  table: ParquetTable,
  snapshotId: number,
): ManifestEntry => ({
  status: STATUS.ADDED,
  snapshot_id: snapshotId,
  sequence_number: null,
  file_sequence_number: null,
  data_file: {
    content,
    file_path: locationOfKey(storage, key),
    file_format: 'PARQUET',
    partition: { dt },
    ...dataFileMetrics(bytes, table),
    file_size_in_bytes: bytes.length,
    nan_value_counts: null,
    key_metadata: null,
    split_offsets: null,
    equality_ids: null,
    sort_order_id: content === CONTENT.DATA ? 0 : null,
  },
});

/**
 * The `changeBase` of a current table's commit: removes the rows of `jobs` from the base's
 * live data files (see the module's summary).
 */
export function supersedeJobs(
  storage: Storage,
  catalog: IcebergCatalog,
  jobs: ReadonlySet<number>,
  strategy: SupersedeStrategy = 'position-deletes',
): (base: BaseContext) => Promise<BaseChange> {
  return async (ctx) => {
    const table = ctx.table;
    const sorted = [...jobs].sort((a, b) => a - b);
    const manifests = await Promise.all(
      ctx.manifests.map(async (m) => ({
        manifest: m,
        entries: (await decodeManifest(new Uint8Array(await readObject(storage, m.manifest_path)))).map((e) =>
          resolved(m, e),
        ),
      })),
    );
    const live = manifests.flatMap((m) => m.entries.filter((e) => e.status !== STATUS.DELETED));
    const dataFiles = live.filter((e) => e.data_file.content === CONTENT.DATA);
    const deleteFiles = live.filter((e) => e.data_file.content === CONTENT.POSITION_DELETES);
    if (sorted.length === 0) return { manifests: [...ctx.manifests], counts: NO_CHANGE };

    // Rows already deleted, per data file; the data files each delete file points at.
    const deleted = new Map<string, Set<bigint>>();
    const targets = new Map<string, Set<string>>();
    await Promise.all(
      deleteFiles.map(async (e) => {
        const own = new Set<string>();
        for (const row of await readDeletes(storage, e.data_file.file_path)) {
          own.add(row.file_path);
          const set = deleted.get(row.file_path) ?? new Set<bigint>();
          set.add(BigInt(row.pos));
          deleted.set(row.file_path, set);
        }
        targets.set(e.data_file.file_path, own);
      }),
    );

    const jobIdField = fieldId(baseTableOf(table), 'job_id');
    const parquet = icebergParquetTable(table);
    const removed = new Set<string>();
    const newDeletes = new Map<string, { file_path: string; pos: number }[]>();
    const rewritten: ManifestEntry[] = [];
    let rewriteIndex = 0;
    await Promise.all(
      dataFiles.map(async (e) => {
        const path = e.data_file.file_path;
        if (outsideBounds(e, jobIdField, sorted[0]!, sorted[sorted.length - 1]!)) return;
        const gone = deleted.get(path) ?? new Set<bigint>();
        const file = await readObject(storage, path);
        const rows = (await parquetReadObjects({
          file,
          ...(strategy === 'position-deletes' && { columns: ['job_id'] }),
          compressors,
        })) as Record<string, unknown>[];
        const hit: number[] = [];
        for (let pos = 0; pos < rows.length; pos++) {
          if (jobs.has(Number(rows[pos]!.job_id)) && !gone.has(BigInt(pos))) hit.push(pos);
        }
        if (hit.length === 0) return;
        if (gone.size + hit.length >= rows.length) {
          removed.add(path);
          return;
        }
        const dt = e.data_file.partition.dt ?? '';
        if (strategy === 'position-deletes') {
          const list = newDeletes.get(dt) ?? [];
          for (const pos of hit) list.push({ file_path: path, pos });
          newDeletes.set(dt, list);
          return;
        }
        const drop = new Set(hit);
        const kept = rows.filter((_, pos) => !drop.has(pos)).map(encodable);
        const bytes = encodeParquet(parquet, kept);
        const key = icebergDataKey(
          table,
          dt,
          `${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-cow-${rewriteIndex++}`,
        );
        await storage.put(key, bytes);
        removed.add(path);
        rewritten.push(entryOf(storage, key, CONTENT.DATA, dt, bytes, parquet, ctx.snapshotId));
      }),
    );
    // A delete file that points only at removed data files goes with them.
    const removedDeletes = new Set(
      deleteFiles
        .filter((e) => [...(targets.get(e.data_file.file_path) ?? [])].every((p) => removed.has(p)))
        .map((e) => e.data_file.file_path),
    );

    const counts: ChangeCounts = { ...NO_CHANGE };
    const added: ManifestEntry[] = [];
    for (const [dt, rows] of [...newDeletes].sort(([a], [b]) => (a < b ? -1 : 1))) {
      rows.sort((a, b) => (a.file_path < b.file_path ? -1 : a.file_path > b.file_path ? 1 : a.pos - b.pos));
      const bytes = encodeParquet(POSITION_DELETES, rows);
      const key = icebergDataKey(table, dt, `${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-deletes`);
      await storage.put(key, bytes);
      added.push(
        entryOf(storage, key, CONTENT.POSITION_DELETES, dt, bytes, POSITION_DELETES, ctx.snapshotId),
      );
      counts.addedDeleteFiles++;
      counts.addedPositionDeletes += rows.length;
      counts.addedDeleteSize += bytes.length;
    }

    // Manifests holding a removed file are rewritten: removed entries DELETED by this snapshot,
    // the others EXISTING, every sequence number explicit (only ADDED entries inherit).
    const kept = new Set((ctx.metadata.snapshots ?? []).map((s) => BigInt(s['snapshot-id'])));
    const prefix = metadataPrefix(storage, catalog, table);
    const out: ManifestFile[] = [];
    for (const [i, { manifest, entries }] of manifests.entries()) {
      const touched = entries.some(
        (e) =>
          e.status !== STATUS.DELETED &&
          (removed.has(e.data_file.file_path) || removedDeletes.has(e.data_file.file_path)),
      );
      if (!touched) {
        out.push(manifest);
        continue;
      }
      const next: ManifestEntry[] = [];
      for (const e of entries) {
        if (e.status === STATUS.DELETED) {
          // Kept while its snapshot is, so that its file is deleted when that snapshot expires.
          if (e.snapshot_id !== null && kept.has(BigInt(e.snapshot_id))) next.push(e);
          continue;
        }
        const path = e.data_file.file_path;
        const isData = e.data_file.content === CONTENT.DATA;
        if (removed.has(path) || removedDeletes.has(path)) {
          next.push({ ...e, status: STATUS.DELETED, snapshot_id: ctx.snapshotId });
          const rows = Number(e.data_file.record_count);
          const size = Number(e.data_file.file_size_in_bytes);
          if (isData) {
            counts.removedDataFiles++;
            counts.removedRecords += rows;
            counts.removedDataSize += size;
          } else {
            counts.removedDeleteFiles++;
            counts.removedPositionDeletes += rows;
            counts.removedDeleteSize += size;
          }
        } else {
          next.push({ ...e, status: STATUS.EXISTING });
        }
      }
      const key = `${prefix}${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-r${i}.avro`;
      out.push(
        await writeManifest(storage, key, table, next, {
          snapshotId: ctx.snapshotId,
          sequenceNumber: ctx.sequenceNumber,
          content: manifest.content,
        }),
      );
    }
    if (added.length > 0) {
      const key = `${prefix}${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-d.avro`;
      out.push(
        await writeManifest(storage, key, table, added, {
          snapshotId: ctx.snapshotId,
          sequenceNumber: ctx.sequenceNumber,
          content: CONTENT.POSITION_DELETES,
        }),
      );
    }
    if (rewritten.length > 0) {
      const key = `${prefix}${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-c.avro`;
      out.push(
        await writeManifest(storage, key, table, rewritten, {
          snapshotId: ctx.snapshotId,
          sequenceNumber: ctx.sequenceNumber,
          content: CONTENT.DATA,
        }),
      );
      for (const e of rewritten) {
        // A rewritten file is counted as removed above; its rows come back as an added file.
        counts.removedRecords -= Number(e.data_file.record_count);
        counts.removedDataSize -= Number(e.data_file.file_size_in_bytes);
        counts.removedDataFiles--;
      }
    }
    return { manifests: out.filter((m) => !isEmpty(m)), counts };
  };
}

/** A rewritten manifest left with no entries at all. */
const isEmpty = (m: ManifestFile) =>
  m.added_files_count + m.existing_files_count + m.deleted_files_count === 0;

/** The job ids of a run's `reports` data file. */
export async function jobIdsOf(body: Uint8Array): Promise<number[]> {
  const file = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
  const rows = (await parquetReadObjects({ file, columns: ['job_id'], compressors })) as { job_id: bigint }[];
  return rows.map((r) => Number(r.job_id));
}

export type { IcebergTableName };
