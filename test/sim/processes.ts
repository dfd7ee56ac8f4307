/**
 * The simulated CLIs' processes (issue 32): each CLI run is a process of its own, `pid@runner`,
 * on one of two machines that share the hostname `runner` (containers often do) and differ in
 * their kernel's boot id. The lock judges a holder through its process seam (`LockProcess`,
 * shared/export/state/lock.ts) with the real `processIsGone` over a simulated kernel: a killed
 * CLI is gone to a reader on its own machine only (a zombie when the seed says its container has
 * no init process to reap it); to a reader on the other machine, its pid says nothing.
 * Lambda actors keep the test process's own identity: no simulated CLI is gone to them.
 */
import type { LockProcess } from '../../shared/export/state/lock.js';
import { type Kernel, processIsGone } from '../../shared/export/state/process-alive.js';
import type { Actor } from './scheduler.js';

/** The hostname every simulated CLI's machine has. */
export const SIM_HOSTNAME = 'runner';
/** The simulated CLIs' pids: 4000, 4001, … in the order of the scenario's CLIs, on whichever machine. */
const FIRST_PID = 4000;

interface SimProcess {
  actor: Actor;
  machine: number;
  /** Clock ticks after boot when it started (its virtual start, in 10 ms ticks). */
  startTicks: string;
  /** Killed and never reaped: `kill(pid, 0)` still answers, `/proc` says `Z`. */
  zombieWhenKilled: boolean;
}

export class SimMachines {
  readonly #processes = new Map<number, SimProcess>();
  /** Lock holders a reader judged gone by their process (a dead or zombie CLI), for the summary. */
  judgedGone = 0;

  /** Registers the `index`-th CLI's process and returns the identity its lock takes. */
  cli(index: number, actor: Actor, machine: number, zombieWhenKilled: boolean): LockProcess {
    const pid = FIRST_PID + index;
    const startTicks = String(Math.floor(actor.startedAt / 10));
    this.#processes.set(pid, { actor, machine, startTicks, zombieWhenKilled });
    const kernel = this.#kernel(machine);
    return {
      owner: `${pid}@${SIM_HOSTNAME}`,
      started: `${kernel.bootId()}:${startTicks}`,
      bootId: kernel.bootId(),
      isGone: (holder, started) => {
        const gone = processIsGone(holder, started, kernel);
        if (gone) this.judgedGone++;
        return gone;
      },
    };
  }

  /** The simulated CLI of a lock's `owner` (`pid@runner`), its machine and its zombie rule. */
  processOf(owner: string): { actor: Actor; machine: number; zombie: boolean } | undefined {
    const found = this.#processes.get(Number(owner.slice(0, owner.lastIndexOf('@'))));
    return found && { actor: found.actor, machine: found.machine, zombie: found.zombieWhenKilled };
  }

  /** True when both actors are simulated CLIs on one machine (a killed one is gone to the other). */
  sameMachine(a: Actor, b: Actor): boolean {
    const machineOf = (actor: Actor) => [...this.#processes.values()].find((p) => p.actor === actor)?.machine;
    const of = machineOf(a);
    return of !== undefined && of === machineOf(b);
  }

  /** One machine's kernel: its processes as `kill(pid, 0)` and `/proc` show them. */
  #kernel(machine: number): Kernel {
    const state = (pid: number): 'running' | 'zombie' | undefined => {
      const found = this.#processes.get(pid);
      if (!found || found.machine !== machine) return undefined;
      if (found.actor.alive && !found.actor.done) return 'running';
      return found.actor.result === 'crashed' && found.zombieWhenKilled ? 'zombie' : undefined;
    };
    return {
      signal0: (pid) => (state(pid) === undefined ? 'ESRCH' : 'sent'),
      stat: (pid) => {
        const now = state(pid);
        if (now === undefined) return 'missing';
        return { state: now === 'zombie' ? 'Z' : 'S', startTicks: this.#processes.get(pid)!.startTicks };
      },
      bootId: () => `sim-boot-${machine}`,
    };
  }
}
