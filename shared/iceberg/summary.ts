/** The snapshot summary of a commit (the spec's "Snapshot summary" keys). */
import type { CommitFile } from './manifests.js';
import type { Snapshot } from './types.js';

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
export function summaryOf(
  parent: Snapshot | undefined,
  request: { runId: string; files: readonly CommitFile[]; summary?: Readonly<Record<string, string>> },
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
