/**
 * processIsGone against real processes: a live child, a reaped one, and a real zombie — a
 * child that exited but whose parent never waits for it. Node cannot make one itself (libuv
 * reaps its children), so `sh -c 'sleep 0 & exec sleep 30'` does: the backgrounded `sleep 0`
 * exits and stays a zombie of the exec'd `sleep 30`, which never waits.
 */
import { once } from 'node:events';
import { chmod, copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { processIsGone, processStartMarker } from '../../../../shared/export/state/process-alive.js';
import { childProcesses } from '../../../helpers/children.js';

const onLinux = process.platform === 'linux';
const start = childProcesses();

/** The state letter and parent pid of every process, from /proc. */
async function processTable(): Promise<{ pid: number; ppid: number; state: string }[]> {
  const rows = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const text = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (text === '') continue; // exited meanwhile
    const [state = '', ppid = ''] = text.slice(text.lastIndexOf(')') + 2).split(' ');
    rows.push({ pid: Number(name), ppid: Number(ppid), state });
  }
  return rows;
}

/** Waits for `parent` to have a zombie child and returns its pid. */
async function zombieChildOf(parent: number): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const zombie = (await processTable()).find((row) => row.ppid === parent && row.state === 'Z');
    if (zombie) return zombie.pid;
    await sleep(20);
  }
  throw new Error(`no zombie child of ${parent} appeared`);
}

describe('processIsGone', () => {
  it('sees a running process as alive', () => {
    const child = start('sleep', ['30']);

    expect(processIsGone(child.pid)).toBe(false);
    expect(processIsGone(process.pid)).toBe(false);
  });

  it('sees a process of another user as alive (kill answers EPERM)', () => {
    // pid 1 belongs to root; when the tests run as root, kill succeeds and it is alive all the same.
    expect(processIsGone(1)).toBe(false);
  });

  it('sees an exited and reaped process as gone', async () => {
    const child = start('true', []);
    await once(child, 'exit');

    expect(processIsGone(child.pid)).toBe(true);
  });

  it.runIf(onLinux)('sees a killed process that its parent has not reaped (a zombie) as gone', async () => {
    const parent = start('sh', ['-c', 'sleep 0 & exec sleep 30']);
    const zombie = await zombieChildOf(parent.pid);

    expect(() => process.kill(zombie, 0)).not.toThrow(); // what the old check looked at
    expect(processIsGone(zombie)).toBe(true);
    expect(processIsGone(parent.pid)).toBe(false);
  });

  it.runIf(onLinux)('reads the state after the last parenthesis of a name holding ") Z ("', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'process-alive-'));
    try {
      const named = join(dir, 'x) Z (y');
      await copyFile('/bin/sleep', named);
      await chmod(named, 0o755);
      const child = start(named, ['30']);
      await sleep(50); // until the exec has set the name
      expect(await readFile(`/proc/${child.pid}/comm`, 'utf8')).toBe('x) Z (y\n');

      expect(processIsGone(child.pid)).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.runIf(onLinux)('sees a pid taken by another process as gone when the start marker differs', () => {
    const child = start('sleep', ['30']);
    const marker = processStartMarker(child.pid);

    expect(marker).toMatch(/^[0-9a-f-]+:\d+$/);
    expect(processIsGone(child.pid, marker)).toBe(false);
    expect(processIsGone(child.pid, processStartMarker(process.pid))).toBe(true);
  });

  it('refuses pids that name process groups', () => {
    expect(() => processIsGone(0)).toThrow(RangeError);
    expect(() => processIsGone(-1)).toThrow(RangeError);
    expect(() => processIsGone(1.5)).toThrow(RangeError);
  });
});
