/**
 * Watches the bucket while the simulation runs, for what the final state cannot show: who held
 * the output's lock when, and who wrote while someone else held it.
 *
 * A HOLDING of run r starts with the successful write of `state/lock.json` that names r without
 * `released_at` (an acquire or a takeover; a write naming the same run again is a renewal and
 * moves the expiry). It ends at the first of:
 * - release: the successful write that marks r's record `released_at`, or r's tombstone
 *   (`closed.json`: the run is over and the lock free by its rules);
 * - expiry: the virtual instant at which the clock of the actor that last wrote r's `expires_at`
 *   reads `expires_at` (each actor's clock is virtual time plus its offset);
 * - takeover: the successful write naming another run.
 * Invariant 4 (one writer) is broken when
 * - (4a) a takeover comes before the previous holding's expiry while that holder is ALIVE (but
 *   for a killed CLI's, taken by a CLI of its machine: its process is gone); or
 * - (4b) run r writes something that matters (anything outside `state/runs/r/`, or r's
 *   run.json / closing.json) while another run's holding is active and that run is ALIVE, after
 *   r's own holding ended by expiry or takeover (not by release: a released run's late
 *   leftovers are for the next run's recovery).
 * Invariant 8 (a state is never re-entered, ARCHITECTURE.md): no closing record is created for a
 * run whose manifest exists, and no run record is written for a run after its tombstone.
 * Invariant 7 (no lock outlives its holder by more than start-run's timeout): while a holding is
 * active, the moment its run is no longer ALIVE is noted; the holding must end, or become free
 * by the lock's rules (its run closed, or not recorded a start-run timeout after it took the
 * lock), within START_RUN_TIMEOUT + SKEW_ALLOWANCE of it.
 * Invariant 16 (run ids follow the lock, issue 32): the run id of each holding sorts after the run
 * id of every holding before it, whatever the clocks of their takers (up to ±5 minutes apart).
 * Invariant 24 (a closed run's lock is not renewed, issue 16): the actor that wrote a run's
 * tombstone writes that run's lock afterwards only to release it: a renewal it prepared after the
 * tombstone applied (its `written_at`, by its clock) would say a closed run still holds the
 * output (finish-run's `beforeTombstone`: a CLI stops renewing before its tombstone). A renewal
 * sent before the tombstone and applied after it (a slow call) is not one.
 * Invariant 25 (finish-run leaves a live CLI's closing to the CLI, close-runs.ts): no finisher
 * writes for a run whose closing record is a CLI's (`driver: local`, not yet closed) when, as it
 * last read a closing record, the lock named that run, not released and live by the finisher's
 * own clock with the allowance (`lockIsFree`'s rule, as close-runs judges it; the lock read
 * there comes after, and a renewal only moves the expiry on).
 * A run is ALIVE while an actor works for it (took its lock, carries its message, or is closing
 * it), while any of its messages is queued, in flight or delayed (the DLQ aside), or while its
 * run.json or closing.json exists (a finisher will take it on).
 */

import { FIRST_RECORD_GRACE_MS } from '../../shared/export/run/start-run.js';
import { LockRecordSchema, MAX_CLOCK_SKEW_MS } from '../../shared/export/state/lock.js';
import { STATE_KEYS } from '../../shared/layout.js';
import { codeSeesHolder, type Excuses, noExcuses } from './liveness.js';
import type { SimS3 } from './s3.js';
import type { Actor, Sim } from './scheduler.js';
import type { SimQueue } from './sqs.js';

/** start-run's Lambda timeout: what a dead holder may block the output for, at most. */
export const START_RUN_TIMEOUT_MS = 5 * 60_000;
/** Clocks are at most this far apart. */
export const SKEW_ALLOWANCE_MS = 60_000;

export interface Violation {
  invariant: string;
  message: string;
  /** Runs it is about, to pick the trace lines to show. */
  runs: string[];
  t: number;
}

export interface Holding {
  run: string;
  holder: Actor;
  start: number;
  /** Virtual time of expiry (per the clock of the actor that last wrote it). */
  expiresAt: number;
  expiresWritten: string;
  releasedAt: number | undefined;
  takenOverAt: number | undefined;
  orphanSince: number | undefined;
  orphanChecked: boolean;
  /** The holding's last successful write (its take, or a renewal). */
  lastWriteAt: number;
  /** The expiry its take wrote, after the take: the lock's time to live. */
  ttl: number;
  /** What expiry the last write left, after it applied (a slowed renewal leaves less). */
  lastSlack: number;
  /** Invariant 18: the code's view of the lock evaluated once the run closed (1), and after its closer ended (2). */
  closedLooks: number;
  /** Invariant 18: the code's view evaluated for a run that never wrote its record. */
  unrecordedLooked: boolean;
}

const RUN_KEY = /^state\/runs\/([^/]+)\//;
const MANIFEST_KEY = /^runs\/dt=[^/]+\/([^/]+)\.json$/;
/** A run's data file (`<run>-<n>.…`), or its position deletes in a `_current` table (`<run>-<snapshot>-<seq>-deletes.parquet`). */
const DATA_KEY =
  /^(?:parquet\/[^/]+|raw\/[^/]+|iceberg\/[^/]+\/data)\/dt=[^/]+\/(\d{8}T\d{6}Z-[0-9a-f]{6})-\d+(?:-\d+-deletes)?\./;
/** A run's data manifest in an Iceberg table (shared/iceberg/commit.ts); other metadata names no run. */
const ICEBERG_MANIFEST_KEY = /^iceberg\/[^/]+\/metadata\/(\d{8}T\d{6}Z-[0-9a-f]{6})-\d+-m0\.avro$/;
const QUARANTINE_KEY = /^quarantine\/dt=[^/]+\/([^/]+)\//;

/** The run a key belongs to, when its name says. */
export function runOfKey(key: string): string | undefined {
  return (
    RUN_KEY.exec(key)?.[1] ??
    MANIFEST_KEY.exec(key)?.[1] ??
    DATA_KEY.exec(key)?.[1] ??
    ICEBERG_MANIFEST_KEY.exec(key)?.[1] ??
    QUARANTINE_KEY.exec(key)?.[1]
  );
}

export class Monitor {
  readonly violations: Violation[] = [];
  readonly holdings: Holding[] = [];
  /** Runs that wrote a run record, and their driver. */
  readonly started = new Map<string, string>();
  /** Starts refused by the table-format check after their recovery (their first record deleted). */
  refusedStarts = 0;
  /** The counted excuses (liveness.ts). */
  readonly excuses: Excuses = noExcuses();
  /** Each run's tombstone: when it was first written, and by whom. */
  readonly closedAt = new Map<string, { t: number; by: Actor }>();
  /** The actor that first wrote each run's record, and when (16: which scheduled time a run is of). */
  readonly startedBy = new Map<string, { actor: Actor; t: number }>();
  /** The code's views of the lock under evaluation (they read a snapshot: settled in microtasks). */
  readonly #looks: Promise<void>[] = [];
  #current: Holding | undefined;
  readonly #settled = new Set<string>();

  /** True when `actor` recorded that `run`'s announcement was made (claim done, or tombstone). */
  settledAnnouncement(actor: Actor, run: string): boolean {
    return this.#settled.has(`${actor.name} ${run}`);
  }
  readonly #byRun = new Map<string, Holding>();
  /** Whether two actors are CLI processes of one machine (scenario.ts sets it from processes.ts). */
  sameMachine: (a: Actor, b: Actor) => boolean = () => false;
  /** 25: each finisher's last read of the lock, and when it applied. */
  readonly #lockReads = new Map<Actor, { record: ReturnType<typeof LockRecordSchema.parse>; t: number }>();
  readonly #reported = new Set<string>();

  constructor(
    private readonly sim: Sim,
    private readonly s3: SimS3,
    private readonly queues: readonly SimQueue[],
  ) {
    s3.listeners.push((actor, op, key, body) => this.#access(actor, op, key, body));
    sim.afterStep.push(() => this.#step());
  }

  /** The run whose closing each actor works on for another run (its recovery), by actor. */
  readonly #recovering = new Map<Actor, string>();

  violate(invariant: string, message: string, runs: string[], dedupe = `${invariant} ${message}`): void {
    if (this.#reported.has(dedupe)) return;
    this.#reported.add(dedupe);
    this.violations.push({ invariant, message, runs, t: this.sim.now });
    this.sim.log('monitor', `VIOLATION ${invariant}: ${message}`);
  }

  #access(actor: Actor, op: 'put' | 'delete' | 'get', key: string, body: Uint8Array | undefined): void {
    // Another engine writing the Iceberg tables (other-engine.ts) works for no run and takes no lock.
    if (actor.kind === 'other') return;
    const keyRun = runOfKey(key);
    if (keyRun && actor.fixedRun === undefined) actor.currentRun = keyRun;
    if (op === 'get') {
      if (keyRun && key === STATE_KEYS.closing(keyRun) && actor.kind === 'finish') this.#finisherRead(actor);
      return;
    }
    if (op === 'put' && keyRun && actor.kind === 'finish') this.#finisherWrites(actor, keyRun, key);
    if (key === STATE_KEYS.lock) {
      if (op === 'put' && body) this.#lockWritten(actor, body);
      return;
    }
    // Who said a run's announcement was made: the claim marked done, or the tombstone written.
    if (
      op === 'put' &&
      keyRun &&
      body &&
      (key === STATE_KEYS.closed(keyRun) || key === STATE_KEYS.announced(keyRun))
    ) {
      const text = Buffer.from(body).toString('utf8');
      if (key === STATE_KEYS.closed(keyRun) || text.includes('"done_at"'))
        this.#settled.add(`${actor.name} ${keyRun}`);
    }
    // A run's tombstone ends its holding like a release: the run is over, the lock is free by
    // its rules (shared/export/state/lock.ts), and what its closer does next is tidying its own
    // folder and an idempotent release.
    if (op === 'put' && keyRun && key === STATE_KEYS.closed(keyRun)) {
      if (!this.closedAt.has(keyRun)) this.closedAt.set(keyRun, { t: this.sim.now, by: actor });
      const current = this.#current;
      if (
        current &&
        current.run === keyRun &&
        current.releasedAt === undefined &&
        current.takenOverAt === undefined
      )
        current.releasedAt = this.sim.now;
    }
    // A closing record, not the closed marker the finisher shrinks it to beside the tombstone.
    const isClosing = op === 'put' && keyRun !== undefined && key === STATE_KEYS.closing(keyRun);
    if (isClosing && body !== undefined && !('closed' in JSON.parse(Buffer.from(body).toString('utf8')))) {
      const manifest = this.s3.keys('runs/').find((k) => k.endsWith(`/${keyRun}.json`));
      if (manifest) {
        this.violate(
          '8 no state re-entered',
          `${actor.name} started closing run ${keyRun} again (created ${key}) after its manifest ${manifest} was written`,
          [keyRun],
        );
      }
    }
    // Nor is a closed run started again: its record written after its tombstone (a start that
    // lost the output while it listed writes its whole record over its `starting` one only).
    if (op === 'put' && keyRun && key === STATE_KEYS.runRecord(keyRun) && this.closedAt.has(keyRun)) {
      const closed = this.closedAt.get(keyRun)!;
      this.violate(
        '8 no state re-entered',
        `${actor.name} wrote the record of run ${keyRun} after its tombstone (${closed.by.name}, ${((this.sim.now - closed.t) / 1000).toFixed(1)}s before): the closed run came back to life`,
        [keyRun],
      );
    }
    if (op === 'put' && keyRun && key === STATE_KEYS.runRecord(keyRun) && body) {
      const record = JSON.parse(Buffer.from(body).toString('utf8')) as { driver: string };
      this.started.set(keyRun, record.driver);
      if (!this.startedBy.has(keyRun)) this.startedBy.set(keyRun, { actor, t: this.sim.now });
    }
    // A start refused by the table-format check (after recovery) deletes its first record, the
    // only key of its run, before anything else: it never started. (Closing deletes the record
    // after the manifest; a run with other keys left is not one.)
    if (
      op === 'delete' &&
      keyRun &&
      key === STATE_KEYS.runRecord(keyRun) &&
      actor.kind !== 'finish' &&
      !this.s3.keys('runs/').some((k) => k.endsWith(`/${keyRun}.json`)) &&
      this.s3.keys(STATE_KEYS.runPrefix(keyRun)).every((k) => k === key)
    ) {
      this.started.delete(keyRun);
      this.refusedStarts++;
    }
    // An actor that works on another run's closing (a start's recovery of a run left open):
    // from its first write of that closing until that run's tombstone, the tombstone included.
    const other = keyRun !== undefined && actor.fixedRun !== undefined && keyRun !== actor.fixedRun;
    if (other && key.startsWith(`${STATE_KEYS.runPrefix(keyRun)}closing`))
      this.#recovering.set(actor, keyRun);
    const run = actor.runFor(keyRun);
    if (run) this.#checkWriter(actor, run, op, key);
    if (other && key === STATE_KEYS.closed(keyRun)) this.#recovering.delete(actor);
  }

  /** 25: the lock as it stood when a finisher last read a closing record (its decision point). */
  #finisherRead(actor: Actor): void {
    const body = this.s3.peek(STATE_KEYS.lock);
    const record = body && LockRecordSchema.parse(JSON.parse(Buffer.from(body).toString('utf8')));
    if (record) this.#lockReads.set(actor, { record, t: this.sim.now });
    else this.#lockReads.delete(actor);
  }

  /** 25: a finisher's write for a run whose CLI closes it and, by the lock it read, holds it. */
  #finisherWrites(actor: Actor, run: string, key: string): void {
    const read = this.#lockReads.get(actor);
    if (!read || read.record.run_id !== run || read.record.released_at !== undefined) return;
    if (this.closedAt.has(run)) return;
    const closing = this.s3.peek(STATE_KEYS.closing(run));
    if (!closing) return;
    const record = JSON.parse(Buffer.from(closing).toString('utf8')) as { driver?: string; closed?: unknown };
    if (record.driver !== 'local' || 'closed' in record) return;
    if (read.t + actor.offsetMs >= Date.parse(read.record.expires_at) + MAX_CLOCK_SKEW_MS) return;
    this.violate(
      '25 finish-run leaves a live CLI its closing',
      `${actor.name} wrote ${key} for run ${run}, a CLI's closing, which it read at ${this.#at(read.t)} while run ${run} (${read.record.owner}) held the lock until ${read.record.expires_at} (its clock read ${new Date(read.t + actor.offsetMs).toISOString()})`,
      [run],
      `25 ${run}`,
    );
  }

  #lockWritten(actor: Actor, body: Uint8Array): void {
    const record = LockRecordSchema.parse(JSON.parse(Buffer.from(body).toString('utf8')));
    const now = this.sim.now;
    const current = this.#current;
    // 24: the closer of a run renews its lock after the run's tombstone.
    const closed = this.closedAt.get(record.run_id);
    if (
      closed?.by === actor &&
      record.released_at === undefined &&
      record.written_at !== undefined &&
      Date.parse(record.written_at) - actor.offsetMs > closed.t
    ) {
      this.violate(
        "24 a closed run's lock is not renewed",
        `${actor.name} wrote its tombstone of run ${record.run_id} at ${this.#at(closed.t)} and then renewed the run's lock (written at ${record.written_at} by its clock, until ${record.expires_at}): a closed run's lock is free, and no renewal may say otherwise`,
        [record.run_id],
        `24 ${record.run_id}`,
      );
    }
    const expiresAt = Date.parse(record.expires_at) - actor.offsetMs;
    if (record.released_at !== undefined) {
      if (current && current.run === record.run_id && current.releasedAt === undefined) {
        this.#ended(current, now);
        current.releasedAt = now;
      }
      return;
    }
    if (current && current.run === record.run_id && current.releasedAt === undefined) {
      current.expiresAt = expiresAt; // renewed
      current.lastWriteAt = now;
      current.lastSlack = expiresAt - now;
      current.expiresWritten = record.expires_at;
      current.orphanChecked = false;
      return;
    }
    // An acquire or a takeover.
    // The writer works for this run from now on (an acquire loop whose first write's answer was
    // lost may end up taking the lock again under a new run id: the last one is its run).
    actor.fixedRun = record.run_id;
    if (current && current.releasedAt === undefined && current.takenOverAt === undefined) {
      // A killed CLI's lock taken by a CLI of its machine is free by the lock's rules: its
      // process is gone (processes.ts), whatever its run's records say (the taker's recovery
      // closes that run).
      const goneProcess = !current.holder.alive && this.sameMachine(actor, current.holder);
      if (now < current.expiresAt && this.alive(current.run) && !goneProcess) {
        this.violate(
          '4 one writer',
          `run ${record.run_id} (${actor.name}, clock ${fmtOffset(actor)}) took the lock over from run ${current.run} ` +
            `(${current.holder.name}, clock ${fmtOffset(current.holder)}), which was alive and held it until ${current.expiresWritten} ` +
            `by its holder's clock (${secs(current.expiresAt - now)} later)`,
          [record.run_id, current.run],
        );
      }
      this.#ended(current, Math.min(now, current.expiresAt));
      current.takenOverAt = now;
    }
    // Run ids order runs (the views' and _current tables' newest): each run that takes the lock
    // must come after every run that held it before, whatever its clock says (issue 32).
    const later = this.holdings.find((h) => h.run >= record.run_id && h.run !== record.run_id);
    if (later) {
      this.violate(
        '22 run ids follow the lock',
        `run ${record.run_id} (${actor.name}, clock ${fmtOffset(actor)}) took the lock after run ${later.run} ` +
          `(${later.holder.name}, clock ${fmtOffset(later.holder)}), but its id does not sort after it`,
        [record.run_id, later.run],
      );
    }
    const holding: Holding = {
      run: record.run_id,
      holder: actor,
      start: now,
      expiresAt,
      expiresWritten: record.expires_at,
      releasedAt: undefined,
      takenOverAt: undefined,
      orphanSince: undefined,
      orphanChecked: false,
      lastWriteAt: now,
      ttl: expiresAt - now,
      lastSlack: expiresAt - now,
      closedLooks: 0,
      unrecordedLooked: false,
    };
    this.holdings.push(holding);
    this.#byRun.set(record.run_id, holding);
    this.#current = holding;
    this.sim.log(actor, `holds the lock for ${record.run_id} until ${record.expires_at}`);
  }

  /** Whether `holding` is in force at `t`. */
  #active(holding: Holding, t: number): boolean {
    return holding.releasedAt === undefined && holding.takenOverAt === undefined && t < holding.expiresAt;
  }

  #checkWriter(actor: Actor, run: string, op: string, key: string): void {
    const current = this.#current;
    const now = this.sim.now;
    if (!current || current.run === run || !this.#active(current, now)) return;
    const own = this.#byRun.get(run);
    if (!own || own.releasedAt !== undefined) return;
    const prefix = STATE_KEYS.runPrefix(run);
    // finish-run's heartbeat is the deployment's, written on every look whoever holds the lock.
    const matters =
      (!key.startsWith(prefix) && key !== STATE_KEYS.heartbeat) ||
      key === STATE_KEYS.runRecord(run) ||
      key === STATE_KEYS.closing(run);
    // A dead holder writes nothing: only a live one makes two writers.
    if (!matters || !this.alive(current.run)) return;
    // After its tombstone, an actor of the run already under way (its closer shrinking the
    // closing record and deleting the run record, a duplicate delivery or a stalled step ending
    // late) may still write in its own folder, the next recovery's to sweep (20); anything
    // else it writes is checked.
    const closed = this.closedAt.get(run);
    if (closed !== undefined && key.startsWith(prefix) && actor.startedAt <= closed.t) {
      this.excuses.writeAfterTombstone++;
      return;
    }
    // A run whose closing record is frozen is finished by whoever finds it (finish-run holds no
    // lock): what it writes is that record's, the same whoever writes it.
    if (actor.name.startsWith('finish') && this.s3.peek(STATE_KEYS.closing(run)) !== undefined) {
      this.excuses.frozenClosing++;
      return;
    }
    // So is a run left open that a start's recovery closes, while its closing record stands:
    // the recovering run losing its own lock meanwhile does not make that closing's writes
    // (its tables' commits included) a second writer of the output.
    const recovering = this.#recovering.get(actor);
    if (recovering !== undefined && this.s3.peek(STATE_KEYS.closing(recovering)) !== undefined) {
      this.excuses.frozenClosing++;
      return;
    }
    const how =
      own.takenOverAt !== undefined && own.takenOverAt < own.expiresAt
        ? `was taken over at ${this.#at(own.takenOverAt)}, before it expired`
        : `expired at ${this.#at(own.expiresAt)}${own.takenOverAt !== undefined ? ` (taken over at ${this.#at(own.takenOverAt)})` : ''}`;
    this.violate(
      '4 one writer',
      `run ${run} (${actor.name}) wrote (${op} ${key}) after its lock ${how}, while run ${current.run} held the lock (since ${this.#at(current.start)})`,
      [run, current.run],
      `4b ${run} ${current.run}`,
    );
  }

  /** True while something will still act for `run` (see the module comment). */
  alive(run: string): boolean {
    for (const actor of this.sim.live) {
      if (!actor.canCrash) continue;
      if (actor.fixedRun === run || (actor.fixedRun === undefined && actor.currentRun === run)) return true;
    }
    for (const queue of this.queues) if (queue.holdsRun(run)) return true;
    return (
      this.s3.peek(STATE_KEYS.runRecord(run)) !== undefined ||
      this.s3.peek(STATE_KEYS.closing(run)) !== undefined
    );
  }

  #step(): void {
    const h = this.#current;
    if (!h || h.releasedAt !== undefined || h.takenOverAt !== undefined) return;
    const now = this.sim.now;
    if (!h.orphanChecked) {
      if (now >= h.expiresAt) {
        this.#lapsed(h);
        this.#ended(h, h.expiresAt);
      } else if (this.alive(h.run)) h.orphanSince = undefined;
      else h.orphanSince ??= now;
    }
    // 18: once the holder's run is over, the lock is free as the code sees it (liveness.ts).
    const closed = this.closedAt.get(h.run);
    if (closed !== undefined) {
      // At the tombstone the lock is free by its rules (a start may take it now); if the code
      // still sees it held, its closer must release it before it ends.
      if (h.closedLooks === 0) {
        h.closedLooks = 1;
        this.#look(h, now, (held) => {
          if (!held) this.#ended(h, now);
          else h.closedLooks = 2;
        });
      } else if (h.closedLooks === 2 && !closed.by.alive) {
        h.closedLooks = 3;
        this.#look(h, now, (held) => {
          if (held)
            this.violate(
              '18 the lock is freed by its rules',
              `run ${h.run} was closed at ${this.#at(closed.t)} by ${closed.by.name}, which ended at ${this.#at(now)} without releasing the lock, and the code (lockHolder) still sees the lock held by it (until ${h.expiresWritten} by its holder's clock)`,
              [h.run],
            );
        });
      }
      return;
    }
    // A run that never wrote its record is over for the lock's rules once the grace has passed
    // after the take by the holder's clock, and the skew allowance by the reader's.
    const freeAt = h.start + h.holder.offsetMs + FIRST_RECORD_GRACE_MS + MAX_CLOCK_SKEW_MS + 1;
    if (!h.unrecordedLooked && now > freeAt && this.s3.peek(STATE_KEYS.runRecord(h.run)) === undefined) {
      h.unrecordedLooked = true;
      this.#look(h, now, (held) => {
        if (!held) this.#ended(h, freeAt);
        else if (!this.alive(h.run))
          this.violate(
            '18 the lock is freed by its rules',
            `run ${h.run} (${h.holder.name}) took the lock at ${this.#at(h.start)} and never wrote its record; at ${this.#at(now)}, ${secs(now - h.start)} later, the code (lockHolder) still sees the lock held by it (until ${h.expiresWritten} by its holder's clock)`,
            [h.run],
          );
      });
    }
  }

  /** The code's view of the lock now (`codeSeesHolder`): `held` when it is `h`'s run's. */
  #look(h: Holding, now: number, then: (held: boolean) => void): void {
    this.#looks.push(
      codeSeesHolder(this.s3, now, FIRST_RECORD_GRACE_MS).then((holder) => then(holder?.run_id === h.run)),
    );
  }

  /** Waits for the code's views of the lock under evaluation. */
  async settle(): Promise<void> {
    await Promise.all(this.#looks);
  }

  /**
   * 19: a holding expires while its holder still works for its run (not closed): a live holder
   * that did not keep its lock, unless a renewal met a fault (liveness.ts).
   */
  #lapsed(h: Holding): void {
    const holder = h.holder;
    if (!holder.alive || holder.fixedRun !== h.run || this.closedAt.has(h.run)) return;
    const inFlight = [...holder.pending].some((op) => op.label.endsWith(STATE_KEYS.lock));
    const faulted = this.s3.events.some(
      (e) =>
        e.actor === holder && e.key === STATE_KEYS.lock && e.t >= h.lastWriteAt && !e.result.startsWith('ok'),
    );
    // A renewal that applied a third of the lock's life late (the CLI renews every third): slowed
    // by the bucket or a paused process, a fault.
    const slowed = h.lastSlack < (h.ttl * 2) / 3;
    if (inFlight || faulted || slowed) {
      this.excuses.renewalFaulted++;
      return;
    }
    this.violate(
      '19 a live holder keeps its lock',
      `run ${h.run}'s lock, taken by ${h.holder.name} at ${this.#at(h.start)} and last written at ${this.#at(h.lastWriteAt)}, expired at ${this.#at(h.expiresAt)} while its holder still worked for the run, no renewal in flight and none refused`,
      [h.run],
    );
  }

  /** A holding ends at `end`: checks invariant 7 against the moment its holder was gone. */
  #ended(h: Holding, end: number): void {
    if (h.orphanChecked) return;
    h.orphanChecked = true;
    if (h.orphanSince === undefined) return;
    const outlived = end - h.orphanSince;
    if (outlived > START_RUN_TIMEOUT_MS + SKEW_ALLOWANCE_MS) {
      this.violate(
        '7 lock outlives holder',
        `the lock of run ${h.run} (taken by ${h.holder.name}) outlived its holder by ${secs(outlived)}: ` +
          `nothing acted for the run from ${this.#at(h.orphanSince)}, the lock held until ${this.#at(end)}`,
        [h.run],
      );
    }
  }

  /** True when every run that recorded its start has its tombstone (no run is open). */
  noOpenRun(): boolean {
    for (const run of this.started.keys()) if (!this.closedAt.has(run)) return false;
    return true;
  }

  /**
   * When a start may take the lock by its rules, at the earliest, as far as the current holding
   * says: at once, but for a holder that never wrote its record, whose lock is free a grace
   * and the skew allowance after it took it by its clock (18).
   */
  lockFreeFrom(now: number): number {
    const h = this.#current;
    if (!h || h.releasedAt !== undefined || h.takenOverAt !== undefined || this.closedAt.has(h.run))
      return now;
    if (this.started.has(h.run)) return now;
    return Math.max(now, h.start + h.holder.offsetMs + FIRST_RECORD_GRACE_MS + MAX_CLOCK_SKEW_MS + 1);
  }

  /** The simulation's start: times in messages are given from it. */
  get epoch(): number {
    return this.sim.epoch;
  }

  /** The current holding, for a violation's message. */
  get current(): Holding | undefined {
    return this.#current;
  }

  /** Called when the run is over: a holding still open is checked as if it ended now. */
  finish(): void {
    const h = this.#current;
    if (h && h.releasedAt === undefined && h.takenOverAt === undefined) {
      this.#ended(h, Math.min(this.sim.now, h.expiresAt));
    }
  }

  #at(t: number): string {
    return `T+${secs(t - this.sim.epoch)}`;
  }
}

export const secs = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;
const fmtOffset = (actor: Actor): string => `${actor.offsetMs >= 0 ? '+' : ''}${secs(actor.offsetMs)}`;
