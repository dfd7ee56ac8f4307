/**
 * The current tables (`<report table>_current`): the newest report of each job still listed. A
 * run's commit to one adds the run's data files (copies of its history files) and supersedes
 * the older rows of every job the run exported (the job ids of its `reports` files, for all six
 * tables: a new report with fewer sections, or none, must still lose the old ones), of every
 * job whose report answered 404 in the run, and of every job of a campaign the run listed
 * completely that the listing no longer holds. The same deletions as the `*_latest` views
 * (`shared/export/views.ts` defines them); each table's rows are matched on its own
 * `job_id` and `campaign_id`, so that a commit taken up again after some tables were committed
 * computes the rest from their own bases.
 *
 * Superseded rows are removed with Iceberg v2 position deletes: per partition of the files they
 * sit in, one delete file listing (file_path, pos), sorted. A data file whose rows are all
 * deleted is removed instead (a DELETED entry in a rewritten manifest), and so is a delete file
 * that points only at removed files. Readers skip deleted rows; equality deletes are not used
 * (not every engine reads them). Copy-on-write (rewriting each touched file without the
 * superseded rows) was measured against this and dropped: at 100,000 jobs a 1% incremental run
 * rewrote every row of the table (BENCHMARKS.md, "iceberg-current").
 *
 * A position delete applies to data files of its partition with a data sequence number up to
 * its own; it names its files by path, and only older files (already in the base) are named, so
 * the run's own files, added at the same sequence number, are never touched by it.
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
  currentManifests,
  keyOfLocation,
  locationOfKey,
  metadataPrefix,
  NO_CHANGE,
  writeManifest,
} from './commit.js';
import { dataFileMetrics } from './metrics.js';
import { baseTableOf, fieldId, type IcebergTableName } from './schema.js';

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

/**
 * The rows a run supersedes in a current table: the rows of `jobs`, and the rows of a campaign
 * of `listings` whose job that listing does not hold.
 */
export interface SupersedeRule {
  /** Jobs whose older rows go: the jobs the run exported, and those whose report answered 404. */
  readonly jobs: ReadonlySet<number>;
  /** The job ids of each campaign the run listed completely (a campaign gone listed none). */
  readonly listings: ReadonlyMap<number, ReadonlySet<number>>;
}

/** True when the rule supersedes a row of (`job`, `campaign`). */
export const supersedes = (rule: SupersedeRule, job: number, campaign: number): boolean =>
  rule.jobs.has(job) || rule.listings.get(campaign)?.has(job) === false;

/** A file's bounds of a bigint column, as numbers (undefined when the file has none). */
function boundsOf(entry: ManifestEntry, field: number): { low?: bigint; high?: bigint } {
  const bound = (m: ManifestEntry['data_file']['lower_bounds']) =>
    m?.find((kv) => kv.key === field)?.value.readBigInt64LE();
  const low = bound(entry.data_file.lower_bounds);
  const high = bound(entry.data_file.upper_bounds);
  return { ...(low !== undefined && { low }), ...(high !== undefined && { high }) };
}

/** True when the file's bounds of `field` leave no room for any of the sorted `ids`. */
function outsideBounds(entry: ManifestEntry, field: number, ids: readonly number[]): boolean {
  if (ids.length === 0) return true;
  const { low, high } = boundsOf(entry, field);
  return (high !== undefined && high < BigInt(ids[0]!)) || (low !== undefined && low > BigInt(ids.at(-1)!));
}

/** The manifest entry of a new position delete file, added by `snapshotId`. */
const deleteEntry = (
  storage: Storage,
  key: string,
  dt: string,
  bytes: Uint8Array,
  snapshotId: number,
): ManifestEntry => ({
  status: STATUS.ADDED,
  snapshot_id: snapshotId,
  sequence_number: null,
  file_sequence_number: null,
  data_file: {
    content: CONTENT.POSITION_DELETES,
    file_path: locationOfKey(storage, key),
    file_format: 'PARQUET',
    partition: { dt },
    // With file_path's bounds, a reader skips the delete file for every other data file.
    ...dataFileMetrics(bytes, POSITION_DELETES),
    file_size_in_bytes: bytes.length,
    nan_value_counts: null,
    key_metadata: null,
    split_offsets: null,
    equality_ids: null,
    sort_order_id: null,
  },
});

/** Data files read at once: each is held whole in memory while its job ids are read. */
const READ_CONCURRENCY = 4;

/** Runs `task` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** What a rule finds in a table's live files: data files wholly superseded, and the rows of the others. */
interface Superseded {
  manifests: { manifest: ManifestFile; entries: ManifestEntry[] }[];
  deleteFiles: ManifestEntry[];
  /** The data files each delete file points at. */
  targets: Map<string, Set<string>>;
  /** Data files all of whose rows go. */
  removed: Set<string>;
  /** Per partition, the new (file_path, pos) rows to delete. */
  newDeletes: Map<string, { file_path: string; pos: number }[]>;
}

/** Reads the live files of `manifests` and finds the rows `rule` supersedes. */
async function findSuperseded(
  storage: Storage,
  table: IcebergTableName,
  baseManifests: readonly ManifestFile[],
  rule: SupersedeRule,
): Promise<Superseded> {
  const manifests = await Promise.all(
    baseManifests.map(async (m) => ({
      manifest: m,
      entries: (await decodeManifest(new Uint8Array(await readObject(storage, m.manifest_path)))).map((e) =>
        resolved(m, e),
      ),
    })),
  );
  const live = manifests.flatMap((m) => m.entries.filter((e) => e.status !== STATUS.DELETED));
  const dataFiles = live.filter((e) => e.data_file.content === CONTENT.DATA);
  const deleteFiles = live.filter((e) => e.data_file.content === CONTENT.POSITION_DELETES);
  const found: Superseded = {
    manifests,
    deleteFiles,
    targets: new Map(),
    removed: new Set(),
    newDeletes: new Map(),
  };
  const jobs = [...rule.jobs].sort((a, b) => a - b);
  const campaigns = [...rule.listings.keys()].sort((a, b) => a - b);
  if (jobs.length === 0 && campaigns.length === 0) return found;

  // Rows already deleted, per data file.
  const deleted = new Map<string, Set<bigint>>();
  await eachLimited(deleteFiles, READ_CONCURRENCY, async (e) => {
    const own = new Set<string>();
    for (const row of await readDeletes(storage, e.data_file.file_path)) {
      own.add(row.file_path);
      const set = deleted.get(row.file_path) ?? new Set<bigint>();
      set.add(BigInt(row.pos));
      deleted.set(row.file_path, set);
    }
    found.targets.set(e.data_file.file_path, own);
  });

  const base = baseTableOf(table);
  const jobIdField = fieldId(base, 'job_id');
  const campaignIdField = fieldId(base, 'campaign_id');
  await eachLimited(dataFiles, READ_CONCURRENCY, async (e) => {
    const path = e.data_file.file_path;
    if (outsideBounds(e, jobIdField, jobs) && outsideBounds(e, campaignIdField, campaigns)) return;
    const gone = deleted.get(path) ?? new Set<bigint>();
    const rows = (await parquetReadObjects({
      file: await readObject(storage, path),
      columns: ['job_id', 'campaign_id'],
      compressors,
    })) as { job_id: bigint; campaign_id: bigint }[];
    const hit: number[] = [];
    for (let pos = 0; pos < rows.length; pos++) {
      const row = rows[pos]!;
      if (!gone.has(BigInt(pos)) && supersedes(rule, Number(row.job_id), Number(row.campaign_id)))
        hit.push(pos);
    }
    if (hit.length === 0) return;
    if (gone.size + hit.length >= rows.length) {
      found.removed.add(path);
      return;
    }
    const dt = e.data_file.partition.dt ?? '';
    const list = found.newDeletes.get(dt) ?? [];
    for (const pos of hit) list.push({ file_path: path, pos });
    found.newDeletes.set(dt, list);
  });
  return found;
}

/**
 * True when `rule` supersedes any live row of `table`'s current snapshot: a run with nothing to
 * add to a current table commits to it only then.
 */
export async function anySuperseded(
  storage: Storage,
  catalog: IcebergCatalog,
  table: IcebergTableName,
  rule: SupersedeRule,
): Promise<boolean> {
  const { metadata } = await catalog.load(table);
  if (!metadata) return false;
  const found = await findSuperseded(storage, table, await currentManifests(storage, metadata), rule);
  return found.removed.size > 0 || found.newDeletes.size > 0;
}

/**
 * The `changeBase` of a current table's commit: removes the rows `rule` supersedes from the
 * base's live data files (see the module's summary).
 */
export function supersedeJobs(
  storage: Storage,
  catalog: IcebergCatalog,
  rule: SupersedeRule,
): (base: BaseContext) => Promise<BaseChange> {
  return async (ctx) => {
    const table = ctx.table;
    const { manifests, deleteFiles, targets, removed, newDeletes } = await findSuperseded(
      storage,
      table,
      ctx.manifests,
      rule,
    );
    if (removed.size === 0 && newDeletes.size === 0)
      return { manifests: [...ctx.manifests], counts: NO_CHANGE };
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
      added.push(deleteEntry(storage, key, dt, bytes, ctx.snapshotId));
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
    return { manifests: out.filter((m) => !isEmpty(m)), counts };
  };
}

/** A rewritten manifest left with no entries at all. */
const isEmpty = (m: ManifestFile) =>
  m.added_files_count + m.existing_files_count + m.deleted_files_count === 0;

/** The values of bigint `columns` in a Parquet file, row by row, as numbers. */
export async function idColumnsOf<C extends string>(
  body: Uint8Array,
  columns: readonly C[],
): Promise<Record<C, number>[]> {
  const file = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
  const rows = (await parquetReadObjects({ file, columns: [...columns], compressors })) as Record<
    C,
    bigint
  >[];
  return rows.map((r) => Object.fromEntries(columns.map((c) => [c, Number(r[c])])) as Record<C, number>);
}
