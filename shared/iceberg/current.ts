/**
 * The current tables (`<report table>_current`): the newest report of each job still listed. A
 * run's commit to one adds the run's data files (copies of its history files) and supersedes
 * the rows of older runs (by run id, as the `*_latest` views order runs, whatever order the runs
 * commit in: `SupersedeRule.runId`, decided per data file by its `run_id` bounds) of every job
 * the run exported (the job ids of its `reports` files, for all six
 * tables: a new report with fewer sections, or none, must still lose the old ones), of every
 * job whose report answered 404 in the run, and of every job of a campaign the run listed
 * completely that the listing no longer holds. The same deletions as the `*_latest` views
 * (`shared/export/views.ts` defines them); each table's rows are matched on its own
 * `job_id` and `campaign_id`, so that a commit taken up again after some tables were committed
 * computes the rest from their own bases. A run committing after newer runs (its closing taken
 * up late) also deletes, in the same snapshot, its own new rows of the jobs those runs superseded
 * (`OwnDeletes`, found by `shared/export/run/supersede-rule.ts`): a newer run's row is never
 * replaced by an older one, and a job a newer run deleted does not come back.
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
 * its own; it names its files by path: older files (already in the base) and, for a run
 * committing late only, the rows of its own files (added at the same sequence number) that newer
 * runs superseded; the run's other own rows are never named.
 *
 * Finding the superseded rows reads only what can hold them (`current-scan.ts`): data files by
 * their manifest bounds of `job_id` and `campaign_id`, row groups by their statistics, and of
 * those only the id column chunks, by byte range, one group at a time. Memory grows with the
 * run (its ids, its listings' job ids, 8 bytes each, and the positions it deletes), not with
 * the table; a late run's check against newer runs holds one newer run's rule at a time. The
 * data files are the run's
 * history files copied byte for byte, not sorted again by job id: publish writes reports in
 * unit order (a campaign's jobs together), so a row group already holds neighbouring ids, and
 * sorting a 256 MB file would need an external sort in finish-run's memory.
 */
import { icebergDataKey } from '../layout.js';
import { encodeParquet } from '../parquet/encode.js';
import type { ParquetTable } from '../parquet/schema.js';
import type { Storage } from '../storage/storage.js';
import { CONTENT, decodeManifest, type ManifestEntry, type ManifestFile, STATUS } from './avro.js';
import type { IcebergCatalog } from './catalog.js';
import type { BaseChange, BaseContext } from './commit.js';
import {
  columnsFor,
  manifestBounds,
  pathWithin,
  readDeleteFile,
  runsOlder,
  type SupersedeRule,
  scanDataFile,
  sortedRule,
} from './current-scan.js';
import { keyOfLocation, metadataPrefix } from './locations.js';
import { addedEntry, currentManifests, writeManifest } from './manifests.js';
import { dataFileMetrics } from './metrics.js';
import { baseTableOf, fieldId, type IcebergTableName } from './schema.js';
import { type ChangeCounts, NO_CHANGE } from './summary.js';

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

export { type SupersedeRule, supersedes } from './current-scan.js';

/**
 * The manifest entry of a new position delete file of `rows` (sorted), added by `snapshotId`.
 * Its `file_path` bounds are the whole first and last paths, as Java writes them: the footer's
 * are cut at 64 bytes, and a cut upper bound is no bound to a reader that compares it whole.
 */
function deleteEntry(
  storage: Storage,
  key: string,
  dt: string,
  bytes: Uint8Array,
  rows: readonly { file_path: string }[],
  snapshotId: number,
): ManifestEntry {
  const metrics = dataFileMetrics(bytes, POSITION_DELETES);
  const whole = (bounds: typeof metrics.lower_bounds, path: string) => [
    ...(bounds ?? []).filter((b) => b.key !== DELETE_FILE_PATH_ID),
    { key: DELETE_FILE_PATH_ID, value: Buffer.from(path, 'utf8') },
  ];
  // With file_path's bounds, a reader skips the delete file for every other data file.
  return addedEntry(storage, snapshotId, {
    content: CONTENT.POSITION_DELETES,
    key,
    dt,
    bytes: bytes.length,
    metrics: {
      ...metrics,
      lower_bounds: whole(metrics.lower_bounds, rows[0]!.file_path),
      upper_bounds: whole(metrics.upper_bounds, rows[rows.length - 1]!.file_path),
    },
    sortOrderId: null,
  });
}

/**
 * Data files scanned at once: each holds one row group's ids (a few MB at most) while it is
 * read, so memory does not depend on it; more would only overlap more reads.
 */
const SCAN_CONCURRENCY = 4;

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
  /** The delete files read, and the data files each points at (only they can point at a removed file). */
  targets: Map<string, Set<string>>;
  /** Data files all of whose rows go. */
  removed: Set<string>;
  /** Per partition, the new (file_path, pos) rows to delete. */
  newDeletes: Map<string, { file_path: string; pos: number }[]>;
}

/** `list` sorted ascending (in place), each value once. */
function ascending(list: number[]): number[] {
  list.sort((a, b) => a - b);
  return list.filter((v, i) => i === 0 || v !== list[i - 1]);
}

/**
 * Finds the rows `rule` supersedes among the live files of `baseManifests`, reading only the
 * data files whose bounds can hold them, and the delete files whose bounds can name those
 * (`current-scan.ts`). Manifests are read whole: their size grows with the number of files, a
 * few hundred bytes each, not with rows.
 */
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
  const found: Superseded = { manifests, targets: new Map(), removed: new Set(), newDeletes: new Map() };
  const sorted = sortedRule(rule);
  if (sorted.jobs.length === 0 && sorted.campaigns.length === 0) return found;
  const live = manifests.flatMap((m) => m.entries.filter((e) => e.status !== STATUS.DELETED));

  const base = baseTableOf(table);
  const jobIdField = fieldId(base, 'job_id');
  const campaignIdField = fieldId(base, 'campaign_id');
  const runIdField = fieldId(base, 'run_id');
  // Run order first: a file of the rule's run or newer ones holds no row it may supersede.
  const runs = new Map<string, 'all' | 'some'>();
  const candidates = live.filter((e) => {
    if (e.data_file.content !== CONTENT.DATA) return false;
    const older = runsOlder(e, runIdField, rule);
    if (older === 'none') return false;
    runs.set(e.data_file.file_path, older);
    return columnsFor(sorted, manifestBounds(e, jobIdField), manifestBounds(e, campaignIdField)).length > 0;
  });
  if (candidates.length === 0) return found;

  // Rows of the candidates already deleted, from the delete files whose bounds can name them.
  const wanted = new Set(candidates.map((e) => e.data_file.file_path));
  const deleted = new Map<string, number[]>();
  const deleteFiles = live.filter(
    (e) =>
      e.data_file.content === CONTENT.POSITION_DELETES &&
      candidates.some((c) => pathWithin(e, DELETE_FILE_PATH_ID, c.data_file.file_path)),
  );
  await eachLimited(deleteFiles, SCAN_CONCURRENCY, async (e) => {
    found.targets.set(e.data_file.file_path, await readDeleteFile(storage, e, wanted, deleted));
  });

  await eachLimited(candidates, SCAN_CONCURRENCY, async (e) => {
    const path = e.data_file.file_path;
    const gone = ascending(deleted.get(path) ?? []);
    const { rows, hits } = await scanDataFile(storage, e, sorted, gone, runs.get(path));
    if (hits.count === 0) return;
    if (gone.length + hits.count >= rows) {
      found.removed.add(path);
      return;
    }
    const dt = e.data_file.partition.dt ?? '';
    const list = found.newDeletes.get(dt) ?? [];
    for (const pos of hits.positions()) list.push({ file_path: path, pos });
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

/** Per partition, rows of the run's own new data files that newer runs supersede. */
export type OwnDeletes = ReadonlyMap<string, readonly { file_path: string; pos: number }[]>;

/**
 * The `changeBase` of a current table's commit: removes the rows `rule` supersedes from the
 * base's live data files, and `own` rows of the run's own files (see the module's summary).
 */
export function supersedeJobs(
  storage: Storage,
  catalog: IcebergCatalog,
  rule: SupersedeRule,
  own: OwnDeletes = new Map(),
): (base: BaseContext) => Promise<BaseChange> {
  return async (ctx) => {
    const table = ctx.table;
    const { manifests, targets, removed, newDeletes } = await findSuperseded(
      storage,
      table,
      ctx.manifests,
      rule,
    );
    for (const [dt, rows] of own) newDeletes.set(dt, [...(newDeletes.get(dt) ?? []), ...rows]);
    if (removed.size === 0 && newDeletes.size === 0)
      return { manifests: [...ctx.manifests], counts: NO_CHANGE };
    // A delete file that points only at removed data files goes with them.
    // Only a delete file read can point at a removed file: its bounds can name that file.
    const removedDeletes = new Set(
      [...targets].filter(([, files]) => [...files].every((p) => removed.has(p))).map(([path]) => path),
    );

    const counts: ChangeCounts = { ...NO_CHANGE };
    const added: ManifestEntry[] = [];
    for (const [dt, rows] of [...newDeletes].sort(([a], [b]) => (a < b ? -1 : 1))) {
      rows.sort((a, b) => (a.file_path < b.file_path ? -1 : a.file_path > b.file_path ? 1 : a.pos - b.pos));
      const bytes = encodeParquet(POSITION_DELETES, rows);
      const key = icebergDataKey(table, dt, `${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-deletes`);
      await storage.put(key, bytes);
      added.push(deleteEntry(storage, key, dt, bytes, rows, ctx.snapshotId));
      counts.addedDeleteFiles++;
      counts.addedPositionDeletes += rows.length;
      counts.addedDeleteSize += bytes.length;
    }

    // Manifests holding a removed file are rewritten: removed entries DELETED by this snapshot,
    // the others EXISTING, every sequence number explicit (only ADDED entries inherit). Entries
    // an earlier snapshot DELETED are dropped, as Java's rewrites do: that snapshot's own
    // manifests hold them for the clean-up (`maintenance.ts`).
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
        if (e.status === STATUS.DELETED) continue;
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
        await writeManifest(storage, key, table, ctx.metadata, next, {
          snapshotId: ctx.snapshotId,
          sequenceNumber: ctx.sequenceNumber,
          content: manifest.content,
        }),
      );
    }
    if (added.length > 0) {
      const key = `${prefix}${ctx.runId}-${ctx.snapshotId}-${ctx.sequenceNumber}-d.avro`;
      out.push(
        await writeManifest(storage, key, table, ctx.metadata, added, {
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
