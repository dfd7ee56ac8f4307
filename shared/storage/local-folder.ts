/**
 * Makes an output folder one component at a time, where a recursive mkdir would not settle.
 *
 * Node's `mkdir(path, { recursive: true })` makes a missing parent and tries again on every
 * ENOENT; on a file system the kernel fills (procfs: `/proc/x`) mkdir answers ENOENT although
 * the parent is there, and Node 24 loops for ever at full CPU, so `--out /proc/x` hung with no
 * output. A plain mkdir of each missing component settles, and an ENOENT whose parent is a
 * folder can then only mean a file system that holds no folders. Before any mkdir, the nearest
 * folder that exists is asked its file system: on one of the kernel's (cgroup's mkdir makes a
 * control group, not a folder) nothing is created at all.
 */
import { mkdir, stat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ExporterError } from '../errors.js';

/**
 * Linux's file systems the kernel fills (statfs `f_type`, linux/magic.h): none holds an export's
 * files. Another system's numbers differ, so the check is Linux's only.
 */
const KERNEL_FILE_SYSTEMS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0xf97cff8c, 'selinuxfs'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x42494e4d, 'binfmt_misc'],
  [0x1cd1, 'devpts'],
  [0x6e736673, 'nsfs'],
  [0xcafe4a11, 'bpf'],
]);

const codeOf = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;

/** `--out <out> is on <what>`: one line naming --out, and where to write instead. */
const noFilesHere = (out: string, what: string, cause?: unknown): ExporterError =>
  new ExporterError(`--out ${out} is on ${what}, which holds no files of its own`, {
    hint: 'pass a folder on a disk, or s3://bucket/prefix',
    ...(cause !== undefined && { cause }),
  });

/**
 * Makes `folder` (the output folder `out` or one inside it) and its missing parents. Throws
 * ExporterError naming `--out` when they lie on a file system that cannot hold them; other
 * failures (ENOTDIR, EACCES, EROFS …) are thrown as the file system reports them.
 */
export async function makeOutFolder(out: string, folder: string): Promise<void> {
  const missing: string[] = [];
  let existing = folder;
  for (;;) {
    try {
      await stat(existing);
      break;
    } catch (error) {
      const parent = dirname(existing);
      if (codeOf(error) !== 'ENOENT' || parent === existing) throw error;
      missing.unshift(existing);
      existing = parent;
    }
  }
  if (process.platform === 'linux') {
    const kind = KERNEL_FILE_SYSTEMS.get(Number((await statfs(existing)).type) >>> 0);
    if (kind) throw noFilesHere(out, `${kind}, a file system of the kernel`);
  }
  for (const path of missing) {
    try {
      await mkdir(path);
    } catch (error) {
      // Made meanwhile by another run: the next component (or the write) says if it is a file.
      if (codeOf(error) === 'EEXIST') continue;
      // Its parent is a folder (found or just made): this file system makes no folders.
      if (codeOf(error) === 'ENOENT') throw noFilesHere(out, 'a file system that makes no folders', error);
      throw error;
    }
  }
}
