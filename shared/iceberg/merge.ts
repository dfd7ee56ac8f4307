/**
 * Manifest merging, as Iceberg's own appends do (`commit.manifest-merge.enabled`): every run
 * adds one manifest per table, so without merging a year of 5-minute runs would leave 105,000
 * manifests in a snapshot, each one a read for every query's planning. Once a snapshot holds
 * {@link MIN_COUNT_TO_MERGE} data manifests (the table property
 * `commit.manifest.min-count-to-merge` overrides it, as in Iceberg), the small ones are packed, in order, into
 * manifests of up to {@link TARGET_MANIFEST_BYTES}; their live entries become EXISTING entries
 * with their sequence numbers written out (only ADDED entries may inherit them), and entries
 * marked DELETED, already applied, are dropped. Large manifests stay as they are, so each merge
 * rewrites a bounded amount. As in Java (`MergingSnapshotProducer`), a carried manifest with no
 * live entry left (all DELETED) is dropped: DELETED entries stay only in the manifests of the
 * snapshot that removed the files, which is where the clean-up finds them when it expires
 * (`maintenance.ts`). This snapshot's own manifests are neither dropped nor merged.
 */
import { createHash } from 'node:crypto';
import type { Storage } from '../storage/storage.js';
import {
  CONTENT,
  decodeManifest,
  encodeManifest,
  type Long,
  type ManifestEntry,
  type ManifestFile,
  STATUS,
} from './avro.js';

/** Iceberg's default `commit.manifest.min-count-to-merge`. */
export const MIN_COUNT_TO_MERGE = 100;
/** Iceberg's default `commit.manifest.target-size-bytes`. */
export const TARGET_MANIFEST_BYTES = 8 * 1024 * 1024;

export interface MergeContext {
  storage: Storage;
  /** Key of a manifest's location. */
  keyOf(location: string): string;
  locationOf(key: string): string;
  /** Key prefix of the table's `metadata/`. */
  metadataPrefix: string;
  /** The header every manifest of the table carries (schema, spec). */
  header: Parameters<typeof encodeManifest>[1];
  /** The committing snapshot: it "adds" the merged manifests. */
  snapshotId: number;
  sequenceNumber: number;
  /** The table's `commit.manifest.min-count-to-merge`, if set (default {@link MIN_COUNT_TO_MERGE}). */
  minCountToMerge?: string | undefined;
}

const big = (v: Long) => BigInt(v);

/** The least of `values` and `start` (BigInt: Math.min takes numbers only). */
function minOf(values: readonly bigint[], start: bigint): bigint {
  let min = start;
  for (const v of values) if (v < min) min = v;
  return min;
}

/** The entries of a manifest with their inherited fields written out, live ones only. */
async function liveEntries(ctx: MergeContext, manifest: ManifestFile): Promise<ManifestEntry[]> {
  const found = await ctx.storage.get(ctx.keyOf(manifest.manifest_path));
  if (!found) throw new Error(`Iceberg manifest ${manifest.manifest_path} is missing`);
  return (await decodeManifest(found.body))
    .filter((e) => e.status !== STATUS.DELETED)
    .map((e) => ({
      ...e,
      status: STATUS.EXISTING,
      snapshot_id: e.snapshot_id ?? manifest.added_snapshot_id,
      sequence_number: e.sequence_number ?? manifest.sequence_number,
      file_sequence_number: e.file_sequence_number ?? manifest.sequence_number,
    }));
}

/** One merged manifest of `group`'s entries, written, and its manifest list entry. */
async function mergeGroup(ctx: MergeContext, group: readonly ManifestFile[]): Promise<ManifestFile> {
  const entries = (await Promise.all(group.map((m) => liveEntries(ctx, m)))).flat();
  const bytes = await encodeManifest(entries, ctx.header);
  const digest = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  const key = `${ctx.metadataPrefix}merged-${digest}.avro`;
  await ctx.storage.put(key, bytes);
  const seqs = entries.map((e) => big(e.sequence_number!));
  const rows = entries.reduce((n, e) => n + big(e.data_file.record_count), 0n);
  const asLong = (n: bigint): Long => (n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n);
  const dts = entries.map((e) => e.data_file.partition.dt ?? '').sort();
  return {
    manifest_path: ctx.locationOf(key),
    manifest_length: bytes.length,
    partition_spec_id: group[0]!.partition_spec_id,
    content: CONTENT.DATA,
    sequence_number: ctx.sequenceNumber,
    min_sequence_number: asLong(minOf(seqs, big(ctx.sequenceNumber))),
    added_snapshot_id: ctx.snapshotId,
    added_files_count: 0,
    existing_files_count: entries.length,
    deleted_files_count: 0,
    added_rows_count: 0,
    existing_rows_count: asLong(rows),
    deleted_rows_count: 0,
    partitions:
      entries.length === 0
        ? []
        : [
            {
              contains_null: dts.includes(''),
              contains_nan: false,
              lower_bound: Buffer.from(dts[0]!, 'utf8'),
              upper_bound: Buffer.from(dts[dts.length - 1]!, 'utf8'),
            },
          ],
    key_metadata: null,
  };
}

/**
 * The manifests of the next snapshot, the small data manifests of `carried` merged once there
 * are {@link MIN_COUNT_TO_MERGE} of them. Delete manifests and large ones are kept as they are.
 * Deterministic for the same inputs (merged manifests are named by their content).
 */
export async function mergeManifests(
  ctx: MergeContext,
  carried: readonly ManifestFile[],
): Promise<ManifestFile[]> {
  const ours = (m: ManifestFile) => BigInt(m.added_snapshot_id) === BigInt(ctx.snapshotId);
  const live = carried.filter((m) => ours(m) || hasLiveEntries(m));
  const data = live.filter((m) => m.content === CONTENT.DATA && !ours(m));
  const minCount = Number(ctx.minCountToMerge ?? MIN_COUNT_TO_MERGE);
  if (data.length < (Number.isInteger(minCount) && minCount > 1 ? minCount : MIN_COUNT_TO_MERGE)) return live;
  const out: ManifestFile[] = live.filter((m) => !data.includes(m));
  let bin: ManifestFile[] = [];
  let binBytes = 0;
  const flush = async () => {
    if (bin.length === 1) out.push(bin[0]!);
    else if (bin.length > 1) out.push(await mergeGroup(ctx, bin));
    bin = [];
    binBytes = 0;
  };
  for (const manifest of data) {
    const length = Number(manifest.manifest_length);
    if (length >= TARGET_MANIFEST_BYTES) {
      out.push(manifest);
      continue;
    }
    if (binBytes + length > TARGET_MANIFEST_BYTES) await flush();
    bin.push(manifest);
    binBytes += length;
  }
  await flush();
  return out;
}

/** Whether a manifest lists a live (ADDED or EXISTING) file; counts a writer left out: maybe. */
function hasLiveEntries(m: ManifestFile): boolean {
  const counts = [m.added_files_count, m.existing_files_count];
  return counts.some((n) => n === null || n === undefined || n > 0);
}
