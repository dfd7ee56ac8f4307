/**
 * `Storage` on a local folder. Writes are atomic (temp file + rename in the same folder), and
 * every write or delete of a key holds a per-key lock file, so `ifMatch`/`ifNoneMatch` hold
 * even between processes sharing the folder.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { link, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PreconditionFailedError, StorageError } from '../errors.js';
import type { PutOptions, Storage, StorageStats, StoredObject } from './storage.js';

/** File-name prefix of the adapter's own files (temp files, locks); keys may not use it. */
const INTERNAL_PREFIX = '.~';
/**
 * A lock is held only around compare-and-rename (milliseconds, or the time to hash the current
 * object); one this old belongs to a writer that died, so it is broken.
 */
const STALE_LOCK_MS = 10_000;
/** How long a writer waits for a lock before giving up; longer than STALE_LOCK_MS so a stale lock is always broken first. */
const LOCK_WAIT_MS = 30_000;
const LOCK_RETRY_MIN_MS = 2;
const LOCK_RETRY_MAX_MS = 50;

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

const md5Hex = (body: Uint8Array): string => createHash('md5').update(body).digest('hex');
const errorCode = (error: unknown): string | undefined =>
  error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined;

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
      await mkdir(dirname(path), { recursive: true });
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
      await mkdir(dirname(path), { recursive: true });
      const handle = await open(temp, 'wx');
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
    for (const key of keys) {
      const path = this.#path(key);
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
  }

  /** Operations so far: one per put/get/delete call, one per list call. */
  stats(): StorageStats {
    return { ...this.#counts };
  }

  #path(key: string): string {
    return join(this.location, ...key.split('/'));
  }
}

/** A temp file beside `path`, for writing before an atomic rename. */
const tempPathFor = (path: string): string =>
  join(dirname(path), `${INTERNAL_PREFIX}${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);

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
  const handle = await open(path, 'wx');
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

/**
 * Runs `action` while holding the lock file `.~<name>.lock` beside `path`. The lock is created
 * with O_EXCL ('wx'), so one holder at a time across processes; a lock older than
 * STALE_LOCK_MS is broken.
 */
async function withKeyLock<T>(path: string, key: string, action: () => Promise<T>): Promise<T> {
  const lockPath = join(dirname(path), `${INTERNAL_PREFIX}${basename(path)}.lock`);
  const deadline = Date.now() + LOCK_WAIT_MS;
  let delay = LOCK_RETRY_MIN_MS;
  for (;;) {
    if (await tryCreateLock(lockPath)) break;
    if (await breakStaleLock(lockPath)) continue;
    if (Date.now() > deadline) {
      throw new StorageError(`${key} is locked by another writer (${lockPath})`, key, {
        retryable: true,
        hint: `if no exporter is running, delete ${lockPath}`,
      });
    }
    await sleep(delay * (0.5 + Math.random()));
    delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS);
  }
  try {
    return await action();
  } finally {
    await unlink(lockPath).catch(() => undefined); // gone only if broken as stale: nothing to release
  }
}

/** Creates the lock file; false when it exists already. */
async function tryCreateLock(lockPath: string): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await open(lockPath, 'wx');
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
  try {
    // Who holds it, for a person looking at a lock left behind.
    await handle.writeFile(`${process.pid}@${hostname()} ${new Date().toISOString()}\n`);
  } catch (error) {
    await unlink(lockPath).catch(() => undefined);
    throw error;
  } finally {
    await handle.close();
  }
  return true;
}

/** Removes the lock when it is stale; true when the caller should try to take it again. */
async function breakStaleLock(lockPath: string): Promise<boolean> {
  let modified: number;
  try {
    modified = (await stat(lockPath)).mtimeMs;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return true; // released meanwhile
    throw error;
  }
  if (Date.now() - modified < STALE_LOCK_MS) return false;
  // Move it aside first so that two breakers cannot both delete: only one rename succeeds.
  const aside = `${lockPath}.${randomBytes(6).toString('hex')}.stale`;
  try {
    await rename(lockPath, aside);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return true;
    throw error;
  }
  const moved = await stat(aside);
  if (Date.now() - moved.mtimeMs < STALE_LOCK_MS) {
    // Another breaker replaced the stale lock with a fresh one of a live writer between our stat
    // and rename: put it back (link fails if someone holds the name again, then theirs stands).
    await link(aside, lockPath).catch(() => undefined);
  }
  await unlink(aside);
  return true;
}
