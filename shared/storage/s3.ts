/**
 * `Storage` on an S3 bucket under a prefix. Small bodies and every conditional write go as one
 * PutObject; large unconditional bodies as a multipart upload (@aws-sdk/lib-storage).
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
import type { PutOptions, Storage, StorageStats, StoredObject } from './storage.js';

/** S3's smallest part (except the last), and lib-storage's default part size. */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
/** Above this, one PutObject would hold a whole Parquet file in one request: split it. */
export const DEFAULT_MULTIPART_THRESHOLD_BYTES = 16 * 1024 * 1024;
/** S3's limits: parts per upload, keys per ListObjectsV2 page and per DeleteObjects request. */
const MAX_PARTS = 10_000;
const MAX_KEYS_PER_REQUEST = 1000;
/** Part size of a streamed upload: 4 parts in flight hold 32 MiB, and a 256 MB file is 32 parts. */
export const STREAM_PART_BYTES = 8 * 1024 * 1024;
/** Parts in flight per multipart upload (lib-storage's default): 4 × 5 MiB buffered at most. */
const UPLOAD_QUEUE_SIZE = 4;

export interface S3StorageOptions {
  bucket: string;
  /** Key prefix of the output root, with or without a trailing `/`; default: the bucket's root. */
  prefix?: string;
  client: S3Client;
  /** Bodies larger than this go as a multipart upload (unless the put is conditional). At least 5 MiB; default 16 MiB. */
  multipartThresholdBytes?: number;
  /** Keys per ListObjectsV2 page, 1–1000 (default 1000); smaller only to test pagination. */
  listPageSize?: number;
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
    try {
      if (conditional || bytes.byteLength <= this.#threshold) {
        // Multipart uploads take no If-Match/If-None-Match on create, only on complete, and lib-storage
        // does not pass them there: a conditional write is always one PutObject (S3 takes up to 5 GB).
        if (options.ifMatch !== undefined) input.IfMatch = quoteEtag(options.ifMatch);
        if (options.ifNoneMatch !== undefined) input.IfNoneMatch = options.ifNoneMatch;
        this.#counts.writes += 1;
        const result = await this.#client.send(new PutObjectCommand(input));
        return { etag: unquoteEtag(result.ETag, key) };
      }
      return { etag: await this.#putMultipart(input, bytes.byteLength) };
    } catch (error) {
      // S3 answers an If-Match put of a key that has no object with 404 NoSuchKey: the object it
      // was to replace is gone, which is a lost race like any other.
      if (options.ifMatch !== undefined && (statusOf(error) === 404 || nameOf(error) === 'NoSuchKey')) {
        throw new PreconditionFailedError(key, { cause: error });
      }
      throw toStorageError(error, `cannot write ${this.location}/${key}`, key);
    }
  }

  async putStream(
    key: string,
    chunks: AsyncIterable<Uint8Array>,
    options: Pick<PutOptions, 'contentType'> = {},
  ): Promise<{ etag: string; bytes: number }> {
    assertValidKey(key);
    let bytes = 0;
    async function* counted(): AsyncGenerator<Uint8Array> {
      for await (const chunk of chunks) {
        bytes += chunk.byteLength;
        yield chunk;
      }
    }
    try {
      // lib-storage buffers parts of partSize (queueSize in flight) and sends a body shorter
      // than one part as a single PutObject.
      const upload = new Upload({
        client: this.#client,
        params: {
          Bucket: this.#bucket,
          Key: this.#prefix + key,
          Body: Readable.from(counted()),
          ContentType: options.contentType ?? contentTypeFor(key),
        },
        partSize: STREAM_PART_BYTES,
        queueSize: UPLOAD_QUEUE_SIZE,
      });
      const result = await upload.done();
      const parts = Math.ceil(bytes / STREAM_PART_BYTES);
      this.#counts.writes += parts > 1 ? parts + 2 : 1;
      return { etag: unquoteEtag(result.ETag, key), bytes };
    } catch (error) {
      throw toStorageError(error, `cannot write ${this.location}/${key}`, key);
    }
  }

  async get(key: string): Promise<StoredObject | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    try {
      const result = await this.#client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
      if (result.Body === undefined) throw new StorageError(`S3 sent no body for ${key}`, key);
      const body = await result.Body.transformToByteArray();
      return { body, etag: unquoteEtag(result.ETag, key) };
    } catch (error) {
      if (statusOf(error) === 404 || nameOf(error) === 'NoSuchKey') return undefined;
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

function toStorageError(error: unknown, message: string, key: string): StorageError {
  if (error instanceof StorageError) return error;
  const status = statusOf(error);
  const name = nameOf(error);
  // 412: If-Match/If-None-Match failed. 409 ConditionalRequestConflict: a concurrent
  // conditional write to the same key won while this one was in flight.
  if (status === 412 || name === 'PreconditionFailed' || name === 'ConditionalRequestConflict') {
    return new PreconditionFailedError(key, { cause: error });
  }
  // No status: the request got no answer (reset, timeout) after the SDK's own retries.
  const retryable = status === undefined || status === 429 || status >= 500;
  return new StorageError(`${message}: ${name ?? 'error'}${status ? ` (HTTP ${status})` : ''}`, key, {
    cause: error,
    retryable,
  });
}
