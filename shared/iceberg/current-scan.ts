/**
 * Finding the rows a run supersedes in a current table's data files, reading only what can hold
 * them (`current.ts` makes the snapshot from what this finds). Three sieves, coarse to fine:
 *
 * 1. A data file's manifest bounds of `job_id` and `campaign_id`: a file none of whose range
 *    holds a job of the run (nor a campaign it listed completely) is not opened.
 * 2. A row group's Parquet statistics of the same columns, from the footer (one ranged read of
 *    the file's tail): a group that cannot hold one is not read.
 * 3. In the groups left, only the `job_id` column chunk (and `campaign_id`'s when a listing can
 *    apply) is read, by byte range, and decoded one group at a time into numbers
 *    (`readIdColumn`); the rule is asked once per run of rows of one job.
 *
 * Memory is one row group's ids per file being read, plus the positions found; no set of the
 * table's ids is ever built. No index of our own: the `job_id` chunk, dictionary- and
 * RLE-encoded with a job's rows next to each other, is smaller than such an index would be
 * (measured: ~2.4 bytes a report a table, footers included, where an index needs at least a
 * job id and a position), and it can never disagree with the data (a file rewritten by an
 * engine's compaction needs no index rebuilt). What it reads still grows with the table when the
 * run's jobs are spread over every file's range (a full listing, or changed jobs all over the id
 * space): a real run lists every campaign completely, so every row group of every live file has
 * its ids read; see BENCHMARKS.md, "iceberg-current at scale" and "The lake's curve".
 */

import { zstdDecompressSync } from 'node:zlib';
import { type AsyncBuffer, type FileMetaData, parquetMetadataAsync, parquetRead } from 'hyparquet';
import { ExporterError } from '../errors.js';
import { readIdColumn } from '../parquet/id-column.js';
import { readRange, type Storage } from '../storage/storage.js';
import type { ManifestEntry } from './avro.js';
import { keyOfLocation } from './locations.js';

const compressors = {
  ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)),
};

/**
 * A footer read's first guess at the tail's size: our footers take ~1–2 KB per row group, so
 * one read holds the footer of a file of a few row groups; hyparquet reads the rest of a larger
 * one. Kept small: a small file's tail is most of it, and a column chunk inside it is served
 * from the tail already read.
 */
const FOOTER_GUESS_BYTES = 16 * 1024;

/** A set of job ids as the rule asks it: a `Set`, or {@link SortedIds}. */
export interface JobIds {
  has(job: number): boolean;
}

/**
 * Job ids sorted in a typed array, asked by binary search: 8 bytes a job. A run lists every job
 * of every campaign, as many as the lake holds; in a `Set` each id past 2^31 (ours are 4·10^9)
 * is a heap number with its hash entry, about five times that.
 */
export class SortedIds implements JobIds {
  readonly #ids: Float64Array;

  /** Takes `ids` (any order, repeats allowed) and sorts them in place. */
  constructor(ids: Float64Array) {
    this.#ids = ids.sort();
  }

  get size(): number {
    return this.#ids.length;
  }

  has(job: number): boolean {
    let lo = 0;
    let hi = this.#ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#ids[mid]! < job) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.#ids.length && this.#ids[lo] === job;
  }
}

/**
 * The rows a run supersedes in a current table: the rows of `jobs`, and the rows of a campaign
 * of `listings` whose job that listing does not hold.
 */
export interface SupersedeRule {
  /** Jobs whose older rows go: the jobs the run exported, and those whose report answered 404. */
  readonly jobs: ReadonlySet<number>;
  /** The job ids of each campaign the run listed completely (a campaign gone listed none). */
  readonly listings: ReadonlyMap<number, JobIds>;
  /**
   * The run whose rule this is: only rows of older runs (a smaller `run_id`, the order of the
   * `*_latest` views) are superseded, so that a run committing late never removes a newer
   * run's row. Absent: rows of every run.
   */
  readonly runId?: string;
}

/** True when the rule supersedes a row of (`job`, `campaign`), whatever run wrote it. */
export const supersedes = (rule: SupersedeRule, job: number, campaign: number): boolean =>
  rule.jobs.has(job) || rule.listings.get(campaign)?.has(job) === false;

/** A rule with its job and campaign ids sorted, for range tests against bounds. */
export interface SortedRule {
  readonly rule: SupersedeRule;
  readonly jobs: Float64Array;
  readonly campaigns: Float64Array;
}

export function sortedRule(rule: SupersedeRule): SortedRule {
  return {
    rule,
    jobs: Float64Array.from(rule.jobs).sort(),
    campaigns: Float64Array.from(rule.listings.keys()).sort(),
  };
}

/** True when the sorted `ids` hold a value in [`low`, `high`] (a missing bound is open). */
export function anyWithin(ids: Float64Array, low?: number, high?: number): boolean {
  if (ids.length === 0) return false;
  // The first id at or above `low`, by binary search.
  let lo = 0;
  let hi = ids.length;
  if (low !== undefined) {
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ids[mid]! < low) lo = mid + 1;
      else hi = mid;
    }
  }
  return lo < ids.length && (high === undefined || ids[lo]! <= high);
}

/** Which columns a range of rows must be read for: none when the rule cannot apply to it. */
export function columnsFor(
  sorted: SortedRule,
  job: { low?: number; high?: number },
  campaign: { low?: number; high?: number },
): readonly ('job_id' | 'campaign_id')[] {
  if (anyWithin(sorted.campaigns, campaign.low, campaign.high)) return ['job_id', 'campaign_id'];
  if (anyWithin(sorted.jobs, job.low, job.high)) return ['job_id'];
  return [];
}

/** A file's bounds of a bigint column of field id `field`, as numbers. */
export function manifestBounds(entry: ManifestEntry, field: number): { low?: number; high?: number } {
  const bound = (m: ManifestEntry['data_file']['lower_bounds']) => {
    const value = m?.find((kv) => kv.key === field)?.value;
    return value && value.length === 8 ? Number(value.readBigInt64LE()) : undefined;
  };
  const low = bound(entry.data_file.lower_bounds);
  const high = bound(entry.data_file.upper_bounds);
  return { ...(low !== undefined && { low }), ...(high !== undefined && { high }) };
}

/**
 * Which rows of a data file the run order lets `rule` supersede, by the file's `run_id` bounds
 * (field `field`): `none` when every row is of the rule's run or a newer one, `all` when every
 * row is of an older run, `some` when the bounds straddle it (a file another engine's
 * compaction wrote, or one without bounds): its rows' `run_id` is read. Our data files are
 * copies of one run's history file, their bounds one run id: never `some`. An upper bound may
 * be cut (a prefix of the value), as in {@link pathWithin}.
 */
export function runsOlder(entry: ManifestEntry, field: number, rule: SupersedeRule): 'none' | 'all' | 'some' {
  if (rule.runId === undefined) return 'all';
  const text = (m: ManifestEntry['data_file']['lower_bounds']) => {
    const value = m?.find((kv) => kv.key === field)?.value;
    return value ? value.toString('utf8') : undefined;
  };
  const low = text(entry.data_file.lower_bounds);
  const high = text(entry.data_file.upper_bounds);
  if (low !== undefined && low >= rule.runId) return 'none';
  if (high !== undefined && high < rule.runId && !rule.runId.startsWith(high)) return 'all';
  return 'some';
}

/**
 * True when a data file's `run_id` bounds (field `field`) leave room for `runId`: a file of that
 * one run, or one of several runs (another engine's compaction) or without bounds, whose rows'
 * `run_id` must be read. An upper bound may be cut, as in {@link pathWithin}.
 */
export function mayHoldRun(entry: ManifestEntry, field: number, runId: string): boolean {
  const text = (m: ManifestEntry['data_file']['lower_bounds']) => {
    const value = m?.find((kv) => kv.key === field)?.value;
    return value ? value.toString('utf8') : undefined;
  };
  const low = text(entry.data_file.lower_bounds);
  const high = text(entry.data_file.upper_bounds);
  return (
    (low === undefined || runId >= low) && (high === undefined || runId <= high || runId.startsWith(high))
  );
}

/**
 * True when a delete file's `file_path` bounds leave room for `path`. An upper bound may be cut
 * (the spec allows truncated string bounds), so a path it is a prefix of is within.
 */
export function pathWithin(entry: ManifestEntry, fieldId: number, path: string): boolean {
  const text = (m: ManifestEntry['data_file']['lower_bounds']) => {
    const value = m?.find((kv) => kv.key === fieldId)?.value;
    return value ? value.toString('utf8') : undefined;
  };
  const low = text(entry.data_file.lower_bounds);
  const high = text(entry.data_file.upper_bounds);
  return (low === undefined || path >= low) && (high === undefined || path <= high || path.startsWith(high));
}

/** An Iceberg data or delete file as hyparquet reads it (see {@link rangedKey}). */
function rangedBuffer(storage: Storage, location: string, byteLength: number): AsyncBuffer {
  return rangedKey(storage, keyOfLocation(storage, location), byteLength);
}

/**
 * An object of storage as hyparquet reads it: by byte range, `byteLength` known beforehand
 * (from the manifest or the run's file list). The last tail read is kept, and a range inside it
 * is cut from it instead of read again.
 */
function rangedKey(storage: Storage, key: string, byteLength: number): AsyncBuffer {
  let tail: { start: number; bytes: Uint8Array } | undefined;
  return {
    byteLength,
    async slice(start: number, end = byteLength) {
      let body: Uint8Array | undefined;
      if (tail && start >= tail.start) body = tail.bytes.subarray(start - tail.start, end - tail.start);
      else {
        body = await readRange(storage, key, start, end);
        if (!body) throw new ExporterError(`Parquet file ${key} is missing`, { retryable: true });
        if (end === byteLength) tail = { start, bytes: body };
      }
      return body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
    },
  };
}

/** One row group's place in a file and its statistics of a column, as numbers. */
interface GroupStats {
  index: number;
  start: number;
  rows: number;
  stats(column: string): { low?: number; high?: number };
}

function groupsOf(metadata: FileMetaData): GroupStats[] {
  let start = 0;
  return metadata.row_groups.map((group, index) => {
    const rows = Number(group.num_rows);
    const out: GroupStats = {
      index,
      start,
      rows,
      stats(column) {
        const chunk = group.columns.find((c) => c.meta_data?.path_in_schema.join('.') === column);
        const s = chunk?.meta_data?.statistics;
        const asNumber = (v: unknown) =>
          typeof v === 'bigint' || typeof v === 'number' ? Number(v) : undefined;
        const low = asNumber(s?.min_value ?? s?.min);
        const high = asNumber(s?.max_value ?? s?.max);
        return { ...(low !== undefined && { low }), ...(high !== undefined && { high }) };
      },
    };
    start += rows;
    return out;
  });
}

/** Reads `columns` of row group `index` as numbers, column by column (`readIdColumn`). */
async function readIds(
  file: AsyncBuffer,
  metadata: FileMetaData,
  columns: readonly string[],
  index: number,
): Promise<Record<string, Float64Array>> {
  const out: Record<string, Float64Array> = {};
  const group = metadata.row_groups[index]!;
  for (const c of columns) out[c] = await readIdColumn(file, metadata, group, c, compressors);
  return out;
}

/**
 * Ascending row positions as runs of consecutive ones: a job's rows sit together in a file, so
 * a run superseding whole jobs (or a whole file: 7.5M positions at 100k reports) keeps a few
 * numbers per job, not one per row.
 */
export class PositionRuns {
  /** Pairs: the first position of a run, and the one after its last. */
  readonly #bounds: number[] = [];
  count = 0;

  /** Adds `pos`, greater than every position added before. */
  add(pos: number): void {
    const last = this.#bounds.length - 1;
    if (last > 0 && this.#bounds[last] === pos) this.#bounds[last] = pos + 1;
    else this.#bounds.push(pos, pos + 1);
    this.count++;
  }

  *positions(): Generator<number> {
    for (let i = 0; i < this.#bounds.length; i += 2) {
      for (let pos = this.#bounds[i]!; pos < this.#bounds[i + 1]!; pos++) yield pos;
    }
  }
}

/** What a data file holds of the rule: the positions it supersedes, out of `rows`. */
export interface FileHits {
  rows: number;
  /** Positions of live rows (not deleted before) that the rule supersedes. */
  hits: PositionRuns;
}

/**
 * The live rows of one data file that the rule supersedes, reading its footer and, of the row
 * groups whose statistics can hold the rule's ids, the id columns it needs.
 *
 * @param deleted positions of the file already deleted (by earlier delete files), ascending
 */
export async function scanDataFile(
  storage: Storage,
  entry: ManifestEntry,
  sorted: SortedRule,
  deleted: readonly number[] = [],
  runs: 'all' | 'some' = 'all',
): Promise<FileHits> {
  const file = rangedBuffer(storage, entry.data_file.file_path, Number(entry.data_file.file_size_in_bytes));
  const metadata = await parquetMetadataAsync(file, { initialFetchSize: FOOTER_GUESS_BYTES });
  const hits = new PositionRuns();
  let nextDeleted = 0;
  for (const group of groupsOf(metadata)) {
    const columns = columnsFor(sorted, group.stats('job_id'), group.stats('campaign_id'));
    if (columns.length === 0 || group.rows === 0) continue;
    const ids = await readIds(file, metadata, columns, group.index);
    const jobs = ids.job_id!;
    const campaigns = ids.campaign_id;
    const runId = sorted.rule.runId!;
    const older = runs === 'some' ? await runRows(file, metadata, group, (run) => run < runId) : undefined;
    // A job's rows sit next to each other (75 a report in questions_current): the rule is asked
    // once per run of equal (job, campaign), not once per row.
    let lastJob = Number.NaN;
    let lastCampaign = Number.NaN;
    let hit = false;
    for (let i = 0; i < group.rows; i++) {
      const pos = group.start + i;
      while (nextDeleted < deleted.length && deleted[nextDeleted]! < pos) nextDeleted++;
      if (deleted[nextDeleted] === pos) continue;
      const job = jobs[i]!;
      const campaign = campaigns ? campaigns[i]! : 0;
      if (job !== lastJob || campaign !== lastCampaign) {
        lastJob = job;
        lastCampaign = campaign;
        hit =
          sorted.rule.jobs.has(job) ||
          (campaigns !== undefined && sorted.rule.listings.get(campaign)?.has(job) === false);
      }
      if (hit && (older === undefined || older[i] === 1)) hits.add(pos);
    }
  }
  return { rows: Number(metadata.num_rows), hits };
}

/** Per row of a group, 1 when its `run_id` passes `test` (one group's strings held at a time). */
async function runRows(
  file: AsyncBuffer,
  metadata: FileMetaData,
  group: GroupStats,
  test: (run: string) => boolean,
): Promise<Uint8Array> {
  const passes = new Uint8Array(group.rows);
  await parquetRead({
    file,
    metadata,
    columns: ['run_id'],
    rowStart: group.start,
    rowEnd: group.start + group.rows,
    compressors,
    onChunk: ({ columnData, rowStart }) => {
      for (let i = 0; i < columnData.length; i++) {
        const at = rowStart - group.start + i;
        if (at >= 0 && at < group.rows) passes[at] = test(String(columnData[i])) ? 1 : 0;
      }
    },
  });
  return passes;
}

/**
 * The (file_path, pos) rows of a position delete file, keeping the positions of `wanted` files
 * only (in no particular order across delete files: sort before use); returns every file it
 * names (its targets).
 */
export async function readDeleteFile(
  storage: Storage,
  entry: ManifestEntry,
  wanted: ReadonlySet<string>,
  into: Map<string, number[]>,
): Promise<Set<string>> {
  const file = rangedBuffer(storage, entry.data_file.file_path, Number(entry.data_file.file_size_in_bytes));
  const metadata = await parquetMetadataAsync(file, { initialFetchSize: FOOTER_GUESS_BYTES });
  const targets = new Set<string>();
  for (const group of groupsOf(metadata)) {
    const paths = new Array<string>(group.rows);
    const positions = new Float64Array(group.rows);
    await parquetRead({
      file,
      metadata,
      columns: ['file_path', 'pos'],
      rowStart: group.start,
      rowEnd: group.start + group.rows,
      compressors,
      onChunk: ({ columnName, columnData, rowStart }) => {
        for (let i = 0; i < columnData.length; i++) {
          const at = rowStart - group.start + i;
          if (at < 0 || at >= group.rows) continue;
          if (columnName === 'file_path') paths[at] = columnData[i] as string;
          else positions[at] = Number(columnData[i] as bigint | number);
        }
      },
    });
    for (let i = 0; i < group.rows; i++) {
      const target = paths[i]!;
      targets.add(target);
      if (!wanted.has(target)) continue;
      const list = into.get(target) ?? [];
      list.push(positions[i]!);
      into.set(target, list);
    }
  }
  return targets;
}

/**
 * The bigint `columns` of a Parquet object of `byteLength` bytes, one row group at a time, as
 * numbers: only those column chunks are read, by byte range. With `ofRun`, only the rows whose
 * `run_id` is that run (a file of several runs' rows, as another engine's compaction writes):
 * the `run_id` chunk is read too.
 *
 * @example
 * for await (const { job_id } of idColumnGroups(storage, key, size, ['job_id'])) jobs.push(...job_id);
 */
export async function* idColumnGroups<C extends string>(
  storage: Storage,
  key: string,
  byteLength: number,
  columns: readonly C[],
  ofRun?: string,
): AsyncGenerator<Record<C, Float64Array>> {
  const file = rangedKey(storage, key, byteLength);
  const metadata = await parquetMetadataAsync(file, { initialFetchSize: FOOTER_GUESS_BYTES });
  for (const group of groupsOf(metadata)) {
    if (group.rows === 0) continue;
    const ids = (await readIds(file, metadata, columns, group.index)) as Record<C, Float64Array>;
    if (ofRun === undefined) {
      yield ids;
      continue;
    }
    const ours = await runRows(file, metadata, group, (run) => run === ofRun);
    const kept = {} as Record<C, Float64Array>;
    for (const c of columns) kept[c] = ids[c].filter((_, i) => ours[i] === 1);
    yield kept;
  }
}
