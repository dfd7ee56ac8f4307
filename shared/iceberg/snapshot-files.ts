/**
 * The files of a table's current snapshot, read from its manifests: what a reader without an
 * Iceberg library (DuckDB's `read_parquet` here, where its `iceberg` extension cannot be
 * installed) needs to read the table as Iceberg defines it — the live data files, and the
 * position delete files whose (file_path, pos) rows it must leave out.
 */
import type { Storage } from '../storage/storage.js';
import { CONTENT, decodeManifest, STATUS } from './avro.js';
import type { IcebergCatalog } from './catalog.js';
import { keyOfLocation } from './locations.js';
import { currentManifests } from './manifests.js';

export interface SnapshotFiles {
  /** Locations of the live data files. */
  data: string[];
  /** Locations of the live position delete files. */
  positionDeletes: string[];
  /** The metadata file read; undefined when the table has no metadata yet. */
  metadataLocation: string | undefined;
}

/** The live files of `table`'s current snapshot (none when it has no snapshot). */
export async function snapshotFiles(
  storage: Storage,
  catalog: IcebergCatalog,
  table: string,
): Promise<SnapshotFiles> {
  const { metadata, metadataLocation } = await catalog.load(table);
  const files: SnapshotFiles = { data: [], positionDeletes: [], metadataLocation };
  if (!metadata) return files;
  for (const manifest of await currentManifests(storage, metadata)) {
    const found = await storage.get(keyOfLocation(storage, manifest.manifest_path));
    if (!found) throw new Error(`Iceberg manifest ${manifest.manifest_path} is missing`);
    for (const entry of await decodeManifest(found.body)) {
      if (entry.status === STATUS.DELETED) continue;
      const { content, file_path } = entry.data_file;
      if (content === CONTENT.DATA) files.data.push(file_path);
      else if (content === CONTENT.POSITION_DELETES) files.positionDeletes.push(file_path);
      else throw new Error(`Iceberg table ${table} has equality deletes, which this reader does not apply`);
    }
  }
  return files;
}
