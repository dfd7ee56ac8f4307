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
