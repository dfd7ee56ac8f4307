/**
 * Removing what a folder adapter leaves behind: temp files of writes whose process was killed,
 * lock files of writers killed while holding them, and empty folders.
 *
 * Races with live writers, and why none of them loses:
 * - A temp file is removed only when untouched for `olderThanMs`, far longer than a live writer
 *   leaves it (it writes, then waits at most 30 s for its key lock, then renames).
 * - A lock file is removed only through `removeStaleLock`, the protocol writers use to break one.
 * - A folder is removed with rmdir, which only ever removes an empty one, atomically. A writer
 *   that made the folder (mkdir -p) but has not created its file in it yet loses it: its create
 *   fails with ENOENT, and `createInFolder` makes the folder again and retries. Once a writer's
 *   file is in a folder, the folder is not empty and stays. So folders are removed whatever
 *   their age (an age test would not help: mkdir -p of an existing old folder does not touch it).
 */
import type { Dirent } from 'node:fs';
import { readdir, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { errorCode, internalKind, removeStaleLock } from './local-files.js';
import type { SweepOptions } from './storage.js';

/** rmdir failures that mean "not ours to remove now": something is in it, or it is gone already. */
const KEPT_FOLDER_CODES = new Set(['ENOTEMPTY', 'EEXIST', 'ENOENT', 'ENOTDIR']);

/** Sweeps the tree under `root` (kept itself); returns what it removed, relative to `root`. */
export async function sweepTree(root: string, options: SweepOptions): Promise<string[]> {
  const removed: string[] = [];
  await sweepFolder(root, root, now(options) - options.olderThanMs, removed);
  return removed;
}

const now = (options: SweepOptions): number => options.now.getTime();

/** Sweeps one folder; true when it is empty afterwards (as far as this sweep saw). */
async function sweepFolder(
  root: string,
  folder: string,
  cutoffMs: number,
  removed: string[],
): Promise<boolean> {
  let entries: Dirent[];
  try {
    entries = await readdir(folder, { withFileTypes: true });
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false; // removed meanwhile, or no root yet
    throw error;
  }
  let left = entries.length;
  for (const entry of entries) {
    const path = join(folder, entry.name);
    const name = relative(root, path).split(sep).join('/');
    // Symbolic links are never followed: a sweep stays inside the root.
    if (entry.isDirectory()) {
      if ((await sweepFolder(root, path, cutoffMs, removed)) && (await removeFolder(path))) {
        removed.push(`${name}/`);
        left -= 1;
      }
    } else if (entry.isFile() && (await sweepFile(path, entry.name, cutoffMs))) {
      removed.push(name);
      left -= 1;
    }
  }
  return left === 0;
}

/** Removes one internal file when it is a leftover; true when it did. */
async function sweepFile(path: string, name: string, cutoffMs: number): Promise<boolean> {
  const kind = internalKind(name);
  if (kind === undefined || kind === 'other') return false;
  let modifiedMs: number;
  try {
    const found = await stat(path);
    // A lock moved aside keeps the lock's mtime; its ctime says when the move happened.
    modifiedMs = kind === 'stale-lock' ? Math.max(found.mtimeMs, found.ctimeMs) : found.mtimeMs;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false; // renamed into place or released meanwhile
    throw error;
  }
  if (modifiedMs >= cutoffMs) return false;
  if (kind === 'lock') return (await removeStaleLock(path)) === 'removed';
  try {
    await unlink(path);
    return true;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false;
    throw error;
  }
}

/** rmdir: true when it removed the folder, false when it was not empty or gone already. */
async function removeFolder(path: string): Promise<boolean> {
  try {
    await rmdir(path);
    return true;
  } catch (error) {
    if (KEPT_FOLDER_CODES.has(errorCode(error) ?? '')) return false;
    throw error;
  }
}

/**
 * Removes each of `folders` that is empty, and then its parents while they are empty, up to
 * `root` (kept). Deepest first, so a folder emptied by removing its child goes too.
 */
export async function removeEmptyFolders(root: string, folders: Iterable<string>): Promise<void> {
  const deepestFirst = [...new Set(folders)].sort((a, b) => b.length - a.length);
  for (let folder of deepestFirst) {
    while (folder.startsWith(root + sep) && (await removeFolder(folder))) folder = dirname(folder);
  }
}
