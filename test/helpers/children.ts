/**
 * Child processes a test starts to have a real pid to judge (a live one, a zombie, a reaped
 * one): each is killed after the test, whatever it left running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { afterEach } from 'vitest';

/** `start(command, args)`: a child with its pid, killed after each test of the calling file. */
export function childProcesses(): (command: string, args: string[]) => ChildProcess & { pid: number } {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });
  return (command, args) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    children.push(child);
    if (child.pid === undefined) throw new Error(`${command} did not start`);
    return child as ChildProcess & { pid: number };
  };
}
