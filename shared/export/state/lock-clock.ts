/**
 * A lock's expiry on the storage's clock, so that clocks far apart never make a live holder
 * look dead. The holder writes its expiry by its own clock (`expires_at`) and, since issue 32,
 * the instant of each write by that clock (`written_at`); the storage stamps each write by its
 * own (S3's `LastModified`). The lease then lasts `expires_at - written_at` (one clock: the
 * skew cancels) from the write's `LastModified`, and it has run out when a write the reader
 * makes itself (`state/lock-clock.json`, only once the lease looks over by the reader's clock,
 * or the reader's clock is evidently behind) is stamped that much later. Both stamps are the
 * storage's: the holder's and the reader's clocks may be any distance apart.
 *
 * A clock more than `MAX_CLOCK_SKEW_MS` from the storage's is reported (`onClockSkew`): the
 * holder's, from its write's two times; the reader's, from its own write's. Where the storage
 * stamps nothing (a folder: `LocalStorage`, one machine's clock) or the record has no
 * `written_at` (a lock of an older version), the expiry is the holder's `expires_at` read by
 * the reader's clock with the allowance, as before: clocks further apart than the allowance
 * there are not detected.
 */
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';

/** How far the storage's stamp of a write may lag or lead it: S3 stamps whole seconds. */
export const STORAGE_STAMP_MARGIN_MS = 2_000;

/** A clock found further from the storage's than the allowance. */
export interface ClockSkew {
  /** Whose: the lock holder's (`pid@host` or `aws-lambda`, and its run) or this process's. */
  clock: string;
  /** How far ahead of the storage's clock (negative: behind), in ms. */
  skewMs: number;
  /** One line for a log: whose clock, how far off, and what to do. */
  message: string;
}

/** A lock record's times as the clock rules need them. */
export interface LockTimes {
  run_id: string;
  owner: string;
  acquired_at: string;
  expires_at: string;
  written_at?: string | undefined;
}

/**
 * The storage's clock as one reader of the lock sees it: the instant of its own write, made at
 * most once (the first question that needs it), and the skews it found on the way.
 */
export class StorageClock {
  readonly #storage: Storage;
  readonly #now: Date;
  readonly #by: string;
  readonly #allowanceMs: number;
  readonly #onSkew: (skew: ClockSkew) => void;
  #stamp: Promise<number | undefined> | undefined;

  constructor(
    storage: Storage,
    now: Date,
    by: string,
    allowanceMs: number,
    onSkew: (skew: ClockSkew) => void = () => {},
  ) {
    this.#storage = storage;
    this.#now = now;
    this.#by = by;
    this.#allowanceMs = allowanceMs;
    this.#onSkew = onSkew;
  }

  /**
   * Whether the lease the record gave has run out. `stamped` is the storage's stamp of the
   * record's write (undefined where the storage gives none).
   */
  async expired(lock: LockTimes, stamped: Date | undefined): Promise<boolean> {
    const now = this.#now.getTime();
    const byReaderClock = Date.parse(lock.expires_at) + this.#allowanceMs <= now;
    if (stamped === undefined || lock.written_at === undefined) return byReaderClock;
    const writtenAt = Date.parse(lock.written_at);
    this.#check(`the lock holder's (${lock.owner}, run ${lock.run_id})`, writtenAt - stamped.getTime());
    const leaseEnds = stamped.getTime() + (Date.parse(lock.expires_at) - writtenAt);
    // Looks live on this clock, which is not evidently behind the storage's: no write needed.
    const behind = stamped.getTime() - now > this.#allowanceMs;
    if (!behind && now < leaseEnds + this.#allowanceMs) return false;
    const storageNow = await this.now();
    if (storageNow === undefined) return byReaderClock;
    return storageNow >= leaseEnds + STORAGE_STAMP_MARGIN_MS;
  }

  /**
   * How long ago, on the storage's clock, the lock was taken (its `acquired_at`, moved by the
   * holder's skew): for the rule of a start that never recorded its run.
   */
  async sinceAcquired(lock: LockTimes, stamped: Date | undefined): Promise<number> {
    const byReaderClock = this.#now.getTime() - Date.parse(lock.acquired_at) - this.#allowanceMs;
    if (stamped === undefined || lock.written_at === undefined) return byReaderClock;
    const storageNow = await this.now();
    if (storageNow === undefined) return byReaderClock;
    const acquired = stamped.getTime() - (Date.parse(lock.written_at) - Date.parse(lock.acquired_at));
    return storageNow - acquired - STORAGE_STAMP_MARGIN_MS;
  }

  /** The storage's clock now: the stamp of a write of this reader's (undefined: none given). */
  now(): Promise<number | undefined> {
    this.#stamp ??= this.#probe();
    return this.#stamp;
  }

  async #probe(): Promise<number | undefined> {
    const writtenAt = this.#now;
    const body = `${JSON.stringify({ written_at: writtenAt.toISOString(), by: this.#by })}\n`;
    await this.#storage.put(STATE_KEYS.lockClock, body);
    const stamped = (await this.#storage.get(STATE_KEYS.lockClock))?.lastModified;
    if (stamped === undefined) return undefined;
    this.#check(`this process's (${this.#by})`, writtenAt.getTime() - stamped.getTime());
    return stamped.getTime();
  }

  #check(clock: string, skewMs: number): void {
    if (Math.abs(skewMs) <= this.#allowanceMs + STORAGE_STAMP_MARGIN_MS) return;
    const seconds = Math.round(Math.abs(skewMs) / 1000);
    this.#onSkew({
      clock,
      skewMs,
      message:
        `clock skew: ${clock} clock is ${seconds} s ${skewMs > 0 ? 'ahead of' : 'behind'} the storage's, ` +
        `more than the ${this.#allowanceMs / 1000} s allowed; the lock is judged by the storage's clock, ` +
        'but set that machine’s clock right (NTP): run ids and dt partitions follow it',
    });
  }
}
