/**
 * One run at a time per output. The lock is one object, `state/lock.json`, taken by a
 * conditional create (`If-None-Match: *`: O_EXCL on a folder, a conditional PUT on S3) and
 * afterwards changed only by compare-and-swap on its ETag: renewed by its holder, released
 * (marked released rather than deleted, so that release is a CAS too, and saying who released
 * it), or taken over once its holder is gone. A holder is gone when:
 * - its lease has run out on the storage's clock (`lock-clock.ts`: the lease lasts from the
 *   storage's stamp of the holder's last write, whatever the holder's and the reader's clocks
 *   say; a clock more than `MAX_CLOCK_SKEW_MS` off is reported, never taken for a dead holder),
 *   or, where the storage stamps nothing (a folder) or the record is older, its `expires_at`
 *   has passed on the reader's clock by `MAX_CLOCK_SKEW_MS`;
 * - its process is gone, or a zombie, on this machine: only a holder whose recorded start
 *   (`owner_started`) names this machine's boot id is judged by its pid (containers often share
 *   a hostname; a pid of another kernel says nothing here). A record without `owner_started`
 *   (before 0.3, or a holder without `/proc`) is never judged by its pid: by expiry and its run;
 * - its run is closed (a finisher died between the run's tombstone and the release);
 * - its run was never recorded, `recordGraceMs` after the lock was taken (a start that died
 *   between the lock and its first record; start-run's timeout bounds a live one).
 * A holder renews from the moment it holds the lock (`keepAlive`), and checks it (`check`)
 * before each step that others must not see twice; a release it did not make is a lost lock.
 */
import { hostname } from 'node:os';
import * as z from 'zod';
import { untilAborted } from '../../abort.js';
import { OutputLockedError, PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage, StoredObject } from '../../storage/storage.js';
import { type ClockSkew, StorageClock } from './lock-clock.js';
import { bootIdOfMarker, processIsGone, processStartMarker, thisBootId } from './process-alive.js';
import { parseRecord } from './records.js';

export const LockRecordSchema = z.object({
  run_id: z.string(),
  /** `pid@host` of a CLI, or `aws-lambda` for a run carried by the queues. */
  owner: z.string(),
  /** The holding process's start (`processStartMarker`): its pid, reused by another process, is not it. */
  owner_started: z.string().optional(),
  /** The holder's own random token (absent in locks before 0.3): how it knows its own release. */
  token: z.string().optional(),
  acquired_at: z.string(),
  expires_at: z.string(),
  /** When the holder wrote this record (took or renewed the lock), by its clock (absent before issue 32). */
  written_at: z.string().optional(),
  released_at: z.string().optional(),
  /** Who released it: the holder's token, or `closer` (a finisher that closed the run). */
  released_by: z.string().optional(),
});
export type LockRecord = z.infer<typeof LockRecordSchema>;

/** How often a waiting run looks at the lock again. */
const WAIT_POLL_MS = 2_000;

/**
 * The largest difference between two clocks that write and read the lock (a laptop, a CI
 * runner, Lambda hosts): an expiry is trusted only this long after it passed on the reader's clock.
 */
export const MAX_CLOCK_SKEW_MS = 60_000;

/** `released_by` of a release made by a finisher that closed the run, not by the holder. */
export const RELEASED_BY_CLOSER = 'closer';

export interface AcquireOptions {
  /**
   * The id of the run that takes the lock, from the moment it does: a run that waited for
   * another is younger than it, and run ids order runs. `previous` is the run the lock's record
   * names (its last holder): the id must sort after it, whatever this start's clock says.
   */
  newRunId: (at: Date, previous: string | undefined) => string;
  /** Who takes it; default `pid@host` of `process`. */
  owner?: string;
  /** The process that takes it and judges other holders; default this one ({@link thisProcess}). */
  process?: LockProcess;
  /** The lock expires this long after it was taken or last renewed. */
  ttlMs: number;
  /** Wait up to this long for a lock held by another run; default: refuse at once. */
  waitMs?: number;
  /**
   * A holder whose run has no record this long after it took the lock is gone (it writes its
   * record first thing). Default: no such rule.
   */
  recordGraceMs?: number;
  now?: () => Date;
  /** Waits between looks at a held lock, and between renewals; default a timer. */
  sleep?: (ms: number) => Promise<void>;
  /** The holder's token; default `Math.random`. */
  random?: () => number;
  /** Told of a clock (the holder's, or this process's) further from the storage's than the allowance. */
  onClockSkew?: (skew: ClockSkew) => void;
  /**
   * Told when a wait (`waitMs`) for a lock another run holds starts, and when it ends with the
   * lock taken; a wait that runs out ends in `OutputLockedError`. Observes only: a person who
   * waits (--wait-lock) is told so.
   */
  onWait?: (wait: LockWait) => void;
  /**
   * Ends a wait for a lock another run holds (Ctrl-C while --wait-lock waits): `acquire` rejects
   * with the signal's reason before its next look, or at once while it sleeps between looks. A
   * lock already written is this run's: the signal is then the run's to handle.
   */
  signal?: AbortSignal;
}

/** A wait for the lock: begun (who holds it, until when this run waits), or over with the lock taken. */
export type LockWait =
  | { state: 'waiting'; holder: LockRecord | undefined; until: Date }
  | { state: 'taken'; waitedMs: number };

/** `pid@host` of this process. */
export const processOwner = (): string => `${process.pid}@${hostname()}`;

/**
 * A process as the lock sees it: who it is, and how it tells whether a holder is gone. This
 * process by default ({@link thisProcess}); the lifecycle simulation gives each simulated CLI
 * its own (pid, machine), so that a killed one is gone to a reader on its machine only.
 */
export interface LockProcess {
  /** `pid@host`, the lock record's `owner`. */
  owner: string;
  /** `processStartMarker` of it (`<boot id>:<start ticks>`); undefined without `/proc`. */
  started: string | undefined;
  /** The boot id of its machine's kernel; undefined without `/proc`. */
  bootId: string | undefined;
  /** `processIsGone` on its machine: none runs as `pid` (exited, a zombie, or its pid reused). */
  isGone(pid: number, started: string | undefined): boolean;
}

/** This process, judging holders by `/proc` and `kill(pid, 0)` (`process-alive.ts`). */
export function thisProcess(): LockProcess {
  return {
    owner: processOwner(),
    started: processStartMarker(),
    bootId: thisBootId(),
    isGone: processIsGone,
  };
}

/**
 * True when the holder is a process of the judge's machine that no longer exists (or is a
 * zombie, or its pid now another process's). Of the judge's machine means: the same hostname and
 * the same boot id recorded in `started`; without `started` nothing says so, and it is not gone.
 */
function holderIsGone(owner: string, started: string | undefined, judge: LockProcess): boolean {
  const at = owner.lastIndexOf('@');
  if (at < 0 || owner.slice(at + 1) !== judge.owner.slice(judge.owner.lastIndexOf('@') + 1)) return false;
  if (started === undefined || judge.bootId === undefined || bootIdOfMarker(started) !== judge.bootId)
    return false;
  const pid = Number(owner.slice(0, at));
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (owner === judge.owner && started === judge.started) return false;
  return judge.isGone(pid, started);
}

/**
 * Whether a stored lock may be taken by what it says alone: released, expired on every clock,
 * or its process gone.
 */
export function lockIsFree(lock: LockRecord, now: Date, judge: LockProcess = thisProcess()): boolean {
  return (
    lock.released_at !== undefined ||
    Date.parse(lock.expires_at) + MAX_CLOCK_SKEW_MS <= now.getTime() ||
    holderIsGone(lock.owner, lock.owner_started, judge)
  );
}

/** Whether a held lock's run is over: closed, or never recorded within the grace. Reads storage. */
async function holderRunIsOver(
  storage: Storage,
  lock: LockRecord,
  stamped: Date | undefined,
  clock: StorageClock,
  recordGraceMs: number | undefined,
): Promise<boolean> {
  if ((await storage.get(STATE_KEYS.closed(lock.run_id))) !== undefined) return true;
  if (recordGraceMs === undefined) return false;
  // The record first: it is there but for a start that died, and the storage's clock costs a write.
  if ((await storage.get(STATE_KEYS.runRecord(lock.run_id))) !== undefined) return false;
  // A closing keeps its run's lock until the tombstone, its run record deleted or not (a closer
  // deletes a `starting` record before the tombstone: finish-run.ts).
  if ((await storage.get(STATE_KEYS.closing(lock.run_id))) !== undefined) return false;
  return (await clock.sinceAcquired(lock, stamped)) > recordGraceMs;
}

/**
 * Whether the stored lock may be taken now: released, its holder gone, its lease run out on
 * the storage's clock (`clock`), or its run over. Reads storage; may write `state/lock-clock.json`.
 */
async function mayTake(
  storage: Storage,
  found: StoredObject,
  held: LockRecord,
  judge: LockProcess,
  clock: StorageClock,
  recordGraceMs: number | undefined,
): Promise<boolean> {
  return (
    held.released_at !== undefined ||
    holderIsGone(held.owner, held.owner_started, judge) ||
    (await clock.expired(held, found.lastModified)) ||
    (await holderRunIsOver(storage, held, found.lastModified, clock, recordGraceMs))
  );
}

/** `onClockSkew` once per clock: a waiting start looks again every few seconds. */
function oncePerClock(report: ((skew: ClockSkew) => void) | undefined): (skew: ClockSkew) => void {
  const told = new Set<string>();
  return (skew) => {
    if (told.has(skew.clock)) return;
    told.add(skew.clock);
    report?.(skew);
  };
}

/**
 * The lock's record when a run holds the output now, by the rules a start takes it by
 * (`OutputLock.acquire`, without waiting); undefined when a start would take it. Reads, and
 * writes `state/lock-clock.json` when the lease looks over (to read the storage's clock).
 */
export async function lockHolder(
  storage: Storage,
  now: Date,
  recordGraceMs?: number,
  judge: LockProcess = thisProcess(),
  onClockSkew?: (skew: ClockSkew) => void,
): Promise<LockRecord | undefined> {
  const found = await storage.get(STATE_KEYS.lock);
  if (!found) return undefined;
  const held = parseRecord(LockRecordSchema, found.body, STATE_KEYS.lock);
  const clock = new StorageClock(storage, now, judge.owner, MAX_CLOCK_SKEW_MS, onClockSkew);
  if (await mayTake(storage, found, held, judge, clock, recordGraceMs)) return undefined;
  return held;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A lock this process holds on an output. */
export class OutputLock {
  readonly #storage: Storage;
  readonly #record: LockRecord & { token: string };
  readonly #ttlMs: number;
  readonly #now: () => Date;
  readonly #sleep: ((ms: number) => Promise<void>) | undefined;
  #etag: string;
  #lost = false;
  #released = false;
  #stopKeepAlive: (() => void) | undefined;
  /** The holder's writes, one at a time: two at once would fail each other's compare-and-swap. */
  #serial: Promise<unknown> = Promise.resolve();

  private constructor(
    storage: Storage,
    record: LockRecord & { token: string },
    etag: string,
    options: AcquireOptions,
  ) {
    this.#storage = storage;
    this.#record = record;
    this.#etag = etag;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? (() => new Date());
    this.#sleep = options.sleep;
  }

  /**
   * Takes the output's lock for a run. Throws `OutputLockedError` naming the holder when
   * another run holds it (after waiting `waitMs`, when given).
   *
   * @example
   * const lock = await OutputLock.acquire(storage, { newRunId, ttlMs: 60_000 });
   * lock.keepAlive(20_000, onError);
   * try { ...; await lock.check(); ... } finally { await lock.release(); }
   */
  static async acquire(storage: Storage, options: AcquireOptions): Promise<OutputLock> {
    const now = options.now ?? (() => new Date());
    const deadline = now().getTime() + (options.waitMs ?? 0);
    const key = STATE_KEYS.lock;
    const token = tokenOf(options.random ?? Math.random);
    const me = options.process ?? thisProcess();
    const onClockSkew = oncePerClock(options.onClockSkew);
    /** When this run began to wait, once it did. */
    let waitingSince: Date | undefined;
    for (;;) {
      options.signal?.throwIfAborted();
      const at = now();
      const owner = options.owner ?? me.owner;
      const started = owner === me.owner ? me.started : undefined;
      const current = await storage.get(key);
      const held = current ? parseRecord(LockRecordSchema, current.body, key) : undefined;
      const record = {
        run_id: options.newRunId(at, held?.run_id),
        owner,
        ...(started !== undefined ? { owner_started: started } : {}),
        token,
        acquired_at: at.toISOString(),
        expires_at: new Date(at.getTime() + options.ttlMs).toISOString(),
        written_at: at.toISOString(),
      };
      const clock = new StorageClock(storage, at, owner, MAX_CLOCK_SKEW_MS, onClockSkew);
      const free =
        !current || !held || (await mayTake(storage, current, held, me, clock, options.recordGraceMs));
      if (free) {
        try {
          const { etag } = await storage.put(key, encodeLock(record), {
            ...(current ? { ifMatch: current.etag } : { ifNoneMatch: '*' }),
          });
          if (waitingSince)
            options.onWait?.({ state: 'taken', waitedMs: at.getTime() - waitingSince.getTime() });
          return new OutputLock(storage, record, etag, options);
        } catch (error) {
          if (!(error instanceof PreconditionFailedError)) throw error;
          continue; // Another run took it between our read and write: look again.
        }
      }
      if (now().getTime() >= deadline) throw lockedError(storage, held);
      if (!waitingSince) {
        waitingSince = at;
        options.onWait?.({ state: 'waiting', holder: held, until: new Date(deadline) });
      }
      await untilAborted((options.sleep ?? defaultSleep)(WAIT_POLL_MS), options.signal);
    }
  }

  get runId(): string {
    return this.#record.run_id;
  }

  /** When this run took the lock: its start. */
  get acquiredAt(): Date {
    return new Date(this.#record.acquired_at);
  }

  /** True once a renewal found the lock taken over or released by someone else. */
  get lost(): boolean {
    return this.#lost;
  }

  /**
   * Renews the lock every `everyMs` until it is released or lost, from now on: a run that
   * holds an output renews while it recovers, verifies and lists too, however long the API
   * makes it wait. A failed renewal is passed to `onError` (a lost lock stops the renewals).
   */
  keepAlive(everyMs: number, onError: (error: unknown) => void): void {
    if (this.#stopKeepAlive) return;
    const renew = () => this.renew().catch(onError);
    if (this.#sleep === undefined) {
      const timer = setInterval(() => void renew(), everyMs);
      timer.unref(); // The run's own work keeps the process alive, not its lock.
      this.#stopKeepAlive = () => clearInterval(timer);
      return;
    }
    const sleep = this.#sleep;
    let stopped = false;
    this.#stopKeepAlive = () => {
      stopped = true;
    };
    void (async () => {
      while (!stopped && !this.#lost && !this.#released) {
        await sleep(everyMs);
        if (!stopped) await renew();
      }
    })();
  }

  /**
   * Moves the expiry on; throws `OutputLockedError` when the lock was taken over or released
   * by someone else meanwhile. A no-op once this holder has released it.
   */
  renew(): Promise<void> {
    return this.#oneAtATime(() => this.#renew());
  }

  async #renew(): Promise<void> {
    if (this.#released) return;
    if (this.#lost) throw this.#lostError(undefined);
    const now = this.#now();
    const expires = new Date(now.getTime() + this.#ttlMs).toISOString();
    try {
      ({ etag: this.#etag } = await this.#storage.put(
        STATE_KEYS.lock,
        encodeLock({ ...this.#record, expires_at: expires, written_at: now.toISOString() }),
        { ifMatch: this.#etag },
      ));
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      const current = await this.#storage.get(STATE_KEYS.lock);
      const held = current ? parseRecord(LockRecordSchema, current.body, STATE_KEYS.lock) : undefined;
      if (held?.token === this.#record.token && held.released_by === this.#record.token) {
        this.#released = true; // Our own release, whose answer reached us late.
        return;
      }
      this.#lost = true;
      this.#stopKeepAlive?.();
      throw this.#lostError(error);
    }
  }

  /** Stops the renewals `keepAlive` started (the run is closing: it needs the lock a moment more at most). */
  stopRenewing(): void {
    this.#stopKeepAlive?.();
  }

  /** Proves the lock is still this run's (a renewal); throws `OutputLockedError` if it is not. */
  async check(): Promise<void> {
    if (this.#released) throw this.#lostError(undefined);
    await this.renew();
  }

  /** Releases the lock, if this run still holds it, and stops renewing it. */
  release(): Promise<void> {
    this.#stopKeepAlive?.();
    return this.#oneAtATime(async () => {
      if (this.#lost || this.#released) return;
      await releaseLockOf(this.#storage, this.#record.run_id, this.#now(), this.#record.token);
      this.#released = true;
    });
  }

  #oneAtATime(write: () => Promise<void>): Promise<void> {
    const next = this.#serial.then(write);
    this.#serial = next.catch(() => undefined);
    return next;
  }

  #lostError(cause: unknown): OutputLockedError {
    return new OutputLockedError(
      `run ${this.#record.run_id} lost the lock on ${this.#storage.location}: another run or finisher took it over`,
      { cause, hint: 'this run stops without publishing; run again' },
    );
  }
}

/**
 * Releases the lock a run took, when it still holds it: how a finisher that did not take the
 * lock itself (AWS finish-run, or the next run closing an interrupted one) lets it go. `by` is
 * the holder's token when the holder releases, `RELEASED_BY_CLOSER` otherwise.
 */
export async function releaseLockOf(
  storage: Storage,
  runId: string,
  now: Date,
  by: string = RELEASED_BY_CLOSER,
): Promise<void> {
  const current = await storage.get(STATE_KEYS.lock);
  if (!current) return;
  const held = parseRecord(LockRecordSchema, current.body, STATE_KEYS.lock);
  if (held.run_id !== runId || held.released_at !== undefined) return;
  try {
    await storage.put(
      STATE_KEYS.lock,
      encodeLock({ ...held, released_at: now.toISOString(), released_by: by }),
      { ifMatch: current.etag },
    );
  } catch (error) {
    // Taken over or renewed meanwhile: taken over, it is no longer this run's to release;
    // renewed, its holder is alive and releases it itself.
    if (!(error instanceof PreconditionFailedError)) throw error;
  }
}

/** A holder's token: 16 hex digits. */
function tokenOf(random: () => number): string {
  let hex = '';
  for (let i = 0; i < 16; i++) hex += Math.floor(random() * 16).toString(16);
  return hex;
}

const encodeLock = (record: LockRecord): string => `${JSON.stringify(record)}\n`;

/** The error of a start that finds the output held by `held`. */
export function lockedError(storage: Storage, held: LockRecord | undefined): OutputLockedError {
  const who = held ? `run ${held.run_id} (${held.owner}, since ${held.acquired_at})` : 'another run';
  return new OutputLockedError(`${who} is writing to ${storage.location}`, {
    hint: held
      ? `wait for it to finish (--wait-lock <seconds> waits); if it died, its lock expires at ${held.expires_at}`
      : 'wait for it to finish (--wait-lock <seconds> waits)',
  });
}
