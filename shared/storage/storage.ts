/**
 * The one storage interface of the exporter. Keys are relative to the output root (a local
 * folder or an S3 prefix) and always use `/`. Adapters: `LocalStorage` (local.ts), `S3Storage` (s3.ts).
 */

export interface PutOptions {
  contentType?: string;
  /** Write only if the object's current ETag is this one (optimistic concurrency). */
  ifMatch?: string;
  /** Write only if no object exists at the key. */
  ifNoneMatch?: '*';
}

export interface StoredObject {
  body: Uint8Array;
  etag: string;
}

/** Counts of storage requests sent, for the run manifest and the benchmarks. */
export interface StorageStats {
  reads: number;
  writes: number;
  lists: number;
  deletes: number;
}

export interface Storage {
  /** Where the root is, for people: `/abs/path` or `s3://bucket/prefix`. */
  readonly location: string;
  /**
   * Writes one object whole. With `ifMatch`/`ifNoneMatch`, a lost race throws
   * `PreconditionFailedError`. Returns the new ETag.
   */
  put(key: string, body: Uint8Array | string, options?: PutOptions): Promise<{ etag: string }>;
  /**
   * Writes one object from a stream of chunks, holding only a bounded part of it in memory
   * (S3: a multipart upload; folder: a temp file renamed into place). Unconditional: for
   * large, deterministic objects that may be written again whole. Returns the ETag and size.
   */
  putStream(
    key: string,
    chunks: AsyncIterable<Uint8Array>,
    options?: Pick<PutOptions, 'contentType'>,
  ): Promise<{ etag: string; bytes: number }>;
  /** Reads one object; `undefined` when there is none. */
  get(key: string): Promise<StoredObject | undefined>;
  /** Every key under a prefix, in lexicographic order. */
  list(prefix: string): AsyncIterable<string>;
  /** Deletes keys; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  /** Requests sent so far. */
  stats(): StorageStats;
  /**
   * Removes the adapter's own leftovers: temp files of writes that never completed, older than
   * `olderThanMs` (a live writer's are younger), and empty folders it made. S3 has none
   * (incomplete multipart uploads expire by the bucket's lifecycle rule).
   */
  sweep?(options: { olderThanMs: number; now: Date }): Promise<{ removed: string[] }>;
}

/** Every key under a prefix, as an array (for prefixes known to be small: one run's records). */
export async function listAll(storage: Storage, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storage.list(prefix)) keys.push(key);
  return keys;
}
