/**
 * A streamed upload to S3 in a memory fixed by the adapter, not by the object or the run: the
 * bytes are copied into part buffers that an `S3Storage` allocates once and reuses for every
 * upload ({@link PartBuffers}). A body of at most one part goes as one PutObject;
 * a longer one as a multipart upload with at most `inFlight` parts sent at once.
 *
 * Why not @aws-sdk/lib-storage's `Upload` for a stream: it joins the chunks of every part with
 * `Buffer.concat`, a new 8 MiB allocation per part (two while the remainder is cut off), 4 parts
 * in flight and one filling per upload, all garbage the collector takes when it gets to it; a
 * publish writes two uploads at once. Here the part memory is allocated once and is the same
 * for one part or ten thousand (BENCHMARKS.md, "S3 path memory").
 */
import {
  AbortMultipartUploadCommand,
  ChecksumAlgorithm,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { ConfigError } from '../errors.js';

/**
 * At most `count` part buffers of `partBytes`, each allocated when first needed and then kept
 * and reused for the pool's life (an `S3Storage`'s): never freed after a part, so the process
 * allocates no more part memory however many parts and uploads it writes.
 */
export class PartBuffers {
  readonly partBytes: number;
  readonly count: number;
  readonly #free: Buffer[] = [];
  readonly #waiting: ((buffer: Buffer) => void)[] = [];
  #allocated = 0;

  constructor(partBytes: number, count: number) {
    if (!Number.isInteger(count) || count < 1) throw new ConfigError('PartBuffers needs at least one buffer');
    this.partBytes = partBytes;
    this.count = count;
  }

  /** A buffer of `partBytes`, waiting until one is given back when all `count` are taken. */
  take(): Promise<Buffer> {
    const free = this.#free.pop();
    if (free !== undefined) return Promise.resolve(free);
    if (this.#allocated < this.count) {
      this.#allocated += 1;
      // Not zeroed: a part only ever sends the bytes copied into it.
      return Promise.resolve(Buffer.allocUnsafeSlow(this.partBytes));
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Gives a buffer back: to the longest waiting taker, or to the free list. */
  give(buffer: Buffer): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(buffer);
    else this.#free.push(buffer);
  }

  /** Bytes of the part buffers allocated so far: what the pool holds, at most `count × partBytes`. */
  get allocatedBytes(): number {
    return this.#allocated * this.partBytes;
  }
}

export interface UploadTarget {
  Bucket: string;
  Key: string;
  ContentType: string;
}

export interface UploadResult {
  /** The object's ETag as S3 sends it (quoted). */
  etag: string | undefined;
  bytes: number;
  /** Requests sent: 1 for a PutObject; create + parts + complete for a multipart upload. */
  requests: number;
}

/**
 * Uploads `chunks` to `target`, holding at most `inFlight` part buffers being sent plus the one
 * being filled, all from `buffers`. A body of at most one part is one PutObject (as lib-storage
 * sends it); a failed multipart upload is aborted, and the error rethrown.
 */
export async function uploadStream(
  client: S3Client,
  target: UploadTarget,
  chunks: AsyncIterable<Uint8Array>,
  buffers: PartBuffers,
  inFlight: number,
): Promise<UploadResult> {
  const parts: CompletedPart[] = [];
  const sending = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  let uploadId: Promise<string> | undefined;
  let part: Buffer | undefined;
  let filled = 0;
  let bytes = 0;
  let partNumber = 0;

  const createUpload = async (): Promise<string> => {
    // As lib-storage does: with the client's default (checksums WHEN_SUPPORTED) every part
    // carries a CRC32, and S3 wants the upload created with that algorithm.
    const checksums = await client.config.requestChecksumCalculation();
    const created = await client.send(
      new CreateMultipartUploadCommand({
        ...target,
        ...(checksums === 'WHEN_SUPPORTED' && { ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }),
      }),
    );
    if (created.UploadId === undefined) throw new Error(`S3 sent no UploadId for ${target.Key}`);
    return created.UploadId;
  };

  const sendPart = async (buffer: Buffer, length: number): Promise<void> => {
    while (sending.size >= inFlight) await Promise.race(sending);
    if (failure) {
      buffers.give(buffer);
      throw failure.error;
    }
    const number = ++partNumber;
    uploadId ??= createUpload();
    const sent = (async () => {
      const UploadId = await uploadId;
      const answer = await client.send(
        new UploadPartCommand({
          Bucket: target.Bucket,
          Key: target.Key,
          UploadId,
          PartNumber: number,
          Body: buffer.subarray(0, length),
        }),
      );
      if (answer.ETag === undefined) throw new Error(`S3 sent no ETag for part ${number} of ${target.Key}`);
      parts.push({
        PartNumber: number,
        ETag: answer.ETag,
        ...(answer.ChecksumCRC32 && { ChecksumCRC32: answer.ChecksumCRC32 }),
      });
    })()
      .catch((error: unknown) => {
        failure ??= { error };
      })
      .finally(() => {
        // The answer came (or the request was given up): the SDK holds the body no longer.
        buffers.give(buffer);
        sending.delete(sent);
      });
    sending.add(sent);
  };

  try {
    for await (const chunk of chunks) {
      bytes += chunk.byteLength;
      let offset = 0;
      while (offset < chunk.byteLength) {
        if (part !== undefined && filled === part.length) {
          // Full, and more bytes follow: a part (a body of exactly one part stays one PutObject).
          const full = part;
          part = undefined;
          await sendPart(full, filled);
          filled = 0;
        }
        part ??= await buffers.take();
        const n = Math.min(chunk.byteLength - offset, part.length - filled);
        part.set(chunk.subarray(offset, offset + n), filled);
        filled += n;
        offset += n;
      }
    }
    if (uploadId === undefined) {
      // One part or less: a single PutObject.
      const answer = await client.send(
        new PutObjectCommand({
          ...target,
          Body: part === undefined ? new Uint8Array(0) : part.subarray(0, filled),
        }),
      );
      return { etag: answer.ETag, bytes, requests: 1 };
    }
    if (part !== undefined) {
      const last = part;
      part = undefined;
      await sendPart(last, filled);
    }
    await Promise.all(sending);
    if (failure) throw failure.error;
    parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
    const done = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: target.Bucket,
        Key: target.Key,
        UploadId: await uploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    return { etag: done.ETag, bytes, requests: parts.length + 2 };
  } catch (error) {
    await Promise.allSettled(sending);
    if (uploadId !== undefined) {
      // Best effort: the bucket's lifecycle rule expires an upload this abort misses.
      const id = await uploadId.catch(() => undefined);
      if (id !== undefined) {
        await client
          .send(new AbortMultipartUploadCommand({ Bucket: target.Bucket, Key: target.Key, UploadId: id }))
          .catch(() => undefined);
      }
    }
    throw error;
  } finally {
    if (part !== undefined) buffers.give(part);
  }
}
