/**
 * Whose lock is it, and is its holder gone? A holder is judged by its pid only on its own
 * machine: the boot id its record names (`owner_started`) is this kernel's. Containers often
 * share a hostname, so `pid@host` alone makes a live holder elsewhere look dead here. Real
 * processes: a reaped child, a zombie, and a live child standing for a reused pid.
 */
import { once } from 'node:events';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { type LockRecord, lockIsFree } from '../../../../shared/export/state/lock.js';
import { processStartMarker, thisBootId } from '../../../../shared/export/state/process-alive.js';
import { childProcesses } from '../../../helpers/children.js';

const onLinux = process.platform === 'linux';
const NOW = new Date('2026-11-22T03:00:30Z');
const OTHER_BOOT = '00000000-0000-4000-8000-000000000000';
const start = childProcesses();

/** A child that ran and was reaped: its pid names no process now. Returns the pid and the marker it had. */
async function reapedChild(): Promise<{ pid: number; marker: string }> {
  const child = start('sleep', ['30']);
  const marker = processStartMarker(child.pid)!;
  child.kill('SIGKILL');
  await once(child, 'exit');
  return { pid: child.pid, marker };
}

/** A lock held until long after NOW by `pid` of this host, started as `started` says. */
const heldBy = (pid: number, started: string | undefined): LockRecord => ({
  run_id: '20261122T030000Z-000abc',
  owner: `${pid}@${hostname()}`,
  ...(started !== undefined ? { owner_started: started } : {}),
  token: '0123456789abcdef',
  acquired_at: '2026-11-22T03:00:00.000Z',
  expires_at: '2026-11-22T09:00:00.000Z',
});

describe.runIf(onLinux)('a lock holder judged by its pid', () => {
  it('is not gone when its record names another boot id, though its pid does not exist here (same hostname)', async () => {
    const { pid, marker } = await reapedChild();
    const ticks = marker.slice(marker.lastIndexOf(':') + 1);

    expect(lockIsFree(heldBy(pid, `${OTHER_BOOT}:${ticks}`), NOW)).toBe(false);
  });

  it('is gone when its record names this boot id and its pid is gone', async () => {
    const { pid, marker } = await reapedChild();

    expect(marker.startsWith(`${thisBootId()}:`)).toBe(true);
    expect(lockIsFree(heldBy(pid, marker), NOW)).toBe(true);
  });

  it('is gone when it is a zombie of this machine (exited, never reaped)', async () => {
    const parent = start('sh', ['-c', 'sleep 0 & exec sleep 30']);
    let zombie: number | undefined;
    for (let attempt = 0; attempt < 100 && zombie === undefined; attempt++) {
      const { execSync } = await import('node:child_process');
      const line = execSync(`ps -o pid=,stat= --ppid ${parent.pid}`).toString().trim();
      const [pid, state] = line.split(/\s+/);
      if (state?.startsWith('Z')) zombie = Number(pid);
      else await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (zombie === undefined) throw new Error('no zombie appeared');

    expect(lockIsFree(heldBy(zombie, processStartMarker(zombie)), NOW)).toBe(true);
    expect(lockIsFree(heldBy(parent.pid, processStartMarker(parent.pid)), NOW)).toBe(false);
  });

  it('is gone when its pid now belongs to another process of this machine (a reused pid)', () => {
    const other = start('sleep', ['30']);
    const earlier = `${thisBootId()}:1`; // started a moment after boot: not this sleep

    expect(lockIsFree(heldBy(other.pid, earlier), NOW)).toBe(true);
    expect(lockIsFree(heldBy(other.pid, processStartMarker(other.pid)), NOW)).toBe(false);
  });

  it('is never judged by its pid without a recorded start (a lock of before 0.3): by its expiry only', async () => {
    const { pid } = await reapedChild();
    const old = heldBy(pid, undefined);

    expect(lockIsFree(old, NOW)).toBe(false);
    expect(lockIsFree(old, new Date('2026-11-22T09:01:00Z'))).toBe(true);
  });
});

describe('a lock holder judged through the process seam (the simulation’s CLIs)', () => {
  const machine = (bootId: string, gone: Set<number>) => ({
    owner: `1@runner`,
    started: `${bootId}:1`,
    bootId,
    isGone: (pid: number) => gone.has(pid),
  });
  const killed: LockRecord = { ...heldBy(7, 'boot-a:100'), owner: '7@runner' };

  it('is gone to a reader on its own machine once killed, and alive to one on another machine of the same hostname', () => {
    expect(lockIsFree(killed, NOW, machine('boot-a', new Set([7])))).toBe(true);
    expect(lockIsFree(killed, NOW, machine('boot-b', new Set([7])))).toBe(false);
    expect(lockIsFree(killed, NOW, machine('boot-a', new Set()))).toBe(false);
  });
});
