import { describe, expect, it } from 'vitest';
import { nextMetadata } from '../../../shared/iceberg/maintenance.js';
import type { Snapshot, TableMetadata } from '../../../shared/iceberg/types.js';

const DAY = 24 * 3_600_000;
const NOW = Date.UTC(2026, 10, 27);

/** A snapshot `days` old, child of `parent`. */
const snap = (id: number, days: number, parent?: number): Snapshot => ({
  'snapshot-id': id,
  ...(parent !== undefined && { 'parent-snapshot-id': parent }),
  'sequence-number': id,
  'timestamp-ms': NOW - days * DAY,
  'manifest-list': `s3://b/t/metadata/snap-${id}.avro`,
  summary: { operation: 'append' },
});

/** Metadata holding `snapshots` (main on the last one) and `refs`. */
function table(snapshots: Snapshot[], refs: TableMetadata['refs']): TableMetadata {
  return {
    'format-version': 2,
    'table-uuid': 'u',
    location: 's3://b/t',
    'last-sequence-number': snapshots.length,
    'last-updated-ms': NOW - DAY,
    'last-column-id': 1,
    'current-schema-id': 0,
    schemas: [],
    'default-spec-id': 0,
    'partition-specs': [],
    'last-partition-id': 999,
    'default-sort-order-id': 0,
    'sort-orders': [],
    'current-snapshot-id': snapshots.at(-1)!['snapshot-id'],
    snapshots,
    refs: { main: { 'snapshot-id': snapshots.at(-1)!['snapshot-id'], type: 'branch' }, ...refs },
  };
}

const kept = (metadata: TableMetadata) => metadata.snapshots!.map((s) => Number(s['snapshot-id']));

describe('snapshot expiry', () => {
  it("keeps a branch's ancestors by the branch's own min-snapshots-to-keep and max-snapshot-age-ms", () => {
    // main: 1 ← 2 ← 3 ← 4 (new, 0 days); branch b: 1 ← 5 ← 6 ← 7, all 30+ days old.
    const base = table(
      [snap(1, 40), snap(2, 30, 1), snap(3, 20, 2), snap(5, 35, 1), snap(6, 34, 5), snap(7, 33, 6)],
      { b: { 'snapshot-id': 7, type: 'branch', 'min-snapshots-to-keep': 2 } },
    );
    base['current-snapshot-id'] = 3;
    base.refs!.main = { 'snapshot-id': 3, type: 'branch' };
    const { metadata, expired } = nextMetadata(base, undefined, snap(4, 0, 3), NOW);
    expect(kept(metadata).sort()).toEqual([4, 6, 7]);
    expect(expired.map((s) => Number(s['snapshot-id'])).sort()).toEqual([1, 2, 3, 5]);
    const longer = table(base.snapshots!, {
      b: { 'snapshot-id': 7, type: 'branch', 'max-snapshot-age-ms': 36 * DAY },
    });
    longer.refs!.main = { 'snapshot-id': 3, type: 'branch' };
    expect(kept(nextMetadata(longer, undefined, snap(4, 0, 3), NOW).metadata).sort()).toEqual([4, 5, 6, 7]);
  });

  it('keeps a tagged snapshot, drops refs past max-ref-age-ms (main never) and refs naming no snapshot', () => {
    const base = table([snap(1, 40), snap(2, 30, 1), snap(3, 20, 2)], {
      keep: { 'snapshot-id': 1, type: 'tag' },
      old: { 'snapshot-id': 2, type: 'tag', 'max-ref-age-ms': 10 * DAY },
      lost: { 'snapshot-id': 99, type: 'tag' },
    });
    base.refs!.main = { 'snapshot-id': 3, type: 'branch', 'max-ref-age-ms': DAY, 'min-snapshots-to-keep': 1 };
    const { metadata } = nextMetadata(base, undefined, snap(4, 0, 3), NOW);
    expect(kept(metadata)).toEqual([1, 4]);
    expect(Object.keys(metadata.refs!).sort()).toEqual(['keep', 'main']);
    // main moves to the new snapshot and keeps the settings another engine gave it.
    expect(metadata.refs!.main).toEqual({
      'snapshot-id': 4,
      type: 'branch',
      'max-ref-age-ms': DAY,
      'min-snapshots-to-keep': 1,
    });
  });

  it('keeps a snapshot no ref reaches while it is younger than the table maximum age', () => {
    const base = table([snap(1, 40), snap(2, 2), snap(3, 20, 1), snap(5, 30)], {});
    base.refs!.main = { 'snapshot-id': 3, type: 'branch' };
    expect(kept(nextMetadata(base, undefined, snap(4, 0, 3), NOW).metadata)).toEqual([2, 4]);
  });

  it("drops the statistics of expired snapshots with them (their files to delete), as Java's RemoveSnapshots does", () => {
    const base = table([snap(1, 40), snap(2, 30, 1), snap(3, 2, 2)], {
      keep: { 'snapshot-id': 1, type: 'tag' },
    });
    base.statistics = [1, 2, 3].map((id) => ({
      'snapshot-id': id,
      'statistics-path': `s3://b/t/metadata/stats-${id}.puffin`,
      'file-size-in-bytes': 413,
      'blob-metadata': [],
    }));
    base['partition-statistics'] = [
      { 'snapshot-id': 2, 'statistics-path': 's3://b/t/metadata/partition-stats-2.parquet' },
    ];
    const { metadata, droppedMetadata } = nextMetadata(base, undefined, snap(4, 0, 3), NOW);
    expect(kept(metadata)).toEqual([1, 3, 4]);
    expect(metadata.statistics!.map((s) => s['snapshot-id'])).toEqual([1, 3]);
    expect(metadata.statistics![0]).toEqual(base.statistics[0]);
    expect(metadata['partition-statistics']).toEqual([]);
    expect(droppedMetadata.sort()).toEqual([
      's3://b/t/metadata/partition-stats-2.parquet',
      's3://b/t/metadata/stats-2.puffin',
    ]);
    // A table without statistics gets none.
    const plain = nextMetadata(table([snap(1, 40)], {}), undefined, snap(2, 0, 1), NOW).metadata;
    expect('statistics' in plain || 'partition-statistics' in plain).toBe(false);
  });
});
