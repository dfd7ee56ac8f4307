/**
 * An object's bytes as a stream for `Storage.getStream`, from a Node `Readable` (an S3
 * response body, a file's read stream): chunks as they arrive, errors as `StorageError`, and
 * the source destroyed when the reader stops early (`return()`), so that a stream opened and
 * never read to its end frees its socket or file handle.
 */
import type { Readable } from 'node:stream';
import type { StorageError } from '../errors.js';

/** Wraps `source`; `wrap` turns an error of the source into the adapter's `StorageError`. */
export function readableChunks(
  source: Readable,
  wrap: (error: unknown) => StorageError,
): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
      const chunks = source[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>;
      return {
        async next() {
          try {
            return await chunks.next();
          } catch (error) {
            throw wrap(error);
          }
        },
        async return() {
          source.destroy();
          return { done: true, value: undefined };
        },
      };
    },
  };
}

/**
 * Reads `source` whole into one buffer of `length` bytes (an S3 response's Content-Length), so
 * that an object is held once rather than as its chunks and then their concatenation. A source
 * that sends another number of bytes is an error (the response was cut or is not what it said).
 */
export async function readableBytes(
  source: Readable,
  length: number,
  wrap: (error: unknown) => StorageError,
): Promise<Uint8Array> {
  const body = Buffer.allocUnsafe(length);
  let filled = 0;
  try {
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      if (filled + chunk.byteLength > length) throw new Error(`more than the ${length} bytes announced`);
      body.set(chunk, filled);
      filled += chunk.byteLength;
    }
  } catch (error) {
    throw wrap(error);
  }
  if (filled !== length) throw wrap(new Error(`${filled} of the ${length} bytes announced`));
  // A plain Uint8Array, as the SDK's own reading hands out.
  return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
}
