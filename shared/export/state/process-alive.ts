/**
 * Whether a process of this host still runs, for a lock whose holder may have been killed.
 * `kill(pid, 0)` alone is not enough: a killed process that its parent has not reaped yet (a
 * zombie, common in containers without an init process) still answers it, though it holds
 * nothing any more. On Linux the state in `/proc/<pid>/stat` tells a zombie apart.
 */
import { existsSync, readFileSync } from 'node:fs';

/** States of `/proc/<pid>/stat` of a process that has exited: zombie, dead (`x` on kernels before 3.13). */
const EXITED_STATES = new Set(['Z', 'X', 'x']);
/** Position of `starttime` (field 22 of proc(5)) among the fields after the comm's closing `)`. */
const START_TIME_INDEX = 22 - 3;

export interface ProcStat {
  state: string;
  /** Clock ticks after boot when the process started. */
  startTicks: string;
}

/**
 * True when no process `pid` runs on this host: none exists, or it has exited and only waits
 * to be reaped by its parent (a zombie). A process of another user counts as running.
 *
 * @param pid a positive process id (0 and negatives name process groups and are refused).
 * @param startedAt the `processStartMarker` recorded when the process was seen alive; when it
 *   no longer matches, the pid now belongs to another process and the one meant is gone.
 *   Ignored where the start time cannot be read (no `/proc`).
 * @throws RangeError for a pid that is not a positive integer.
 *
 * @example
 * processIsGone(12345)                                   // true once 12345 was killed, reaped or not
 * processIsGone(owner.pid, owner.startedAt)              // also true when 12345 is now another process
 */
export function processIsGone(pid: number, startedAt?: string, kernel: Kernel = THIS_KERNEL): boolean {
  assertPid(pid);
  const signal = kernel.signal0(pid);
  if (signal === 'ESRCH') return true;
  // EPERM: it exists but belongs to another user.
  const permitted = signal === 'sent';
  const stat = kernel.stat(pid);
  if (stat === 'unreadable') return false; // kill(pid, 0) found it; nothing more can be known

  if (stat === 'missing') {
    // Reaped between the two looks; unless it is another user's process that `hidepid` hides.
    return permitted;
  }
  if (EXITED_STATES.has(stat.state)) return true;
  return startedAt !== undefined && startedAt !== `${kernel.bootId()}:${stat.startTicks}`;
}

/**
 * What `processIsGone` asks a machine's kernel: this one's by default ({@link THIS_KERNEL});
 * the lifecycle simulation's CLIs answer from a simulated process table, zombies included.
 */
export interface Kernel {
  /** `kill(pid, 0)`: delivered, no such process, or another user's. */
  signal0(pid: number): 'sent' | 'ESRCH' | 'EPERM';
  /** `/proc/<pid>/stat`: the state and start; 'missing' (no such entry), 'unreadable' (no `/proc`, `hidepid`). */
  stat(pid: number): ProcStat | 'missing' | 'unreadable';
  /** Its boot id; undefined without `/proc`. */
  bootId(): string | undefined;
}

/** This machine's kernel: `process.kill(pid, 0)` and `/proc`. */
export const THIS_KERNEL: Kernel = {
  signal0(pid) {
    try {
      process.kill(pid, 0); // signal 0: only asks whether the process exists
      return 'sent';
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ESRCH' || code === 'EPERM') return code;
      throw error;
    }
  },
  stat: (pid) => readProcStat(pid),
  bootId: () => thisBootId(),
};

/**
 * A token that tells this incarnation of a process from a later one that reuses its pid: the
 * boot id and the start time in `/proc`. `undefined` where there is no `/proc` (or no such
 * process). Record it with the pid; pass it to `processIsGone` later.
 *
 * @example
 * processStartMarker() // 'c1f3…-…:52732' for this process
 */
export function processStartMarker(pid: number = process.pid): string | undefined {
  assertPid(pid);
  const stat = readProcStat(pid);
  return typeof stat === 'object' ? markerOf(stat) : undefined;
}

function assertPid(pid: number): void {
  if (!Number.isInteger(pid) || pid <= 0) throw new RangeError(`not a process id: ${pid}`);
}

let hasProcfs: boolean | undefined;
let bootId: string | undefined;
/**
 * This machine's boot id (`/proc/sys/kernel/random/boot_id`): another kernel (another machine,
 * container host or VM, or this one rebooted) has another. `undefined` where there is no `/proc`.
 */
export function thisBootId(): string | undefined {
  hasProcfs ??= existsSync('/proc/self/stat');
  if (!hasProcfs) return undefined;
  bootId ??= readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  return bootId;
}

/**
 * The boot id a `processStartMarker` was recorded under: a pid is judged on that machine only.
 *
 * @example
 * bootIdOfMarker('c1f3…-…:52732') // 'c1f3…-…'
 */
export function bootIdOfMarker(marker: string): string {
  const at = marker.lastIndexOf(':');
  return at < 0 ? '' : marker.slice(0, at);
}

/** Start ticks count from boot, so the same ticks after a reboot are another process. */
function markerOf(stat: ProcStat): string {
  return `${thisBootId()}:${stat.startTicks}`;
}

/**
 * The state and start time of `pid`; 'missing' when /proc has no such process; 'unreadable'
 * off Linux (no /proc) or when /proc hides it (mounted with `hidepid`).
 */
function readProcStat(pid: number): ProcStat | 'missing' | 'unreadable' {
  hasProcfs ??= existsSync('/proc/self/stat');
  if (!hasProcfs) return 'unreadable';
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return 'missing';
    if (code === 'EACCES' || code === 'EPERM') return 'unreadable';
    throw error;
  }
  // "pid (comm) state ppid …": comm is free text (spaces, parentheses), so cut at the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', startTicks: fields[START_TIME_INDEX] ?? '' };
}
