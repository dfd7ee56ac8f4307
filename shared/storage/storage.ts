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
  /**
   * When the storage stamped the object's last write, by the storage's own clock (S3's
   * LastModified, whole seconds); undefined where there is no clock but the writer's (a folder).
   */
  lastModified?: Date | undefined;
}

/** Counts of storage requests sent, for the run manifest and the benchmarks. */
export interface StorageStats {
  reads: number;
  writes: number;
  lists: number;
  deletes: number;
}

/** What `Storage.sweep` may remove. */
export interface SweepOptions {
  /**
   * Only leftovers untouched for this long: longer than any live writer leaves its temp file
   * unwritten (a folder writer waits up to 30 s for a key lock), so a write in progress is
   * never touched. An hour is a safe choice.
   */
  olderThanMs: number;
  /** The time to measure ages from. */
  now: Date;
}

export interface SweepResult {
  /** What was removed, relative to the root; folders end with `/`. */
  removed: string[];
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
  /** Reads one object whole; `undefined` when there is none. For objects of a bounded size: see `getStream`. */
  get(key: string): Promise<StoredObject | undefined>;
  /**
   * Reads one object as a stream of chunks, holding only what is in transit (S3: the response
   * body as it arrives; folder: the file in chunks of 1 MiB), whatever the object's size;
   * `undefined` when there is none. Errors while reading are `StorageError`s. A reader that
   * stops before the end ends its iteration (`for await` with `break`, or `return()`), which
   * frees the connection or file handle; a stream opened and never read must be ended so too.
   *
   * @example
   * const chunks = await storage.getStream('raw/reports/dt=2026-11-26/r-0.jsonl.gz');
   * if (chunks) for await (const chunk of chunks) out.write(chunk);
   */
  getStream(key: string): Promise<AsyncIterable<Uint8Array> | undefined>;
  /**
   * Reads the bytes `[start, end)` of one object (fewer when it is shorter); `undefined` when
   * there is none. Optional, for readers that need a few parts of a large object (a Parquet
   * footer, one column chunk): {@link readRange} falls back to `get` without it.
   */
  getRange?(key: string, start: number, end: number): Promise<Uint8Array | undefined>;
  /** Every key under a prefix, in lexicographic order. */
  list(prefix: string): AsyncIterable<string>;
  /** Deletes keys; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  /** Requests sent so far. */
  stats(): StorageStats;
  /**
   * Removes the adapter's own leftovers: temp files of writes that never completed (the
   * process was killed), older than `olderThanMs` so that a live writer's temp file is never
   * touched, and the empty folders it made (never the root). Keys are never touched. Safe to
   * run while other processes write. Optional: S3 has no such leftovers — an incomplete
   * multipart upload is expired by the bucket's lifecycle rule — so `S3Storage` has none.
   *
   * @example
   * await storage.sweep?.({ olderThanMs: 3_600_000, now: new Date() });
   */
  sweep?(options: SweepOptions): Promise<SweepResult>;
}

/** Every key under a prefix, as an array (for prefixes known to be small: one run's records). */
export async function listAll(storage: Storage, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storage.list(prefix)) keys.push(key);
  return keys;
}

/**
 * The bytes `[start, end)` of one object: a ranged read where the adapter has one, otherwise
 * the whole object cut (a wrapper made for tests may not forward `getRange`).
 */
export async function readRange(
  storage: Storage,
  key: string,
  start: number,
  end: number,
): Promise<Uint8Array | undefined> {
  if (storage.getRange) return storage.getRange(key, start, end);
  return (await storage.get(key))?.body.subarray(start, end);
}
