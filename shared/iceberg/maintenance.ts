/**
 * A table's upkeep at each commit: snapshot expiry and the bounded metadata log in the next
 * metadata, and after the swap the deletion of what no kept snapshot references any more.
 */
import type { Storage } from '../storage/storage.js';
import { decodeManifest, type ManifestFile, STATUS } from './avro.js';
import { keyOfLocation } from './locations.js';
import { manifestsOf } from './manifests.js';
import type { Snapshot, TableMetadata } from './types.js';

/** Snapshots are kept 7 days by default (Iceberg's own default is 5): time travel over a week of runs. */
export const DEFAULT_MAX_SNAPSHOT_AGE_MS = 7 * 24 * 3_600_000;

/**
 * The next metadata: `base` with the new snapshot current, expired snapshots dropped and the
 * metadata log bounded. Returns the manifest lists of the snapshots it expired.
 */
export function nextMetadata(
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
export async function removeUnreferenced(
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
