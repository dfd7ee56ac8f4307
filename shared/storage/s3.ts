/**
 * `Storage` on an S3 bucket under a prefix. Small bodies and every conditional write go as one
 * PutObject; large unconditional bodies as a multipart upload (@aws-sdk/lib-storage, which cuts
 * a body held whole into parts without copying); streamed bodies through part buffers the
 * adapter allocates once (`s3-upload.ts`). `get` buffers an object whole (for small ones:
 * records, staged files of one unit); `getStream` hands a large one over as its response body
 * arrives.
 */

import { Readable } from 'node:stream';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type PutObjectCommandInput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { ConfigError, PreconditionFailedError, StorageError } from '../errors.js';
import { assertValidKey, assertValidPrefix } from './local.js';
import { readableBytes, readableChunks } from './read-stream.js';
import { PartBuffers, uploadStream } from './s3-upload.js';
import type { PutOptions, Storage, StorageStats, StoredObject } from './storage.js';

/** S3's smallest part (except the last), and lib-storage's default part size. */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
/** Above this, one PutObject would hold a whole Parquet file in one request: split it. */
export const DEFAULT_MULTIPART_THRESHOLD_BYTES = 16 * 1024 * 1024;
/** S3's limits: parts per upload, keys per ListObjectsV2 page and per DeleteObjects request. */
const MAX_PARTS = 10_000;
const MAX_KEYS_PER_REQUEST = 1000;
/** Part size of a streamed upload: a 256 MB file is 32 parts. */
export const STREAM_PART_BYTES = 8 * 1024 * 1024;
/** Parts in flight per multipart upload (lib-storage's default). */
const UPLOAD_QUEUE_SIZE = 4;
/**
 * Part buffers of one adapter, shared by all its streamed uploads: 6 × 8 MiB = 48 MiB, whatever
 * the number of uploads at once, their size or the run's. Publish writes two outputs at once:
 * each fills one part while others are sent (up to UPLOAD_QUEUE_SIZE); S3 takes a part faster
 * than a publish makes the next (a regroup makes a few MB/s of Parquet).
 */
export const STREAM_PART_BUFFERS = 6;
/**
 * Tries of a conditional write that S3 answers 409 ConditionalRequestConflict (another
 * conditional write to the key was in flight; S3's documented answer is "retry"), and the
 * first backoff, doubled each try.
 */
const CONFLICT_TRIES = 5;
const CONFLICT_BACKOFF_MS = 100;

export interface S3StorageOptions {
  bucket: string;
  /** Key prefix of the output root, with or without a trailing `/`; default: the bucket's root. */
  prefix?: string;
  client: S3Client;
  /** Bodies larger than this go as a multipart upload (unless the put is conditional). At least 5 MiB; default 16 MiB. */
  multipartThresholdBytes?: number;
  /** Keys per ListObjectsV2 page, 1–1000 (default 1000); smaller only to test pagination. */
  listPageSize?: number;
  /** Waits between tries of a conflicting conditional write; default a timer (a simulation passes its own). */
  sleep?: (ms: number) => Promise<void>;
}

/** Content-Type from the key's extension. `.jsonl.gz` is stored as the gzip bytes it is: no Content-Encoding. */
export function contentTypeFor(key: string): string {
  if (key.endsWith('.json')) return 'application/json';
  if (key.endsWith('.jsonl') || key.endsWith('.ndjson')) return 'application/x-ndjson';
  // Not Content-Encoding: gzip — HTTP clients would then unzip on download, and Athena and the
  // ingestion expect the .gz bytes as written.
  if (key.endsWith('.gz')) return 'application/gzip';
  if (key.endsWith('.parquet')) return 'application/vnd.apache.parquet';
  return 'application/octet-stream';
}

/** S3 storage. `location` is `s3://bucket/prefix`. */
export class S3Storage implements Storage {
  readonly location: string;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #client: S3Client;
  readonly #threshold: number;
  readonly #pageSize: number;
  readonly #counts: StorageStats = { reads: 0, writes: 0, lists: 0, deletes: 0 };
  readonly #sleep: (ms: number) => Promise<void>;
  /** Allocated on the first streamed upload, then reused by every one. */
  readonly #parts = new PartBuffers(STREAM_PART_BYTES, STREAM_PART_BUFFERS);

  constructor(options: S3StorageOptions) {
    if (options.bucket === '') throw new ConfigError('S3Storage needs a bucket name');
    this.#bucket = options.bucket;
    this.#prefix = normalizePrefix(options.prefix ?? '');
    this.#client = options.client;
    this.#threshold = options.multipartThresholdBytes ?? DEFAULT_MULTIPART_THRESHOLD_BYTES;
    if (this.#threshold < MIN_PART_BYTES) {
      throw new ConfigError(
        `multipartThresholdBytes ${this.#threshold} is below S3's 5 MiB minimum part size: such a body is one part anyway`,
      );
    }
    this.#pageSize = options.listPageSize ?? MAX_KEYS_PER_REQUEST;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    if (!Number.isInteger(this.#pageSize) || this.#pageSize < 1 || this.#pageSize > MAX_KEYS_PER_REQUEST) {
      throw new ConfigError(`listPageSize must be an integer from 1 to ${MAX_KEYS_PER_REQUEST}`);
    }
    this.location = `s3://${this.#bucket}${this.#prefix === '' ? '' : `/${this.#prefix.slice(0, -1)}`}`;
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<{ etag: string }> {
    assertValidKey(key);
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const input: PutObjectCommandInput = {
      Bucket: this.#bucket,
      Key: this.#prefix + key,
      Body: bytes,
      ContentType: options.contentType ?? contentTypeFor(key),
    };
    const conditional = options.ifMatch !== undefined || options.ifNoneMatch !== undefined;
    if (!conditional && bytes.byteLength > this.#threshold) {
      try {
        return { etag: await this.#putMultipart(input, bytes.byteLength) };
      } catch (error) {
        throw toStorageError(error, `cannot write ${this.location}/${key}`, key);
      }
    }
    // Multipart uploads take no If-Match/If-None-Match on create, only on complete, and lib-storage
    // does not pass them there: a conditional write is always one PutObject (S3 takes up to 5 GB).
    if (options.ifMatch !== undefined) input.IfMatch = quoteEtag(options.ifMatch);
    if (options.ifNoneMatch !== undefined) input.IfNoneMatch = options.ifNoneMatch;
    for (let attempt = 1; ; attempt++) {
      try {
        this.#counts.writes += 1;
        const result = await this.#client.send(new PutObjectCommand(input));
        return { etag: unquoteEtag(result.ETag, key) };
      } catch (error) {
        if (conditional && nameOf(error) === 'ConditionalRequestConflict' && attempt < CONFLICT_TRIES) {
          await this.#sleep(CONFLICT_BACKOFF_MS * 2 ** (attempt - 1));
          continue;
        }
        if (conditional && preconditionFailed(error, options)) {
          // The SDK retries a PUT whose answer was lost; if the first one applied, the retry meets
          // our own object and S3 answers 412. Our bytes in place mean the write is ours.
          const own = await this.#ownObject(key, bytes);
          if (own !== undefined) return { etag: own };
          throw new PreconditionFailedError(key, { cause: error });
        }
        throw toStorageError(error, `cannot write ${this.location}/${key}`, key);
      }
    }
  }

  /**
   * The ETag of the object at `key` when it holds exactly `bytes`: a conditional write that
   * seemed to lose found its own object. Callers put a token of theirs in every conditional
   * body (a run id, a random token), so equal bytes are their write and no one else's.
   */
  async #ownObject(key: string, bytes: Uint8Array): Promise<string | undefined> {
    const found = await this.get(key);
    return found !== undefined && Buffer.from(found.body).equals(Buffer.from(bytes)) ? found.etag : undefined;
  }

  async putStream(
    key: string,
    chunks: AsyncIterable<Uint8Array>,
    options: Pick<PutOptions, 'contentType'> = {},
  ): Promise<{ etag: string; bytes: number }> {
    assertValidKey(key);
    try {
      const target = {
        Bucket: this.#bucket,
        Key: this.#prefix + key,
        ContentType: options.contentType ?? contentTypeFor(key),
      };
      const result = await uploadStream(this.#client, target, chunks, this.#parts, UPLOAD_QUEUE_SIZE);
      this.#counts.writes += result.requests;
      return { etag: unquoteEtag(result.etag, key), bytes: result.bytes };
    } catch (error) {
      throw toStorageError(error, `cannot write ${this.location}/${key}`, key);
    }
  }

  /** Bytes the adapter holds for streamed uploads' parts (allocated once, reused): the bound of `putStream`'s memory. */
  get streamBufferBytes(): number {
    return this.#parts.allocatedBytes;
  }

  async get(key: string): Promise<StoredObject | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    try {
      const result = await this.#client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
      if (result.Body === undefined) throw new StorageError(`S3 sent no body for ${key}`, key);
      // In Node: into one buffer of the announced size (the SDK's own collects the chunks, then copies them).
      const body =
        result.Body instanceof Readable && result.ContentLength !== undefined
          ? await readableBytes(result.Body, result.ContentLength, (error) =>
              toStorageError(error, `cannot read ${this.location}/${key}`, key),
            )
          : await result.Body.transformToByteArray();
      return {
        body,
        etag: unquoteEtag(result.ETag, key),
        ...(result.LastModified ? { lastModified: result.LastModified } : {}),
      };
    } catch (error) {
      if (statusOf(error) === 404 || nameOf(error) === 'NoSuchKey') return undefined;
      throw toStorageError(error, `cannot read ${this.location}/${key}`, key);
    }
  }

  async getStream(key: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    const failed = (error: unknown) => toStorageError(error, `cannot read ${this.location}/${key}`, key);
    try {
      const result = await this.#client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
      // In Node the SDK's body is the response itself (an IncomingMessage): read as it arrives.
      if (result.Body instanceof Readable) return readableChunks(result.Body, failed);
      // A body that is no Node stream (another runtime's, the simulation's bucket): read whole.
      const body = result.Body;
      if (body === undefined) throw new StorageError(`S3 sent no body for ${key}`, key);
      return {
        async *[Symbol.asyncIterator]() {
          yield await body.transformToByteArray().catch((error: unknown) => {
            throw failed(error);
          });
        },
      };
    } catch (error) {
      if (statusOf(error) === 404 || nameOf(error) === 'NoSuchKey') return undefined;
      throw failed(error);
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array | undefined> {
    assertValidKey(key);
    if (end <= start) return new Uint8Array(0);
    this.#counts.reads += 1;
    try {
      const result = await this.#client.send(
        new GetObjectCommand({
          Bucket: this.#bucket,
          Key: this.#prefix + key,
          Range: `bytes=${start}-${end - 1}`,
        }),
      );
      if (result.Body === undefined) throw new StorageError(`S3 sent no body for ${key}`, key);
      const body = await result.Body.transformToByteArray();
      // A server that ignores Range answers the whole object (200, no Content-Range): cut it.
      return result.ContentRange === undefined && body.length > end - start
        ? body.subarray(start, end)
        : body;
    } catch (error) {
      if (statusOf(error) === 404 || nameOf(error) === 'NoSuchKey') return undefined;
      // A range past the end of a non-empty object: nothing there (as a file read returns).
      if (statusOf(error) === 416) return new Uint8Array(0);
      throw toStorageError(error, `cannot read ${this.location}/${key}`, key);
    }
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertValidPrefix(prefix);
    let continuationToken: string | undefined;
    do {
      this.#counts.lists += 1;
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.#listPage(prefix, continuationToken);
      } catch (error) {
        throw toStorageError(error, `cannot list ${this.location}/${prefix}`, prefix);
      }
      for (const object of page.Contents ?? []) {
        // ListObjectsV2 already returns keys in UTF-8 byte order, which is the order promised.
        if (object.Key !== undefined) yield object.Key.slice(this.#prefix.length);
      }
      continuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (continuationToken !== undefined);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) assertValidKey(key);
    for (let start = 0; start < keys.length; start += MAX_KEYS_PER_REQUEST) {
      const chunk = keys.slice(start, start + MAX_KEYS_PER_REQUEST);
      this.#counts.deletes += 1;
      let errors: Array<{ Key?: string; Code?: string; Message?: string }>;
      try {
        const result = await this.#client.send(
          new DeleteObjectsCommand({
            Bucket: this.#bucket,
            // Quiet: the answer lists only the keys that failed; a missing key is not one of them.
            Delete: { Objects: chunk.map((key) => ({ Key: this.#prefix + key })), Quiet: true },
          }),
        );
        errors = result.Errors ?? [];
      } catch (error) {
        throw toStorageError(error, `cannot delete ${chunk.length} keys under ${this.location}`, chunk[0]!);
      }
      const first = errors[0];
      if (first !== undefined) {
        const key = (first.Key ?? '').slice(this.#prefix.length);
        throw new StorageError(
          `cannot delete ${errors.length} of ${chunk.length} keys under ${this.location}, first ${key}: ${first.Code} ${first.Message}`,
          key,
          { retryable: first.Code === 'InternalError' || first.Code === 'SlowDown' },
        );
      }
    }
  }

  /** Requests sent so far: a multipart upload counts its create, every part and its complete as writes. */
  stats(): StorageStats {
    return { ...this.#counts };
  }

  #listPage(prefix: string, continuationToken: string | undefined): Promise<ListObjectsV2CommandOutput> {
    return this.#client.send(
      new ListObjectsV2Command({
        Bucket: this.#bucket,
        Prefix: this.#prefix + prefix,
        MaxKeys: this.#pageSize,
        ContinuationToken: continuationToken,
      }),
    );
  }

  async #putMultipart(input: PutObjectCommandInput, size: number): Promise<string> {
    // The part size is set here rather than left to lib-storage so that the request count is known.
    const partSize = Math.max(MIN_PART_BYTES, Math.ceil(size / MAX_PARTS));
    // size > threshold ≥ 5 MiB, so at least two parts: lib-storage never falls back to one PutObject.
    const parts = Math.ceil(size / partSize);
    this.#counts.writes += parts + 2; // CreateMultipartUpload + UploadPart × parts + CompleteMultipartUpload
    const upload = new Upload({
      client: this.#client,
      params: input,
      partSize,
      queueSize: UPLOAD_QUEUE_SIZE,
    });
    const result = await upload.done();
    return unquoteEtag(result.ETag, input.Key ?? '');
  }
}

function normalizePrefix(prefix: string): string {
  if (prefix === '') return '';
  const trimmed = prefix.replace(/^\/+/, '').replace(/\/+$/, '');
  if (trimmed === '') return '';
  try {
    assertValidKey(trimmed);
  } catch (error) {
    throw new ConfigError(`S3 prefix ${prefix} is not a valid key prefix`, { cause: error });
  }
  return `${trimmed}/`;
}

/** ETags travel quoted in HTTP; the Storage interface hands them out bare, like LocalStorage. */
function unquoteEtag(etag: string | undefined, key: string): string {
  if (etag === undefined) throw new StorageError(`S3 sent no ETag for ${key}`, key);
  return etag.replace(/^"(.*)"$/, '$1');
}

function quoteEtag(etag: string): string {
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null || !('$metadata' in error)) return undefined;
  const metadata = error.$metadata as { httpStatusCode?: number } | undefined;
  return metadata?.httpStatusCode;
}

function nameOf(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined;
}

/**
 * 412 PreconditionFailed: the object is not the one the condition named. S3 answers an
 * If-Match put of a key that has no object with 404 NoSuchKey: the object it was to replace is
 * gone, which is a lost race like any other.
 */
function preconditionFailed(error: unknown, options: PutOptions): boolean {
  const status = statusOf(error);
  if (status === 412 || nameOf(error) === 'PreconditionFailed') return true;
  return options.ifMatch !== undefined && (status === 404 || nameOf(error) === 'NoSuchKey');
}

function toStorageError(error: unknown, message: string, key: string): StorageError {
  if (error instanceof StorageError) return error;
  const status = statusOf(error);
  const name = nameOf(error);
  // 409 ConditionalRequestConflict after its tries: not a lost race (nothing says another write
  // won), so it is retryable like a 503 and never taken for a precondition failure.
  // No status: the request got no answer (reset, timeout) after the SDK's own retries.
  const retryable = status === undefined || status === 409 || status === 429 || status >= 500;
  return new StorageError(`${message}: ${name ?? 'error'}${status ? ` (HTTP ${status})` : ''}`, key, {
    cause: error,
    retryable,
  });
}
