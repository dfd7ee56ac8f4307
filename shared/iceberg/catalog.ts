/**
 * An Iceberg catalog, as the commit needs it: where a table's current metadata file is, and an
 * atomic swap of that pointer. Two implementations: the file catalog (a folder or S3 without
 * Glue: the pointer is the highest `vN.metadata.json`, swapped by a create-if-absent of the
 * next one) and the Glue catalog (the table's `metadata_location` parameter, swapped by
 * `UpdateTable` with the `VersionId` read, optimistic concurrency).
 */
import type { TableMetadata } from './types.js';

/** A table's pointer as read: what a commit builds on and swaps from. */
export interface CatalogTable {
  /** The table, as the exporter names it (`reports`, `reports_current`, ...). */
  name: string;
  /** Location of the current metadata file; undefined when the table has none yet. */
  metadataLocation: string | undefined;
  /** The current metadata, read from `metadataLocation`; undefined when there is none. */
  metadata: TableMetadata | undefined;
  /**
   * The catalog's version of the pointer, for the swap: the file catalog's `N` of `vN`, Glue's
   * `VersionId`. Opaque to the caller.
   */
  version: string;
}

/** The result of one swap attempt. */
export type CommitResult =
  | { committed: true; metadataLocation: string }
  /** Another writer moved the pointer since `base` was read: load again and rebase. */
  | { committed: false };

/**
 * Which catalog an output's Iceberg tables are registered in, as the output records it beside
 * its table format (`state/table-format.json`): enough for another writer (the CLI) to commit to
 * the same one. Glue: the database and its region (the Data Catalog of the caller's account).
 */
export type CatalogRef = { kind: 'file' } | { kind: 'glue'; database: string; region: string };

export interface IcebergCatalog {
  /** Which catalog, for logs and the run manifest: `file` or `glue`. */
  readonly kind: 'file' | 'glue';
  /** What the output records of this catalog when a run of it publishes. */
  ref(): Promise<CatalogRef>;
  /** The table's location (the root of its `metadata/` and `data/`), a URI: `s3://…` or `/abs/path`. */
  tableLocation(table: string): string;
  /** Reads the table's pointer and current metadata. */
  load(table: string): Promise<CatalogTable>;
  /**
   * Writes `metadata` as the table's next metadata file and makes it current if the pointer is
   * still `base`'s. `{ committed: false }` when another writer got there first. An answer lost
   * after the swap applied is resolved inside (the pointer is read back: if it names the file
   * this call wrote, the commit is this call's). Throws only when it cannot tell (a retryable
   * error: the caller's retry loads again and finds its snapshot or rebases).
   */
  commit(base: CatalogTable, metadata: TableMetadata): Promise<CommitResult>;
}
