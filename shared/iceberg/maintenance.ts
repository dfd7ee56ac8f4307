/**
 * A table's upkeep at each commit: snapshot expiry and the bounded metadata log in the next
 * metadata, and after the swap the deletion of what no kept snapshot references any more. As
 * Java's `RemoveSnapshots`: a snapshot goes only when no branch or tag needs it.
 */
import type { Storage } from '../storage/storage.js';
import { decodeManifest, decodeManifestList, type Long, type ManifestFile, STATUS } from './avro.js';
import { keyOfLocation, sameId } from './locations.js';
import type { Snapshot, SnapshotRef, StatisticsFile, TableMetadata } from './types.js';

/** Snapshots are kept 7 days by default (Iceberg's own default is 5): time travel over a week of runs. */
export const DEFAULT_MAX_SNAPSHOT_AGE_MS = 7 * 24 * 3_600_000;

/** A numeric property, or `fallback` when absent or not a number. */
function numberOf(value: unknown, fallback: number): number {
  const n = Number(value);
  return value === undefined || value === null || value === '' || Number.isNaN(n) ? fallback : n;
}

/**
 * The snapshots the refs need, as Java's `RemoveSnapshots` keeps them, and the refs kept:
 * - a ref whose snapshot is older than its `max-ref-age-ms` (the table's
 *   `history.expire.max-ref-age-ms`, default for ever) goes, `main` never; so does a ref whose
 *   snapshot is not in the table (it names nothing a reader could load);
 * - a tag keeps its snapshot;
 * - a branch keeps its head and, walking back, each ancestor while fewer than its
 *   `min-snapshots-to-keep` are kept or the ancestor is younger than its `max-snapshot-age-ms`
 *   (absent on the ref: the table's `history.expire.*`);
 * - a snapshot no ref reaches is kept while younger than the table's maximum age.
 */
function retained(
  all: readonly Snapshot[],
  refs: Record<string, SnapshotRef>,
  props: Record<string, string>,
  now: number,
): { keep: Set<bigint>; refs: Record<string, SnapshotRef> } {
  const maxAge = numberOf(props['history.expire.max-snapshot-age-ms'], DEFAULT_MAX_SNAPSHOT_AGE_MS);
  const minKeep = Math.max(1, numberOf(props['history.expire.min-snapshots-to-keep'], 1));
  const maxRefAge = numberOf(props['history.expire.max-ref-age-ms'], Number.POSITIVE_INFINITY);
  const byId = new Map(all.map((s) => [BigInt(s['snapshot-id']), s]));
  const parentOf = (s: Snapshot) =>
    s['parent-snapshot-id'] === undefined || s['parent-snapshot-id'] === null
      ? undefined
      : byId.get(BigInt(s['parent-snapshot-id']));
  const keep = new Set<bigint>();
  const reached = new Set<bigint>();
  const kept: Record<string, SnapshotRef> = {};
  for (const [name, ref] of Object.entries(refs)) {
    const head = byId.get(BigInt(ref['snapshot-id']));
    if (!head) continue;
    if (name !== 'main' && now - head['timestamp-ms'] > numberOf(ref['max-ref-age-ms'], maxRefAge)) continue;
    kept[name] = ref;
    keep.add(BigInt(head['snapshot-id']));
    for (let s: Snapshot | undefined = head; s && !reached.has(BigInt(s['snapshot-id'])); s = parentOf(s))
      reached.add(BigInt(s['snapshot-id']));
    if (ref.type !== 'branch') continue;
    const refMin = Math.max(1, numberOf(ref['min-snapshots-to-keep'], minKeep));
    const refMaxAge = numberOf(ref['max-snapshot-age-ms'], maxAge);
    let count = 0;
    for (let s: Snapshot | undefined = head; s; s = parentOf(s)) {
      if (count >= refMin && now - s['timestamp-ms'] > refMaxAge) break;
      keep.add(BigInt(s['snapshot-id']));
      count++;
    }
  }
  for (const s of all) {
    const id = BigInt(s['snapshot-id']);
    if (!reached.has(id) && now - s['timestamp-ms'] <= maxAge) keep.add(id);
  }
  return { keep, refs: kept };
}

/** The metadata's lists of a snapshot's statistics files (Puffin, and partition statistics). */
const STATISTICS_KEYS = ['statistics', 'partition-statistics'] as const;

/**
 * The next metadata: `base` with the new snapshot current on `main`, the snapshots no ref
 * needs any more expired ({@link retained}) with their statistics, refs past their age
 * dropped, and the metadata log bounded. Returns the snapshots it expired, and the metadata
 * files that fell off the log with the statistics files of the expired snapshots.
 */
export function nextMetadata(
  base: TableMetadata,
  baseLocation: string | undefined,
  snapshot: Snapshot,
  now: number,
): { metadata: TableMetadata; expired: Snapshot[]; droppedMetadata: string[] } {
  const props = base.properties ?? {};
  const previousMax = Math.max(0, Number(props['write.metadata.previous-versions-max'] ?? 100));
  const all = [...(base.snapshots ?? []), snapshot];
  // main keeps its own retention settings, if another engine gave it some.
  const main: SnapshotRef = { ...base.refs?.main, 'snapshot-id': snapshot['snapshot-id'], type: 'branch' };
  const { keep, refs } = retained(all, { ...base.refs, main }, props, now);
  const kept = all.filter((s) => keep.has(BigInt(s['snapshot-id'])));
  const expired = all.filter((s) => !keep.has(BigInt(s['snapshot-id'])));
  const log = [
    ...(base['metadata-log'] ?? []),
    ...(baseLocation ? [{ 'timestamp-ms': base['last-updated-ms'], 'metadata-file': baseLocation }] : []),
  ];
  const droppedMetadata = log.slice(0, Math.max(0, log.length - previousMax)).map((e) => e['metadata-file']);
  // Statistics of expired snapshots go with them, as Java's RemoveSnapshots drops them (their
  // files deleted after the swap); a table without any keeps its metadata as it was.
  const statistics: Partial<TableMetadata> = {};
  for (const key of STATISTICS_KEYS) {
    const entries = base[key];
    if (!Array.isArray(entries)) continue;
    const live = (e: StatisticsFile) => keep.has(BigInt(e['snapshot-id']));
    statistics[key] = entries.filter(live);
    droppedMetadata.push(...entries.filter((e) => !live(e)).map((e) => e['statistics-path']));
  }
  return {
    metadata: {
      ...base,
      ...statistics,
      'last-sequence-number': snapshot['sequence-number'],
      'last-updated-ms': snapshot['timestamp-ms'],
      'current-snapshot-id': snapshot['snapshot-id'],
      snapshots: kept,
      'snapshot-log': [
        ...(base['snapshot-log'] ?? []).filter((e) => keep.has(BigInt(e['snapshot-id']))),
        { 'timestamp-ms': snapshot['timestamp-ms'], 'snapshot-id': snapshot['snapshot-id'] },
      ],
      'metadata-log': log.slice(log.length - Math.min(log.length, previousMax)),
      refs,
    },
    expired,
    droppedMetadata,
  };
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

/** The manifests a snapshot's list names; throws when the list cannot be read. */
async function listOf(storage: Storage, snapshot: Snapshot): Promise<ManifestFile[]> {
  const found = await storage.get(keyOfLocation(storage, snapshot['manifest-list']));
  if (!found) throw new Error(`Iceberg manifest list ${snapshot['manifest-list']} is missing`);
  return decodeManifestList(found.body);
}

async function entriesOf(storage: Storage, manifest: ManifestFile) {
  const found = await storage.get(keyOfLocation(storage, manifest.manifest_path));
  if (!found) throw new Error(`Iceberg manifest ${manifest.manifest_path} is missing`);
  return decodeManifest(found.body);
}

/**
 * A file an expired snapshot removed (`by`), or one only an expired snapshot still read (`by`
 * undefined): deleted unless a kept snapshot still reads it.
 */
interface Removed {
  by: bigint | undefined;
  sequence: bigint | undefined;
}

/**
 * After a swap: deletes what no kept snapshot references any more (`metadata` is the swapped
 * one, `manifests` its current snapshot's, `expired` what its expiry dropped). History is a
 * tree (branches, tags), and no manifest nor file comes back once a line of it dropped it, so
 * a file or manifest an expired snapshot held and a kept one still holds is held by one of the
 * "guards": the oldest snapshot of each kept stretch of a line (its parent not kept), the
 * nearest kept ancestor of each expired snapshot, and the current one. So:
 * - the manifest lists of expired snapshots, and the metadata files that fell off the log, go;
 * - so do the manifests expired lists name and no guard's list does;
 * - and the data and delete files an expired snapshot removed (its DELETED entries, in the
 *   manifests it wrote itself: later snapshots do not carry them), and the live files of the
 *   doomed manifests of an expired snapshot that was the last of its line (a dropped branch's
 *   head, a tag's snapshot), unless a guard that does not descend from the remover holds them
 *   live. In a table with `main` alone that is no guard
 *   (the oldest kept descends from every expired one): no manifest is read but the removers'
 *   own. With a tag or branch on an older snapshot, that guard's manifests are read, one at a
 *   time, only those whose sequence numbers can hold a removed file.
 * Memory: the guards' manifest lists and the removed files' paths, and one manifest at a time.
 * Best effort: a file left behind is an orphan, which costs storage only; a list or manifest
 * that cannot be read stops the deletion of manifests and files.
 */
export async function removeUnreferenced(
  storage: Storage,
  metadata: TableMetadata,
  manifests: readonly ManifestFile[],
  expired: readonly Snapshot[],
  metadataFiles: readonly string[],
) {
  const doomed = new Set<string>([...expired.map((s) => s['manifest-list']), ...metadataFiles]);
  try {
    if (expired.length > 0) await findUnreferenced(storage, metadata, manifests, expired, doomed);
  } catch {
    // Reading what to delete failed: delete the rest; the others stay as orphans.
  }
  const keys = keysOf(storage, doomed);
  if (keys.length > 0) await storage.delete(keys).catch(() => undefined);
}

/** Adds to `doomed` the manifests and files only `expired` held (see {@link removeUnreferenced}). */
async function findUnreferenced(
  storage: Storage,
  metadata: TableMetadata,
  manifests: readonly ManifestFile[],
  expired: readonly Snapshot[],
  doomed: Set<string>,
) {
  const kept = metadata.snapshots ?? [];
  const keptIds = new Set(kept.map((s) => BigInt(s['snapshot-id'])));
  const byId = new Map([...kept, ...expired].map((s) => [BigInt(s['snapshot-id']), s]));
  const parentOf = (s: Snapshot) =>
    s['parent-snapshot-id'] === undefined || s['parent-snapshot-id'] === null
      ? undefined
      : byId.get(BigInt(s['parent-snapshot-id']));
  const ancestorsOf = (s: Snapshot) => {
    const out = new Set<bigint>();
    for (let a = parentOf(s); a && !out.has(BigInt(a['snapshot-id'])); a = parentOf(a))
      out.add(BigInt(a['snapshot-id']));
    return out;
  };
  const current = metadata['current-snapshot-id'];
  const guards = new Map<bigint, Snapshot>();
  for (const s of kept) {
    const parent = parentOf(s);
    if (!parent || !keptIds.has(BigInt(parent['snapshot-id']))) guards.set(BigInt(s['snapshot-id']), s);
  }
  for (const s of expired) {
    for (let a = parentOf(s); a; a = parentOf(a)) {
      if (keptIds.has(BigInt(a['snapshot-id']))) {
        guards.set(BigInt(a['snapshot-id']), a);
        break;
      }
    }
  }
  const guardLists = new Map<bigint, readonly ManifestFile[]>();
  for (const [id, s] of guards)
    guardLists.set(id, sameId(id, current) ? manifests : await listOf(storage, s));
  if (current !== undefined && current !== null) guardLists.set(BigInt(current), manifests);
  const held = new Set([...guardLists.values()].flatMap((list) => list.map((m) => m.manifest_path)));

  // A snapshot no other is the child of is the last of its line: a branch head whose ref went,
  // or a tagged one whose line moved on. Files only it read were spared when their remover
  // expired (the tag held them), or never removed (a branch's own): its live files are
  // candidates too.
  const parents = new Set(
    [...byId.values()].flatMap((s) =>
      s['parent-snapshot-id'] === undefined || s['parent-snapshot-id'] === null
        ? []
        : [BigInt(s['parent-snapshot-id'])],
    ),
  );
  const removed = new Map<string, Removed>();
  const add = (path: string, by: bigint | undefined, sequence: Long | null | undefined) => {
    const known = removed.get(path);
    removed.set(path, {
      by: known && known.by !== by ? undefined : by,
      sequence: sequence === null || sequence === undefined ? undefined : BigInt(sequence),
    });
  };
  for (const snapshot of expired) {
    const id = BigInt(snapshot['snapshot-id']);
    const last = !parents.has(id);
    for (const m of await listOf(storage, snapshot)) {
      const gone = !held.has(m.manifest_path);
      if (gone) doomed.add(m.manifest_path);
      const removes = sameId(m.added_snapshot_id, id) && m.deleted_files_count !== 0;
      if (!removes && !(last && gone)) continue;
      for (const e of await entriesOf(storage, m)) {
        if (e.status === STATUS.DELETED) {
          if (sameId(e.snapshot_id ?? id, id)) add(e.data_file.file_path, id, e.sequence_number);
        } else if (last && gone) {
          const inherits = e.status === STATUS.ADDED && e.sequence_number === null;
          add(e.data_file.file_path, undefined, inherits ? m.sequence_number : e.sequence_number);
        }
      }
    }
  }
  // Guards that descend from every remover cannot read a removed file (no file comes back).
  const removers = [...removed.values()].map((r) => r.by);
  const scanned = new Set<string>();
  for (const [id, list] of guardLists) {
    if (removed.size === 0) break;
    const ancestors = ancestorsOf(byId.get(id) ?? ({} as Snapshot));
    if (removers.every((r) => r !== undefined && ancestors.has(r))) continue;
    for (const m of list) {
      if (scanned.has(m.manifest_path) || !mayHold(m, removed)) continue;
      scanned.add(m.manifest_path);
      for (const e of await entriesOf(storage, m))
        if (e.status !== STATUS.DELETED) removed.delete(e.data_file.file_path);
    }
  }
  for (const path of removed.keys()) doomed.add(path);
}

/** Whether a manifest's live entries can hold one of `removed`: its sequence numbers span one's. */
function mayHold(m: ManifestFile, removed: ReadonlyMap<string, Removed>): boolean {
  const low = m.min_sequence_number;
  const high = m.sequence_number;
  if (low === null || low === undefined || high === null || high === undefined) return true;
  for (const r of removed.values())
    if (r.sequence === undefined || (r.sequence >= BigInt(low) && r.sequence <= BigInt(high))) return true;
  return false;
}
