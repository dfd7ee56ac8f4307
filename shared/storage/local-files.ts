/**
 * The folder adapter's own files beside the objects: temp files (a write before its atomic
 * rename), per-key lock files, and locks moved aside while being broken. All start with
 * INTERNAL_PREFIX, which keys may not use, so `list()` hides them and `sweep()` finds them.
 */
import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { link, mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StorageError } from '../errors.js';

/** File-name prefix of the adapter's own files (temp files, locks); keys may not use it. */
export const INTERNAL_PREFIX = '.~';
const TEMP_SUFFIX = '.tmp';
const LOCK_SUFFIX = '.lock';
const STALE_SUFFIX = '.stale';
/**
 * A lock is held only around compare-and-rename (milliseconds, or the time to hash the current
 * object); one this old belongs to a writer that died, so it is broken.
 */
export const STALE_LOCK_MS = 10_000;
/** How long a writer waits for a lock before giving up; longer than STALE_LOCK_MS so a stale lock is always broken first. */
const LOCK_WAIT_MS = 30_000;
const LOCK_RETRY_MIN_MS = 2;
const LOCK_RETRY_MAX_MS = 50;
/**
 * Attempts of mkdir + create: each failed one means a sweep or a delete removed the folder,
 * empty, while we made it or before we created our file in it — a window of microseconds
 * that a sweep opens once per run; 10 outlasts even the test that hammers it.
 */
const CREATE_ATTEMPTS = 10;
/**
 * What losing that race looks like: ENOENT, or ENOTDIR from mkdir -p (Node's recursive mkdir
 * reports ENOTDIR when a folder it found existing is gone when it checks that it is a folder).
 */
const FOLDER_GONE_CODES = new Set(['ENOENT', 'ENOTDIR']);

export const errorCode = (error: unknown): string | undefined =>
  error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined;

/** What an internal file is, from its name; `undefined` for an object's file. */
export function internalKind(name: string): 'temp' | 'lock' | 'stale-lock' | 'other' | undefined {
  if (!name.startsWith(INTERNAL_PREFIX)) return undefined;
  if (name.endsWith(TEMP_SUFFIX)) return 'temp';
  if (name.endsWith(LOCK_SUFFIX)) return 'lock';
  if (name.endsWith(STALE_SUFFIX)) return 'stale-lock';
  return 'other';
}

/** A temp file beside `path`, for writing before an atomic rename. */
export const tempPathFor = (path: string): string =>
  join(dirname(path), `${INTERNAL_PREFIX}${basename(path)}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`);

/**
 * Creates `path` exclusively ('wx'), making its folder first. A sweep or a delete may remove
 * that folder, empty, during the mkdir or between it and the create: both are tried again.
 * Removers only ever remove empty folders, so once the file exists its folder stays.
 */
export async function createInFolder(path: string): Promise<FileHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      await mkdir(dirname(path), { recursive: true });
      return await open(path, 'wx');
    } catch (error) {
      // A real ENOTDIR (a file where a folder should be) fails the same way each time.
      if (!FOLDER_GONE_CODES.has(errorCode(error) ?? '') || attempt >= CREATE_ATTEMPTS) throw error;
    }
  }
}

/**
 * Runs `action` while holding the lock file `.~<name>.lock` beside `path`. The lock is created
 * with O_EXCL ('wx'), so one holder at a time across processes; a lock older than
 * STALE_LOCK_MS is broken.
 */
export async function withKeyLock<T>(path: string, key: string, action: () => Promise<T>): Promise<T> {
  const lockPath = join(dirname(path), `${INTERNAL_PREFIX}${basename(path)}${LOCK_SUFFIX}`);
  const deadline = Date.now() + LOCK_WAIT_MS;
  let delay = LOCK_RETRY_MIN_MS;
  for (;;) {
    if (await tryCreateLock(lockPath)) break;
    if ((await removeStaleLock(lockPath)) !== 'live') continue;
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

/**
 * Removes the lock when it is stale. 'removed': it was, and is gone; 'absent': released
 * meanwhile; 'restored': a fresh lock took its place meanwhile and was left standing; 'live':
 * held by a live writer. Safe against other breakers and writers racing it.
 */
export async function removeStaleLock(lockPath: string): Promise<'removed' | 'absent' | 'restored' | 'live'> {
  let modified: number;
  try {
    modified = (await stat(lockPath)).mtimeMs;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return 'absent';
    throw error;
  }
  if (Date.now() - modified < STALE_LOCK_MS) return 'live';
  // Move it aside first so that two breakers cannot both delete: only one rename succeeds.
  const aside = `${lockPath}.${randomBytes(6).toString('hex')}${STALE_SUFFIX}`;
  try {
    await rename(lockPath, aside);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return 'absent';
    throw error;
  }
  const moved = await stat(aside);
  let restored = false;
  if (Date.now() - moved.mtimeMs < STALE_LOCK_MS) {
    // Another breaker replaced the stale lock with a fresh one of a live writer between our stat
    // and rename: put it back (link fails if someone holds the name again, then theirs stands).
    await link(aside, lockPath).catch(() => undefined);
    restored = true;
  }
  await unlink(aside);
  return restored ? 'restored' : 'removed';
}
