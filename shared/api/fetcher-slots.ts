/**
 * Fetcher slots: at most `slots` export-reports invocations of a deployment send API requests
 * at once. The report queue's event source cannot run fewer than 2 invocations (Lambda's
 * minimum for maximum concurrency), and at the default rate ceiling the run is rate-bound: a
 * second invocation only waits for its part of the shared request budget, billed all the while
 * (BENCHMARKS.md, cost). An invocation takes a slot (an item in the request budget's table)
 * before it fetches; one that finds every slot taken hands its units on to a later delivery.
 *
 * A slot is a lease: looked at first (a read: while a run is fetched, most invocations find it
 * taken), then taken when absent, expired or already the taker's, `until` FETCHER_LEASE_MS
 * ahead, renewed every FETCHER_RENEW_MS while the invocation works, deleted when it ends.
 * - A holder that crashes or times out leaves its item: it lapses at `until`, and the next
 *   invocation takes it then.
 * - A holder that outlives its lease (frozen, or its renewals failed) and finds the slot taken
 *   by another has lost it: `lost()` turns true, and the handler stops sending requests (its
 *   units are cut short and handed on, as at its time for requests).
 * - The slot is a saving, not a safety: the request budget bounds the rate whoever fetches. So a
 *   table that fails is failed open: the invocation fetches (`open`), as a container whose
 *   budget table fails keeps fetching at its fallback share. Failing closed would hand every
 *   batch on, again and again, until the run's deadline deferred them all.
 * - Times are the takers' wall clocks (Lambda's are NTP-synchronised to milliseconds): a clock
 *   ahead by s sees a lease lapse s early, and two invocations fetch side by side for s at
 *   most, within the budget.
 */
import type { Clock } from './clock.js';

/** The item of slot `slot` of a deployment's stage, in the request budget's table. */
export const fetcherKey = (stage: string, slot: number) => `fetcher#${stage}#${slot}`;

/**
 * A slot lapses this long after its last renewal: a crashed holder blocks the others this long
 * at most (against a run of thousands of seconds), and three renewals may fail in a row first.
 */
export const FETCHER_LEASE_MS = 30_000;
/** A holder renews its slot this often while it works. */
export const FETCHER_RENEW_MS = 10_000;

/**
 * Seconds a batch waits (DelaySeconds of its new messages) when every slot is taken. Each wait
 * is a short invocation (~0.1 s at 1 GB), three SQS requests and a failed conditional write:
 * at 300 s a 100,000-report run (5,556 s, 500 batches waiting 250 on average) makes ~4,600 of
 * them, ~$0.015; at 60 s five times that. Its other cost is at the end: a batch may come back
 * up to this long after the last holder is done, within one of finish-run's 5-minute looks.
 * A share of it is drawn at random (`fetcherWaitSeconds`), so that batches sent on together do
 * not all come back together.
 */
export const FETCHER_WAIT_SECONDS = 300;

/** A wait drawn in [FETCHER_WAIT_SECONDS / 2, FETCHER_WAIT_SECONDS], whole seconds (SQS's unit). */
export const fetcherWaitSeconds = (random: () => number): number =>
  Math.round(FETCHER_WAIT_SECONDS * (0.5 + random() / 2));

/** Where the slots live; `now` and `until` are epoch ms. */
export interface FetcherSlotStore {
  /**
   * Who holds slot `slot` and until when, as a read that may be a little stale (undefined when
   * nobody does): a look before `take`, since a busy invocation's conditional write that fails
   * is billed as a write, five times a read. Correctness rests on `take` alone: a stale read
   * only skips a slot just freed (a wait) or tries one just taken (the write fails).
   */
  holderOf(slot: number): Promise<{ holder: string; until: number } | undefined>;
  /**
   * Sets slot `slot` to `holder` until `until` if it is absent, lapsed (`until` < `now`) or held
   * by `holder` already; false when another holds it.
   */
  take(slot: number, holder: string, until: number, now: number): Promise<boolean>;
  /** Deletes slot `slot` if `holder` holds it (nothing otherwise). */
  release(slot: number, holder: string): Promise<void>;
}

/** An invocation's claim: a slot held, every slot busy, or open (the store failed: fetch anyway). */
export type FetcherHold =
  | { kind: 'held'; slot: number; lost(): boolean; release(): Promise<void> }
  | { kind: 'busy' }
  | { kind: 'open'; error: unknown; lost(): boolean; release(): Promise<void> };

export interface TakeFetcherOptions {
  slots: number;
  /** This invocation's id: unique, so that a slot it lost is never taken for its own. */
  holder: string;
  clock: Pick<Clock, 'wallNow' | 'sleep'>;
  /** Random in [0, 1): which slot is tried first. */
  random?: () => number;
  /** A store call failed (logged by the caller); the invocation goes on. */
  onStoreError?: (error: unknown, during: 'take' | 'renew' | 'release') => void;
}

/**
 * Takes a free slot, trying each once from a random one, and renews it until `release()`.
 *
 * @example
 * const hold = await takeFetcher(store, { slots: 1, holder: randomUUID(), clock: systemClock });
 * if (hold.kind === 'busy') return handOnLater(units);
 * try { ... } finally { await hold.release(); }
 */
export async function takeFetcher(
  store: FetcherSlotStore,
  options: TakeFetcherOptions,
): Promise<FetcherHold> {
  const { slots, holder, clock } = options;
  const first = Math.floor((options.random ?? Math.random)() * slots);
  let slot: number | undefined;
  try {
    for (let i = 0; i < slots && slot === undefined; i++) {
      const candidate = (first + i) % slots;
      const seen = await store.holderOf(candidate);
      const now = clock.wallNow();
      if (seen && seen.until >= now && seen.holder !== holder) continue;
      if (await store.take(candidate, holder, now + FETCHER_LEASE_MS, now)) slot = candidate;
    }
  } catch (error) {
    options.onStoreError?.(error, 'take');
    return { kind: 'open', error, lost: () => false, release: async () => {} };
  }
  if (slot === undefined) return { kind: 'busy' };
  const held = slot;
  let lost = false;
  const stop = new AbortController();
  const renewing = (async () => {
    while (!stop.signal.aborted && !lost) {
      await clock.sleep(FETCHER_RENEW_MS, stop.signal);
      if (stop.signal.aborted) return;
      const now = clock.wallNow();
      try {
        // Another holder took it after it lapsed: this invocation must stop fetching.
        if (!(await store.take(held, holder, now + FETCHER_LEASE_MS, now))) lost = true;
      } catch (error) {
        // Kept: the lease runs on, and the next renewal may get through.
        options.onStoreError?.(error, 'renew');
      }
    }
  })();
  return {
    kind: 'held',
    slot: held,
    lost: () => lost,
    release: async () => {
      stop.abort();
      await renewing;
      try {
        await store.release(held, holder);
      } catch (error) {
        // It lapses within FETCHER_LEASE_MS instead.
        options.onStoreError?.(error, 'release');
      }
    },
  };
}
