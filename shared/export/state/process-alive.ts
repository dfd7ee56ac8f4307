/**
 * Whether a process of this host is gone. Placeholder until the zombie-aware version lands:
 * `kill(pid, 0)` alone.
 */
export function processIsGone(pid: number): boolean {
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
