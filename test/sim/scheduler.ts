/**
 * The deterministic scheduler. Actors are async functions; every await that leaves an actor
 * (a storage call, an SQS operation, an API call, a sleep) goes through `Sim.call` or
 * `Sim.sleep`, which registers a pending operation with a virtual due time. The loop lets every
 * actor run until all of them are blocked again, then fires the pending operation due first
 * (latencies are drawn from the seed's PRNG, so the seed decides the interleaving), advances
 * virtual time to it, and repeats. No real timer or I/O is on the simulated path: the same seed
 * gives the same trace.
 *
 * A crash kills an actor: its pending operations never settle and it makes no further call, as
 * a dead process would; its in-memory state is simply never looked at again.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Prng } from './prng.js';

export type ActorKind =
  | 'driver'
  | 'invoker'
  | 'poller'
  | 'start-run'
  | 'plan'
  | 'unit'
  | 'finish'
  | 'cli'
  | 'other'
  | 'redrive'
  | 'final';

export interface ActorOptions {
  /** This actor's clock: virtual time plus this offset. */
  offsetMs?: number;
  /** Killed at this long after its start (a Lambda's timeout). */
  killAfterMs?: number;
  /** Whether injected faults may crash it (the driver and the pollers never crash). */
  canCrash?: boolean;
  /** The run whose message it carries (plan and unit handlers). */
  run?: string;
}

export class Actor {
  alive = true;
  done = false;
  result: 'running' | 'ok' | 'error' | 'crashed' = 'running';
  error: unknown;
  endedAt: number | undefined;
  /** The run it works for once known: the lock it took, or the message it carries. */
  fixedRun: string | undefined;
  /** The run of the last key it touched (finishers, which work on several runs in turn). */
  currentRun: string | undefined;
  readonly pending = new Set<Op>();
  readonly joiners: Array<() => void> = [];
  constructor(
    readonly id: number,
    readonly kind: ActorKind,
    readonly name: string,
    readonly startedAt: number,
    readonly offsetMs: number,
    readonly canCrash: boolean,
    readonly rng: Prng,
  ) {}

  /** The run its writes count for. */
  runFor(keyRun: string | undefined): string | undefined {
    return this.fixedRun ?? keyRun ?? this.currentRun;
  }
}

interface Op {
  seq: number;
  actor: Actor;
  at: number;
  label: string;
  fire(): void;
}

export interface TraceLine {
  t: number;
  actor: string;
  text: string;
}

/** What an operation's apply function can do besides returning: die, before or after it applied. */
export interface OpControl {
  kill(why: string): void;
}

/** Thrown nowhere: returned by an apply that killed its actor, so the promise is left unsettled. */
const DEAD = Symbol('dead');

const actorScope = new AsyncLocalStorage<Actor>();

/** The actor running the current code, if any (for the timer shim). */
export const currentActor = (): Actor | undefined => actorScope.getStore();

export class Sim {
  now: number;
  readonly epoch: number;
  readonly actors: Actor[] = [];
  readonly live = new Set<Actor>();
  readonly trace: TraceLine[] = [];
  /** Off after the horizon: no fault is injected any more. */
  faultsOn = true;
  /** Called after every step, once every actor is blocked again. */
  afterStep: Array<() => void> = [];
  #pending: Op[] = [];
  #seq = 0;
  #activity = 0;
  #steps = 0;

  constructor(
    readonly rng: Prng,
    epoch: number,
    readonly traceOn: boolean,
  ) {
    this.now = epoch;
    this.epoch = epoch;
  }

  get steps(): number {
    return this.#steps;
  }

  log(actor: Actor | string, text: string): void {
    this.trace.push({ t: this.now, actor: typeof actor === 'string' ? actor : actor.name, text });
  }

  spawn(kind: ActorKind, name: string, options: ActorOptions, fn: (actor: Actor) => Promise<unknown>): Actor {
    const id = this.actors.length;
    const actor = new Actor(
      id,
      kind,
      `${name}#${id}`,
      this.now,
      options.offsetMs ?? 0,
      options.canCrash ?? true,
      this.rng.fork(),
    );
    actor.fixedRun = options.run;
    this.actors.push(actor);
    this.live.add(actor);
    this.#activity++;
    if (options.killAfterMs !== undefined) {
      this.#schedule(actor, options.killAfterMs, 'timeout', () => this.kill(actor, 'timed out'));
    }
    this.log(actor, 'start');
    const finish = (result: 'ok' | 'error', error?: unknown) => {
      if (!actor.alive) return;
      actor.alive = false;
      actor.done = true;
      actor.result = result;
      actor.error = error;
      actor.endedAt = this.now;
      this.#end(actor);
      this.log(actor, result === 'ok' ? 'end' : `end with error: ${describe(error)}`);
    };
    actorScope.run(actor, () => {
      fn(actor).then(
        () => finish('ok'),
        (error: unknown) => finish('error', error),
      );
    });
    return actor;
  }

  /** Kills an actor: pending operations are dropped, later calls never settle. */
  kill(actor: Actor, why: string): void {
    if (!actor.alive) return;
    actor.alive = false;
    actor.result = 'crashed';
    actor.endedAt = this.now;
    this.#end(actor);
    this.log(actor, `CRASH (${why})`);
  }

  #end(actor: Actor): void {
    for (const op of actor.pending) this.#remove(op);
    actor.pending.clear();
    this.live.delete(actor);
    this.#activity++;
    for (const wake of actor.joiners.splice(0)) wake();
  }

  /** Resolves when `target` has ended (returned, thrown or crashed). */
  join(target: Actor): Promise<Actor> {
    if (!target.alive) return Promise.resolve(target);
    return new Promise((resolve) => target.joiners.push(() => resolve(target)));
  }

  /** Waits `ms` of virtual time. */
  sleep(actor: Actor, ms: number, label = 'sleep'): Promise<void> {
    return this.call(actor, Math.max(0, ms), label, () => undefined);
  }

  /**
   * An operation that leaves the actor: `apply` runs when the scheduler picks it, `delayMs`
   * after now. Its value or error settles the promise, unless it killed the actor.
   */
  call<T>(actor: Actor, delayMs: number, label: string, apply: (control: OpControl) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!actor.alive) return; // a dead process makes no calls
      this.#schedule(actor, delayMs, label, () => {
        let value: T | typeof DEAD;
        try {
          value = apply({ kill: (why) => this.kill(actor, why) });
        } catch (error) {
          if (actor.alive) reject(error);
          return;
        }
        if (actor.alive && value !== DEAD) resolve(value as T);
      });
    });
  }

  #schedule(actor: Actor, delayMs: number, label: string, fire: () => void): Op {
    const op: Op = { seq: this.#seq++, actor, at: this.now + Math.max(0, delayMs), label, fire };
    this.#pending.push(op);
    actor.pending.add(op);
    this.#activity++;
    return op;
  }

  #remove(op: Op): void {
    const i = this.#pending.indexOf(op);
    if (i >= 0) this.#pending.splice(i, 1);
  }

  /** A repeating timer of `actor` (the shim behind setInterval); returns its cancel. */
  every(actor: Actor, ms: number, fn: () => void): () => void {
    let current: Op | undefined;
    let cancelled = false;
    const arm = () => {
      if (cancelled || !actor.alive) return;
      current = this.#schedule(actor, ms, 'interval', () => {
        actor.pending.delete(current!);
        arm();
        actorScope.run(actor, fn);
      });
    };
    arm();
    return () => {
      cancelled = true;
      if (current) {
        this.#remove(current);
        actor.pending.delete(current);
      }
    };
  }

  /** Lets every actor run until each is blocked on a pending operation (or has ended). */
  async settle(): Promise<void> {
    let seen = -1;
    for (let turns = 0; turns < 10_000 && seen !== this.#activity; turns++) {
      seen = this.#activity;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** The pending operation due first (ties: registration order). */
  #next(): Op | undefined {
    let best: Op | undefined;
    for (const op of this.#pending) {
      if (!best || op.at < best.at || (op.at === best.at && op.seq < best.seq)) best = op;
    }
    return best;
  }

  /** Time of the next pending operation, if any. */
  nextAt(): number | undefined {
    return this.#next()?.at;
  }

  /** Runs steps until `stop()` says so or nothing is pending. */
  async runUntil(stop: () => boolean): Promise<void> {
    for (;;) {
      await this.settle();
      for (const check of this.afterStep) check();
      if (stop()) return;
      const op = this.#next();
      if (!op) return;
      this.#remove(op);
      op.actor.pending.delete(op);
      this.now = Math.max(this.now, op.at);
      this.#steps++;
      this.#activity++;
      op.fire();
    }
  }

  /** The dead marker an apply returns after killing its actor. */
  static get DEAD(): typeof DEAD {
    return DEAD;
  }
}

export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`.slice(0, 300);
  return String(error).slice(0, 300);
}
