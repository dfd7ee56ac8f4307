/**
 * `Storage` on a local folder. Writes are atomic (temp file + rename in the same folder), and
 * every write or delete of a key holds a per-key lock file, so `ifMatch`/`ifNoneMatch` hold
 * even between processes sharing the folder.
 */
import { createHash } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { PreconditionFailedError, StorageError } from '../errors.js';
import { createInFolder, errorCode, INTERNAL_PREFIX, tempPathFor, withKeyLock } from './local-files.js';
import { removeEmptyFolders, sweepTree } from './local-sweep.js';
import { readableChunks } from './read-stream.js';
import type {
  PutOptions,
  Storage,
  StorageStats,
  StoredObject,
  SweepOptions,
  SweepResult,
} from './storage.js';

/**
 * Throws `StorageError` unless `key` is a safe relative key: non-empty, `/`-separated, no
 * leading or trailing `/`, no empty, `.` or `..` segment, no NUL, no segment starting with `.~`
 * (reserved for the local adapter's temp and lock files). Both adapters apply it, so a key that
 * works on S3 also works on a folder.
 */
export function assertValidKey(key: string): void {
  if (key === '') throw new StorageError('empty storage key', key);
  if (key.includes('\0') || key.includes('\\')) {
    throw new StorageError(`storage key ${JSON.stringify(key)} contains a NUL or a backslash`, key);
  }
  if (key.startsWith('/')) throw new StorageError(`storage key ${key} must be relative (no leading /)`, key);
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..' || segment.startsWith(INTERNAL_PREFIX)) {
      throw new StorageError(
        `storage key ${key} has an empty, '.', '..' or '${INTERNAL_PREFIX}…' segment`,
        key,
      );
    }
  }
}

/** Like `assertValidKey`, for a `list()` prefix: may be empty and may end with `/`. */
export function assertValidPrefix(prefix: string): void {
  if (prefix === '') return;
  assertValidKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}

/** S3's order: keys compare as UTF-8 bytes. */
export const compareKeys = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Chunk size of `getStream` on a folder: few reads per file, little held per stream. */
const READ_CHUNK_BYTES = 1024 * 1024;

const md5Hex = (body: Uint8Array): string => createHash('md5').update(body).digest('hex');

/** Local-folder storage. `location` is the folder's absolute path. */
export class LocalStorage implements Storage {
  readonly location: string;
  readonly #counts: StorageStats = { reads: 0, writes: 0, lists: 0, deletes: 0 };

  /** @param rootDir the output folder; created on the first write. */
  constructor(rootDir: string) {
    this.location = resolve(rootDir);
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<{ etag: string }> {
    assertValidKey(key);
    this.#counts.writes += 1;
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const path = this.#path(key);
    const etag = md5Hex(bytes);
    const temp = tempPathFor(path);
    try {
      // The body goes to disk before the lock is taken: the lock only covers compare-and-rename.
      await writeDurably(temp, bytes);
      await withKeyLock(path, key, async () => {
        if (options.ifMatch !== undefined || options.ifNoneMatch !== undefined) {
          const current = await readIfExists(path);
          const currentEtag = current === undefined ? undefined : md5Hex(current);
          if (options.ifNoneMatch === '*' && currentEtag !== undefined) {
            throw new PreconditionFailedError(key);
          }
          if (options.ifMatch !== undefined && options.ifMatch !== currentEtag) {
            throw new PreconditionFailedError(key);
          }
        }
        await rename(temp, path);
      });
      return { etag };
    } catch (error) {
      await unlink(temp).catch(() => undefined); // best effort: it may already be renamed or never written
      throw wrap(error, `cannot write ${key} in ${this.location}`, key);
    }
  }

  async putStream(key: string, chunks: AsyncIterable<Uint8Array>): Promise<{ etag: string; bytes: number }> {
    assertValidKey(key);
    this.#counts.writes += 1;
    const path = this.#path(key);
    const temp = tempPathFor(path);
    const hash = createHash('md5');
    let bytes = 0;
    try {
      const handle = await createInFolder(temp);
      try {
        for await (const chunk of chunks) {
          await handle.write(chunk);
          hash.update(chunk);
          bytes += chunk.byteLength;
        }
        await handle.sync();
      } finally {
        await handle.close();
      }
      // No precondition to check, so no key lock: the rename alone replaces the object atomically.
      await rename(temp, path);
      return { etag: hash.digest('hex'), bytes };
    } catch (error) {
      await unlink(temp).catch(() => undefined); // best effort: it may already be renamed or never written
      throw wrap(error, `cannot write ${key} in ${this.location}`, key);
    }
  }

  async get(key: string): Promise<StoredObject | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    try {
      const body = await readIfExists(this.#path(key));
      return body === undefined ? undefined : { body, etag: md5Hex(body) };
    } catch (error) {
      throw wrap(error, `cannot read ${key} in ${this.location}`, key);
    }
  }

  async getStream(key: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    const failed = (error: unknown) => wrap(error, `cannot read ${key} in ${this.location}`, key);
    try {
      const handle = await open(this.#path(key), 'r').catch((error: unknown) => {
        const code = errorCode(error);
        if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
        throw error;
      });
      if (!handle) return undefined;
      // A folder opens for reading too; like `get`, it is not an object.
      const isFile = await handle.stat().then(
        (stats) => stats.isFile(),
        async (error: unknown) => {
          await handle.close();
          throw error;
        },
      );
      if (!isFile) {
        await handle.close();
        return undefined;
      }
      return readableChunks(handle.createReadStream({ highWaterMark: READ_CHUNK_BYTES }), failed);
    } catch (error) {
      throw failed(error);
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array | undefined> {
    assertValidKey(key);
    this.#counts.reads += 1;
    try {
      const handle = await open(this.#path(key), 'r').catch((error: unknown) => {
        if (errorCode(error) === 'ENOENT') return undefined;
        throw error;
      });
      if (!handle) return undefined;
      try {
        const buffer = Buffer.alloc(Math.max(0, end - start));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
        return buffer.subarray(0, bytesRead);
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw wrap(error, `cannot read ${key} in ${this.location}`, key);
    }
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertValidPrefix(prefix);
    this.#counts.lists += 1;
    // Walk only the deepest folder the prefix names; the rest of the prefix filters names.
    const folder = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    const keys: string[] = [];
    try {
      await walk(this.location, folder, prefix, keys);
    } catch (error) {
      throw wrap(error, `cannot list ${prefix} in ${this.location}`, prefix);
    }
    keys.sort(compareKeys);
    yield* keys;
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) assertValidKey(key);
    if (keys.length === 0) return;
    this.#counts.deletes += 1;
    const folders = new Set<string>();
    for (const key of keys) {
      const path = this.#path(key);
      folders.add(dirname(path));
      try {
        await withKeyLock(path, key, async () => {
          await unlink(path).catch((error: unknown) => {
            if (errorCode(error) !== 'ENOENT') throw error;
          });
        });
      } catch (error) {
        // No folder, so no object to delete (the lock file could not be created in it).
        const code = errorCode(error);
        if (code === 'ENOENT' || code === 'ENOTDIR') continue;
        throw wrap(error, `cannot delete ${key} in ${this.location}`, key);
      }
    }
    // Folders exist only to hold keys (S3 has none): a folder emptied here goes, up to the root.
    // A writer about to create a file in one re-makes it (see local-sweep.ts).
    try {
      await removeEmptyFolders(this.location, folders);
    } catch (error) {
      throw wrap(error, `cannot remove emptied folders in ${this.location}`, keys[0]!);
    }
  }

  /**
   * Removes temp files and key locks of killed writers untouched for `olderThanMs`, and empty
   * folders (never the root). Not counted in `stats()`: no request of S3's has its like.
   * See local-sweep.ts for why it is safe beside live writers.
   */
  async sweep(options: SweepOptions): Promise<SweepResult> {
    if (!Number.isFinite(options.olderThanMs) || options.olderThanMs < 0) {
      throw new RangeError(`sweep olderThanMs must be a finite age, not ${options.olderThanMs}`);
    }
    try {
      return { removed: await sweepTree(this.location, options) };
    } catch (error) {
      throw wrap(error, `cannot sweep ${this.location}`, '');
    }
  }

  /** Operations so far: one per put/get/delete call, one per list call. */
  stats(): StorageStats {
    return { ...this.#counts };
  }

  #path(key: string): string {
    return join(this.location, ...key.split('/'));
  }
}

function wrap(error: unknown, message: string, key: string): StorageError {
  if (error instanceof StorageError) return error;
  const code = errorCode(error);
  return new StorageError(code ? `${message}: ${code}` : message, key, {
    cause: error,
    // Out of space, too many open files or a busy lock may pass; a missing permission will not.
    retryable: code === 'ENOSPC' || code === 'EMFILE' || code === 'ENFILE' || code === 'EBUSY',
  });
}

async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await createInFolder(path);
  try {
    await handle.writeFile(bytes);
    // Flushed before the rename, so a crash never leaves a renamed but empty file.
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function readIfExists(path: string): Promise<Uint8Array | undefined> {
  try {
    const buffer = await readFile(path);
    // A plain Uint8Array, as from S3: a caller relying on Buffer methods would break there.
    return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  } catch (error) {
    // EISDIR: the key names a folder (other keys live under it), which is not an object, as on S3.
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

async function walk(root: string, folder: string, prefix: string, keys: string[]): Promise<void> {
  let entries: Dirent[];
  try {
    entries = await readdir(folder === '' ? root : join(root, ...folder.split('/')), { withFileTypes: true });
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return;
    throw error;
  }
  for (const entry of entries) {
    if (entry.name.startsWith(INTERNAL_PREFIX)) continue;
    const key = folder === '' ? entry.name : `${folder}/${entry.name}`;
    if (entry.isDirectory()) {
      // Descend when the folder can hold matches: the prefix runs into it, or it is inside the prefix.
      if (`${key}/`.startsWith(prefix) || prefix.startsWith(`${key}/`)) await walk(root, key, prefix, keys);
    } else if (entry.isFile() && key.startsWith(prefix)) {
      keys.push(key);
    }
  }
}
