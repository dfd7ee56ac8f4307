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
 * - (4a) a takeover comes before the previous holding's expiry while that holder is ALIVE; or
 * - (4b) run r writes something that matters (anything outside `state/runs/r/`, or r's
 *   run.json / closing.json) while another run's holding is active and that run is ALIVE, after
 *   r's own holding ended by expiry or takeover (not by release: a released run's late
 *   leftovers are for the next run's recovery).
 * Invariant 8 (a state is never re-entered, ARCHITECTURE.md): no closing record is created for a
 * run whose manifest exists.
 * Invariant 7 (no lock outlives its holder by more than start-run's timeout): while a holding is
 * active, the moment its run is no longer ALIVE is noted; the holding must end, or become free
 * by the lock's rules (its run closed, or not recorded a start-run timeout after it took the
 * lock), within START_RUN_TIMEOUT + SKEW_ALLOWANCE of it.
 * Invariant 16 (run ids follow the lock, issue 32): the run id of each holding sorts after the run
 * id of every holding before it, whatever the clocks of their takers (up to ±5 minutes apart).
 * A run is ALIVE while an actor works for it (took its lock, carries its message, or is closing
 * it), while any of its messages is queued, in flight or delayed (the DLQ aside), or while its
 * run.json or closing.json exists (a finisher will take it on).
 */

import { FIRST_RECORD_GRACE_MS } from '../../shared/export/run/start-run.js';
import { LockRecordSchema } from '../../shared/export/state/lock.js';
import { STATE_KEYS } from '../../shared/layout.js';
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

interface Holding {
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
}

const RUN_KEY = /^state\/runs\/([^/]+)\//;
const MANIFEST_KEY = /^runs\/dt=[^/]+\/([^/]+)\.json$/;
const DATA_KEY =
  /^(?:parquet\/[^/]+|raw\/[^/]+|iceberg\/[^/]+\/data)\/dt=[^/]+\/(\d{8}T\d{6}Z-[0-9a-f]{6})-\d+\./;
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
  #current: Holding | undefined;
  readonly #settled = new Set<string>();

  /** True when `actor` recorded that `run`'s announcement was made (claim done, or tombstone). */
  settledAnnouncement(actor: Actor, run: string): boolean {
    return this.#settled.has(`${actor.name} ${run}`);
  }
  readonly #byRun = new Map<string, Holding>();
  readonly #reported = new Set<string>();

  constructor(
    private readonly sim: Sim,
    private readonly s3: SimS3,
    private readonly queues: readonly SimQueue[],
  ) {
    s3.listeners.push((actor, op, key, body) => this.#access(actor, op, key, body));
    sim.afterStep.push(() => this.#step());
  }

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
    if (op === 'get') return;
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
    if (op === 'put' && keyRun && key === STATE_KEYS.runRecord(keyRun) && body) {
      const record = JSON.parse(Buffer.from(body).toString('utf8')) as { driver: string };
      this.started.set(keyRun, record.driver);
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
    const run = actor.runFor(keyRun);
    if (run) this.#checkWriter(actor, run, op, key);
  }

  #lockWritten(actor: Actor, body: Uint8Array): void {
    const record = LockRecordSchema.parse(JSON.parse(Buffer.from(body).toString('utf8')));
    const now = this.sim.now;
    const current = this.#current;
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
      current.expiresWritten = record.expires_at;
      current.orphanChecked = false;
      return;
    }
    // An acquire or a takeover.
    // The writer works for this run from now on (an acquire loop whose first write's answer was
    // lost may end up taking the lock again under a new run id: the last one is its run).
    actor.fixedRun = record.run_id;
    if (current && current.releasedAt === undefined && current.takenOverAt === undefined) {
      if (now < current.expiresAt && this.alive(current.run)) {
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
        '16 run ids follow the lock',
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
    // After its tombstone a run's closer only tidies its own folder.
    if (this.s3.peek(STATE_KEYS.closed(run)) !== undefined) return;
    // A run whose closing record is frozen is finished by whoever finds it (finish-run holds no
    // lock): what it writes is that record's, the same whoever writes it.
    if (actor.name.startsWith('finish') && this.s3.peek(STATE_KEYS.closing(run)) !== undefined) return;
    // finish-run's heartbeat is the deployment's, written on every look whoever holds the lock.
    const matters =
      (!key.startsWith(prefix) && key !== STATE_KEYS.heartbeat) ||
      key === STATE_KEYS.runRecord(run) ||
      key === STATE_KEYS.closing(run);
    // A dead holder writes nothing: only a live one makes two writers.
    if (!matters || !this.alive(current.run)) return;
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
    if (!h || h.releasedAt !== undefined || h.takenOverAt !== undefined || h.orphanChecked) return;
    const now = this.sim.now;
    // Free by the lock's own rules before its expiry: its run is closed, or never recorded its
    // start within start-run's timeout (shared/export/state/lock.ts): any start may take it now.
    const closed = this.s3.peek(STATE_KEYS.closed(h.run)) !== undefined;
    const freeAt = h.start + FIRST_RECORD_GRACE_MS + 2 * SKEW_ALLOWANCE_MS;
    const unrecorded = now > freeAt && this.s3.peek(STATE_KEYS.runRecord(h.run)) === undefined;
    if (now < h.expiresAt && (closed || unrecorded)) {
      // From the moment a start could take it (the scheduler's steps may be further apart).
      this.#ended(h, closed ? now : freeAt);
      return;
    }
    if (now < h.expiresAt) {
      if (this.alive(h.run)) h.orphanSince = undefined;
      else h.orphanSince ??= now;
    } else {
      this.#ended(h, h.expiresAt);
    }
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
