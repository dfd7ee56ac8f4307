/**
 * One run at a time per output. The lock is one object, `state/lock.json`, taken by a
 * conditional create (`If-None-Match: *`: O_EXCL on a folder, a conditional PUT on S3) and
 * afterwards changed only by compare-and-swap on its ETag: renewed by its holder, released by
 * it (marked released rather than deleted, so that release is a CAS too), or taken over once
 * it has expired. A holder that crashed stops renewing, and its lock expires; on the same host
 * a holder whose process is gone is known dead at once.
 */
import { hostname } from 'node:os';
import * as z from 'zod';
import { OutputLockedError, PreconditionFailedError } from '../../errors.js';
import type { Storage } from '../../storage/storage.js';
import { STATE_KEYS } from '../layout.js';
import { parseRecord } from './records.js';

export const LockRecordSchema = z.object({
  run_id: z.string(),
  /** `pid@host` of a CLI, or `aws-lambda` for a run carried by the queues. */
  owner: z.string(),
  acquired_at: z.string(),
  expires_at: z.string(),
  released_at: z.string().optional(),
});
export type LockRecord = z.infer<typeof LockRecordSchema>;

/** How often a waiting run looks at the lock again. */
const WAIT_POLL_MS = 2_000;

export interface AcquireOptions {
  /**
   * The id of the run that takes the lock, from the moment it does: a run that waited for
   * another is younger than it, and run ids order runs.
   */
  newRunId: (at: Date) => string;
  /** Who takes it; default `pid@host` of this process. */
  owner?: string;
  /** The lock expires this long after it was taken or last renewed. */
  ttlMs: number;
  /** Wait up to this long for a lock held by another run; default: refuse at once. */
  waitMs?: number;
  now?: () => Date;
  /** Waits between looks at a held lock; default a timer. */
  sleep?: (ms: number) => Promise<void>;
}

/** `pid@host` of this process. */
export const processOwner = (): string => `${process.pid}@${hostname()}`;

/** True when the holder is a process of this host that no longer exists. */
function holderIsGone(owner: string): boolean {
  const at = owner.lastIndexOf('@');
  if (at < 0 || owner.slice(at + 1) !== hostname()) return false;
  const pid = Number(owner.slice(0, at));
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Whether a stored lock may be taken: released, expired, or its process gone. */
export function lockIsFree(lock: LockRecord, now: Date): boolean {
  return (
    lock.released_at !== undefined || Date.parse(lock.expires_at) <= now.getTime() || holderIsGone(lock.owner)
  );
}

/** A lock this process holds on an output. */
export class OutputLock {
  readonly #storage: Storage;
  readonly #record: LockRecord;
  readonly #ttlMs: number;
  readonly #now: () => Date;
  #etag: string;
  #lost = false;
  #released = false;

  private constructor(storage: Storage, record: LockRecord, etag: string, ttlMs: number, now: () => Date) {
    this.#storage = storage;
    this.#record = record;
    this.#etag = etag;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /**
   * Takes the output's lock for a run. Throws `OutputLockedError` naming the holder when
   * another run holds it (after waiting `waitMs`, when given).
   *
   * @example
   * const lock = await OutputLock.acquire(storage, { newRunId, ttlMs: 60_000 });
   * try { ...; await lock.renew(); ... } finally { await lock.release(); }
   */
  static async acquire(storage: Storage, options: AcquireOptions): Promise<OutputLock> {
    const now = options.now ?? (() => new Date());
    const deadline = now().getTime() + (options.waitMs ?? 0);
    const key = STATE_KEYS.lock;
    for (;;) {
      const at = now();
      const record: LockRecord = {
        run_id: options.newRunId(at),
        owner: options.owner ?? processOwner(),
        acquired_at: at.toISOString(),
        expires_at: new Date(at.getTime() + options.ttlMs).toISOString(),
      };
      const current = await storage.get(key);
      const held = current ? parseRecord(LockRecordSchema, current.body, key) : undefined;
      if (!held || lockIsFree(held, at)) {
        try {
          const { etag } = await storage.put(key, encodeLock(record), {
            ...(current ? { ifMatch: current.etag } : { ifNoneMatch: '*' }),
          });
          return new OutputLock(storage, record, etag, options.ttlMs, now);
        } catch (error) {
          if (!(error instanceof PreconditionFailedError)) throw error;
          continue; // Another run took it between our read and write: look again.
        }
      }
      if (now().getTime() >= deadline) throw lockedError(storage, held);
      await (options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))))(WAIT_POLL_MS);
    }
  }

  get runId(): string {
    return this.#record.run_id;
  }

  /** When this run took the lock: its start. */
  get acquiredAt(): Date {
    return new Date(this.#record.acquired_at);
  }

  /** True once a renewal found the lock taken over (this process stalled past its expiry). */
  get lost(): boolean {
    return this.#lost;
  }

  /**
   * Moves the expiry on; throws `OutputLockedError` when the lock was taken over meanwhile.
   * A no-op once the run has released it (finishing releases it).
   */
  async renew(): Promise<void> {
    if (this.#released) return;
    const expires = new Date(this.#now().getTime() + this.#ttlMs).toISOString();
    try {
      ({ etag: this.#etag } = await this.#storage.put(
        STATE_KEYS.lock,
        encodeLock({ ...this.#record, expires_at: expires }),
        { ifMatch: this.#etag },
      ));
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      const current = await this.#storage.get(STATE_KEYS.lock);
      const held = current ? parseRecord(LockRecordSchema, current.body, STATE_KEYS.lock) : undefined;
      if (held?.run_id === this.#record.run_id && held.released_at !== undefined) {
        this.#released = true; // Released by the finish step meanwhile.
        return;
      }
      this.#lost = true;
      throw new OutputLockedError(
        `run ${this.#record.run_id} lost the lock on ${this.#storage.location}: it expired and another run took it over`,
        { cause: error, hint: 'this run stops without publishing; run again' },
      );
    }
  }

  /** Releases the lock, if this run still holds it. */
  async release(): Promise<void> {
    if (this.#lost || this.#released) return;
    await releaseLockOf(this.#storage, this.#record.run_id, this.#now());
    this.#released = true;
  }
}

/**
 * Releases the lock a run took, when it still holds it: how a finisher that did not take the
 * lock itself (AWS finish-run, or the next run closing an interrupted one) lets it go.
 */
export async function releaseLockOf(storage: Storage, runId: string, now: Date): Promise<void> {
  const current = await storage.get(STATE_KEYS.lock);
  if (!current) return;
  const held = parseRecord(LockRecordSchema, current.body, STATE_KEYS.lock);
  if (held.run_id !== runId || held.released_at !== undefined) return;
  try {
    await storage.put(STATE_KEYS.lock, encodeLock({ ...held, released_at: now.toISOString() }), {
      ifMatch: current.etag,
    });
  } catch (error) {
    // Taken over meanwhile (it had expired): it is no longer this run's to release.
    if (!(error instanceof PreconditionFailedError)) throw error;
  }
}

const encodeLock = (record: LockRecord): string => `${JSON.stringify(record)}\n`;

function lockedError(storage: Storage, held: LockRecord | undefined): OutputLockedError {
  const who = held ? `run ${held.run_id} (${held.owner}, since ${held.acquired_at})` : 'another run';
  return new OutputLockedError(`${who} is writing to ${storage.location}`, {
    hint: held
      ? `wait for it to finish (--wait-lock <seconds> waits); if it died, its lock expires at ${held.expires_at}`
      : 'wait for it to finish (--wait-lock <seconds> waits)',
  });
}
