/**
 * Closers that come late (issue 16's defects 2, 7 and 11): scenario features drawn from streams
 * of their own, so that other seeds' draws stay as they were, and invariant 28.
 *
 * Features:
 * - the last closer dies right after its tombstone (`crashAtLastTombstone`, 10% of the seeds):
 *   after the faults' end, the closer whose tombstone leaves no run open is killed as the write
 *   applies (before it shrinks the closing record, deletes the run's records and releases the
 *   lock), and finish-run's schedule stalls (a throttled or broken function; a deployment that
 *   runs the CLI only has none) until the final start has answered. That start's recovery is
 *   then the only sweeper of what the closer left (liveness.ts, 20, which reads the bucket as
 *   the final start left it);
 * - late finishers (`lateFinishers`, 30% of the seeds, up to two while faults are on): when a
 *   finish-run or a start's recovery writes a run's manifest (its publish done; its state,
 *   announcement and tombstone to come), another finish-run invocation (its whole 15 minutes)
 *   comes 0-100 ms later: it lists the run open and reads its closing record. Half of them:
 *   the first closer's tombstone write waits 20-60 s (a process pause: GC, a suspended VM), so
 *   that the late finisher passes both its looks for the tombstone; only at a closing that
 *   records no outcomes (a start that died after its first record, closed failed), as a late
 *   finisher of a closed run could not read the outcomes' pieces, deleted with the run's
 *   records. The other half: the first closer's call after its tombstone (the shrinking of the
 *   closing record) waits 20-60 s, and the late finisher's next call after its read waits
 *   1-60 s, landing before, in or after that window (in it, only its look for the tombstone
 *   keeps it from reading the whole closing record of a closed run). Either way its take of
 *   the closing lease waits the closer's pause and 5-20 s more: it takes the lease the first
 *   closer released once it had closed the run wholly, the announcement's claim deleted with
 *   the run's records. The claim, a create-if-absent, succeeds again then, and only the look
 *   for the tombstone after it keeps the run from being announced twice (5); a closer that
 *   read the closing record after the tombstone must not act on it (28).
 *
 * 28. A run is closed at most once: an actor that read a run's whole closing record (not the
 *     marker it is shrunk to) after the run's tombstone writes nothing in the run's folder
 *     afterwards (finish-run's looks for the tombstone before and after it reads the closing:
 *     a closer that learnt of the closing only once the run was closed stops there). Sweeping
 *     the folder (deletes) is not a write.
 */
import { STATE_KEYS } from '../../shared/layout.js';
import type { Monitor } from './monitor.js';
import type { Prng } from './prng.js';
import type { SimS3 } from './s3.js';
import type { Actor, Sim } from './scheduler.js';

export const CLOSED_ONCE_INVARIANT = '28 a run is closed at most once';

const CRASH_SHARE = 0.1;
const LATE_SHARE = 0.3;

export interface LateFinisher {
  /** After the first closer's write of the run's manifest. */
  afterManifestMs: number;
  /** The late finisher's first call after it read the closing record waits this long (0: none). */
  readPauseMs: number;
  /** The first closer's tombstone write waits this long (`before`), or its first call after it (`after`). */
  closerPause: 'before' | 'after';
  closerPauseMs: number;
  /** The late finisher's take of the closing lease waits this long. */
  leasePauseMs: number;
}

export interface CloserPlan {
  crashAtLastTombstone: boolean;
  lateFinishers: LateFinisher[];
}

/** What a seed reached of these features. */
export interface CloserCases {
  /** The last closer killed right after its tombstone, finish-run stalled until the final start. */
  lastTombstoneCrashes: number;
  /** Late finishers invoked. */
  lateFinishers: number;
  /** A late finisher that took the closing lease after the run's tombstone (it looked for it before). */
  lateLeasesAfterTombstone: number;
  /**
   * A late finisher whose first call after its pause came between the run's tombstone and the
   * shrinking of its closing record (its look for the tombstone stops it; without it, it reads
   * the whole closing record of a closed run).
   */
  lateLooksInWindow: number;
}

export const noCloserCases = (): CloserCases => ({
  lastTombstoneCrashes: 0,
  lateFinishers: 0,
  lateLeasesAfterTombstone: 0,
  lateLooksInWindow: 0,
});

export function drawCloserPlan(rng: Prng): CloserPlan {
  const crash = rng.stream('closer-crash-at-last-tombstone');
  const late = rng.stream('late-finishers');
  const lateFinishers: LateFinisher[] = [];
  if (late.chance(LATE_SHARE)) {
    for (let i = late.int(1, 2); i > 0; i--) {
      const closerPauseMs = late.int(20_000, 60_000);
      const before = late.chance(0.5);
      const readPauseMs = late.int(1_000, 60_000);
      lateFinishers.push({
        afterManifestMs: late.int(0, 100),
        readPauseMs: before ? 0 : readPauseMs,
        closerPause: before ? 'before' : 'after',
        closerPauseMs,
        leasePauseMs: closerPauseMs + late.int(5_000, 20_000),
      });
    }
  }
  return { crashAtLastTombstone: crash.chance(CRASH_SHARE), lateFinishers };
}

const runOf = (key: string): string | undefined => /^state\/runs\/([^/]+)\//.exec(key)?.[1];
/** True for a closing record whose outcomes are none (the pieces' count 0). */
const recordsNoOutcomes = (body: Uint8Array | undefined): boolean => {
  if (!body) return false;
  const record = JSON.parse(Buffer.from(body).toString('utf8')) as { pieces?: { outcomes?: number } };
  return record.pieces?.outcomes === 0;
};
const isClosedMarker = (body: Uint8Array): boolean =>
  'closed' in (JSON.parse(Buffer.from(body).toString('utf8')) as object);

/**
 * Runs the features of a seed's plan over its bucket: `finish` invokes finish-run; `crashed` is
 * told when the last closer was killed (finish-run's schedule stalls from then on).
 */
export class Closers {
  readonly cases = noCloserCases();
  /** finish-run's schedule stalls from the last closer's crash until the final start answered. */
  finishStalled = false;
  readonly #late: LateFinisher[];
  /** Late finishers: the run each came for, and which of its pauses are still to come. */
  readonly #lateFor = new Map<
    Actor,
    { run: string; plan: LateFinisher; read: 'before' | 'next' | 'paused' | 'done'; lease: boolean }
  >();
  /** First closers paused at or after their tombstone: the run, the pause. */
  readonly #closerPause = new Map<Actor, { run: string; plan: LateFinisher }>();
  readonly #pauseNext = new Map<Actor, number>();
  /** `actor|run` of each actor that read a run's whole closing record after its tombstone. */
  readonly #readAfterClose = new Set<string>();
  #crashed = false;

  constructor(
    private readonly sim: Sim,
    private readonly s3: SimS3,
    private readonly monitor: Monitor,
    private readonly plan: CloserPlan,
    private readonly finish: (wholeTime: boolean) => Actor,
  ) {
    this.#late = [...plan.lateFinishers];
    s3.listeners.push((actor, op, key, body) => this.#heard(actor, op, key, body));
  }

  /** Extra latency of a call: the pauses these features place. */
  pauseBefore(actor: Actor, command: string, key: string): number {
    const next = this.#pauseNext.get(actor);
    if (next !== undefined) {
      this.#pauseNext.delete(actor);
      this.sim.log(actor, `process paused ${(next / 1000).toFixed(0)}s before ${command} ${key}`);
      return next;
    }
    const closer = this.#closerPause.get(actor);
    if (
      closer?.plan.closerPause === 'before' &&
      command === 'PutObjectCommand' &&
      key === STATE_KEYS.closed(closer.run)
    ) {
      this.#closerPause.delete(actor);
      this.sim.log(
        actor,
        `process paused ${(closer.plan.closerPauseMs / 1000).toFixed(0)}s before ${command} ${key}`,
      );
      return closer.plan.closerPauseMs;
    }
    const late = this.#lateFor.get(actor);
    if (late && !late.lease && key === STATE_KEYS.closingLease(late.run)) {
      late.lease = true;
      if (late.read === 'next') late.read = 'done';
      this.sim.log(
        actor,
        `process paused ${(late.plan.leasePauseMs / 1000).toFixed(0)}s before ${command} ${key}`,
      );
      return late.plan.leasePauseMs;
    }
    if (late && late.read === 'next') {
      late.read = 'paused';
      this.sim.log(
        actor,
        `process paused ${(late.plan.readPauseMs / 1000).toFixed(0)}s before ${command} ${key}`,
      );
      return late.plan.readPauseMs;
    }
    return 0;
  }

  #heard(actor: Actor, op: string, key: string, body: Uint8Array | undefined): void {
    const published = /^runs\/dt=[^/]+\/([^/]+)\.json$/.exec(key)?.[1];
    if (published !== undefined && op === 'put') {
      this.#follow(actor, published);
      return;
    }
    const run = runOf(key);
    if (run === undefined) return;
    const closed = this.monitor.closedAt.get(run);
    const late = this.#lateFor.get(actor);
    const whole = (): boolean => {
      const found = this.s3.peek(STATE_KEYS.closing(run));
      return found !== undefined && !isClosedMarker(found);
    };
    if (late?.run === run && late.read === 'paused') {
      late.read = 'done';
      if (closed !== undefined && whole()) this.cases.lateLooksInWindow++;
    }
    if (op === 'get' && key === STATE_KEYS.closing(run)) {
      if (!whole()) return;
      if (late?.run === run && late.read === 'before')
        late.read = late.plan.readPauseMs > 0 ? 'next' : 'done';
      if (closed !== undefined && closed.t <= this.sim.now) this.#readAfterClose.add(`${actor.id}|${run}`);
      return;
    }
    if (op !== 'put' || !body) return;
    // 28: a closer that learnt of the closing once the run was closed acts on it.
    if (this.#readAfterClose.has(`${actor.id}|${run}`)) {
      this.#readAfterClose.delete(`${actor.id}|${run}`);
      this.monitor.violate(
        CLOSED_ONCE_INVARIANT,
        `${actor.name} read the closing record of run ${run} after its tombstone (written at ${new Date(closed!.t).toISOString()}) and then wrote ${key}: it closes the run again`,
        [run],
      );
    }
    if (key === STATE_KEYS.closed(run)) {
      const pause = this.#closerPause.get(actor);
      if (pause?.run === run && pause.plan.closerPause === 'after') {
        this.#closerPause.delete(actor);
        this.#pauseNext.set(actor, pause.plan.closerPauseMs);
      }
      return;
    }
    if (key !== STATE_KEYS.closingLease(run) || Buffer.from(body).toString('utf8').includes('1970-01-01'))
      return;
    if (this.#lateFor.get(actor)?.run === run && closed !== undefined) this.cases.lateLeasesAfterTombstone++;
  }

  /** A first closer (finish-run, or a start's recovery) wrote a run's manifest: a late finisher follows. */
  #follow(actor: Actor, run: string): void {
    if (
      !this.sim.faultsOn ||
      this.#lateFor.has(actor) ||
      (actor.kind !== 'finish' && actor.kind !== 'start-run')
    )
      return;
    if (this.monitor.closedAt.has(run)) return;
    const plan = this.#late[0];
    if (!plan) return;
    // A late finisher that passes the looks for the tombstone before the run closes can go on
    // to the announcement's claim only when the closing records no outcomes (their pieces are
    // deleted with the run's records): a start that died after its first record, closed failed.
    if (plan.closerPause === 'before' && !recordsNoOutcomes(this.s3.peek(STATE_KEYS.closing(run)))) return;
    this.#late.shift();
    this.#closerPause.set(actor, { run, plan });
    this.sim.spawn('invoker', 'late-finisher', { canCrash: false }, async (self) => {
      await this.sim.sleep(self, plan.afterManifestMs);
      this.cases.lateFinishers++;
      // A whole invocation's time (finish-run's 15 minutes): it outlives its pauses.
      this.#lateFor.set(this.finish(true), { run, plan, read: 'before', lease: false });
    });
  }

  /** The last closer dies as its tombstone applies, once the faults are over (see the module comment). */
  crashAfter(actor: Actor, command: string, key: string): boolean {
    if (!this.plan.crashAtLastTombstone || this.#crashed || this.sim.faultsOn) return false;
    const run = runOf(key);
    if (run === undefined || command !== 'PutObjectCommand' || key !== STATE_KEYS.closed(run)) return false;
    const closed = this.monitor.closedAt.get(run);
    if (closed?.by !== actor || closed.t !== this.sim.now || !this.monitor.noOpenRun()) return false;
    this.#crashed = true;
    this.finishStalled = true;
    this.cases.lastTombstoneCrashes++;
    return true;
  }
}
