/**
 * One request budget for a whole deployment. Every container that calls the API takes its
 * requests from one token bucket kept in a shared store (a DynamoDB item in AWS), so the
 * configured ceiling bounds the deployment, not each container. The bucket is kept as a
 * theoretical arrival time (GCRA): a lease of n tokens is the next n slots of the shared
 * schedule, one write per lease whatever the wait, and leases of different containers never
 * overlap. The shared rate adapts to the API: a 429 seen by any container lowers it for all
 * (by the share of 429s that container saw), and it grows back slowly (AIMD).
 *
 * The item's time. Its times are not any one machine's wall clock but the item's own clock:
 * every write stamps `grownAt` with the writer's estimate of the item's time, and a container
 * estimates it as its wall clock plus an offset it learns from what it reads (a stamp it reads
 * was written before it read it, so `grownAt − wallNow` is a lower bound of the offset; the
 * offset only grows, up to MAX_SKEW_MS). The item's time is thus the clock of the fastest
 * container, and every container reads the schedule on it: a container 30 s ahead makes the
 * others add 30 s, it does not push their slots 30 s out. The cost: when a faster clock first
 * writes, the item's time jumps, and the slots leased just before (at most a lease slice and
 * MAX_QUEUE_MS of them) may overlap the first lease after the jump; once per jump, not per lease.
 *
 * What it trusts. An honest writer never leases a slot more than MAX_QUEUE_MS ahead of its
 * time (a container finding the schedule booked further waits, at most a slice, and asks
 * again), so `tat` is at most a slice and a second ahead of the item's time, `grownAt` never
 * ahead of it, and `holdUntil` at most a slice and HOLD_AFTER_QUEUE_MS ahead. A time beyond
 * those bounds (a bad write, or a clock more than MAX_SKEW_MS ahead) is not believed: the
 * container repairs the item with its next conditional write (the time back to its own) and
 * reports it once. So whatever the item says, a lease starts at most MAX_QUEUE_MS after it is
 * taken, and no caller waits longer than a slice and a second for what the item says (callers
 * beyond what the rate serves still wait their turn).
 *
 * The fallback. A container whose table fails cannot tell the others, so the leasers always
 * leave room for it: the containers leasing share `leasingCeiling` = the ceiling less
 * FALLBACK_HEADROOM of it, and a container in fallback keeps to `fallbackRate`, the headroom
 * divided among the other containers that may call the API. Any mix of leasing and falling
 * back stays under the ceiling; the cost is the headroom, which the leasers never use.
 */

import { type Clock, systemClock } from './clock.js';

/** The item's key for a deployment's stage. */
export const budgetKey = (stage: string) => `request-budget#${stage}`;

/** The shared item. Times are epoch ms on the item's clock (see above), not a machine's own. */
export interface BudgetState {
  /** When the tokens granted so far are spent at the shared rate (GCRA's theoretical arrival time). */
  tat: number;
  /** The deployment's rate at `grownAt`, req/s (the ceiling before any cut). */
  base: number;
  /**
   * When the item was last written (0: never), by a lease, a cut or a repair: the rate grows from
   * then, and readers learn the item's time from it.
   */
  grownAt: number;
  /** 429s before this time belong to the congestion event already answered by a cut. */
  holdUntil: number;
  /** Raised by every write; a write holds only if nobody wrote since the read. */
  version: number;
}

/** A write's outcome: on a conflict, the stored state when the store returns it. */
export type BudgetWrite = { ok: true } | { ok: false; current?: BudgetState | undefined };

/** Where the shared state lives; a write is conditional on the version read. */
export interface BudgetStore {
  read(): Promise<BudgetState | undefined>;
  /** Writes `next` if the stored version is still `expected` (undefined: no item yet). */
  write(next: BudgetState, expected: number | undefined): Promise<BudgetWrite>;
}

/**
 * A run of slots of the shared schedule: token i may be spent from `start + i × interval`. The
 * times are the item's in the pure functions, the container's wall clock out of SharedBudget.
 */
export interface Lease {
  start: number;
  interval: number;
  tokens: number;
  /** After this the unused tokens are gone (not hoarded). */
  expiresAt: number;
}

export interface BudgetPolicy {
  /** The deployment's ceiling, req/s (RATE_CEILING). */
  ceiling: number;
  /** A run of cuts never goes below this, req/s. */
  minRate?: number;
  /**
   * The most containers that call the API at once (API_CONTAINERS; default 1): the leasers
   * leave room for the others to fall back (see `leasingCeiling`).
   */
  containers?: number;
}

/**
 * A lease is at most this long a stretch of the shared schedule while the rate is below the
 * ceiling (the API pushed back, and the rate grows back): short leases let a cut reach the API soon.
 */
export const LEASE_MS = 250;
/**
 * ...and at most this long while the rate is at the leasers' ceiling, where nothing is being
 * learned: a write per second of schedule, not four. A run is rate-bound at the default
 * ceiling, and each write is billed (BENCHMARKS.md, cost).
 */
export const STEADY_LEASE_MS = 1_000;
/** An idle deployment may spend this much of its rate at once (GCRA's burst tolerance). */
const BURST_MS = 100;
/** Unused tokens of a lease lapse this long after its last slot, or after it was handed out. */
export const LEASE_GRACE_MS = 100;
/** While leases are taken, the rate grows by this share of itself per second (the additive increase)... */
const INCREASE_PER_S = 0.01;
/** ...counting at most this long between two leases: an idle deployment keeps the rate it learned. */
const IDLE_GROWTH_MS = 1_000;
/** A cut sets the rate this far below the limit measured from the share of 429s. */
const DIP = 0.05;
/** A cut lowers the rate at least this much, and at most to this share of it. */
const MIN_CUT = 0.05;
const MAX_CUT_TO = 0.5;
/**
 * 429s answered within this time after the slots leased at the old rate belong to the same event:
 * the cut reaches the API with the next leases, and their answers a round trip later. (Slots
 * leased further ahead count for a lease slice at most: containers that meet 429s thin those.)
 */
const HOLD_AFTER_QUEUE_MS = 500;
const DEFAULT_MIN_RATE = 0.2;
/** Containers' wall clocks are at most this far apart: the item's time is believed this far ahead of ours. */
export const MAX_SKEW_MS = 60_000;
/**
 * A lease starts at most this long after it is taken; with the slice it spans, the longest a
 * caller waits on what the item says.
 */
export const MAX_QUEUE_MS = 1_000;
/** Share of the ceiling the leasers leave to containers whose table failed (they cannot say so). */
export const FALLBACK_HEADROOM = 0.1;
/** Attempts of a read-modify-write before the store is deemed unusable... */
const MAX_ATTEMPTS = 10;
/** ...with a random pause of up to this many ms times the attempt between them (others write meanwhile). */
const CONFLICT_BACKOFF_MS = 5;

/**
 * A container in fallback keeps to this, req/s: the headroom the leasers leave, shared by the
 * other containers that may fall back while one leases (all of the ceiling when it is alone).
 */
export function fallbackRate(policy: BudgetPolicy): number {
  const others = (policy.containers ?? 1) - 1;
  return others < 1 ? policy.ceiling : (policy.ceiling * FALLBACK_HEADROOM) / others;
}

/** The containers leasing share this, req/s: the ceiling less what the others may take in fallback. */
export function leasingCeiling(policy: BudgetPolicy): number {
  const others = (policy.containers ?? 1) - 1;
  return policy.ceiling - Math.max(0, others) * fallbackRate(policy);
}

/**
 * The longest stretch of the schedule one lease may span at `rate`, whatever the policy:
 * STEADY_LEASE_MS, or one slot when a slot is longer.
 */
export function sliceMs(rate: number): number {
  return Math.max(STEADY_LEASE_MS, 1000 / rate);
}

/** The stretch of the schedule a lease taken at `rate` spans at most: see LEASE_MS and STEADY_LEASE_MS. */
export function leaseSliceMs(rate: number, policy: BudgetPolicy): number {
  return rate >= leasingCeiling(policy) ? STEADY_LEASE_MS : LEASE_MS;
}

/**
 * The longest a caller waits on what the item says at `rate`: a lease starts within
 * MAX_QUEUE_MS and spans a slice (default: at the lowest rate, the longest at all).
 */
export function maxGrantWaitMs(policy: BudgetPolicy, rate = policy.minRate ?? DEFAULT_MIN_RATE): number {
  return MAX_QUEUE_MS + sliceMs(rate);
}

/**
 * The fields of `state` no honest writer could have written by `now` (the item's time as this
 * container knows it): `tat` more than a queue and a slice ahead, `grownAt` ahead, `holdUntil`
 * more than a slice and the hold ahead. Empty when the item is believed.
 */
export function untrustedFields(
  state: BudgetState,
  now: number,
  policy: BudgetPolicy,
): (keyof BudgetState)[] {
  // Slots leased a moment ago were at most a second of growth (1%) longer than they are now.
  const leasedAt = budgetRate(state, now, policy) / (1 + INCREASE_PER_S);
  const bounds: [keyof BudgetState, number][] = [
    ['tat', now + maxGrantWaitMs(policy, leasedAt)],
    ['grownAt', now],
    ['holdUntil', now + STEADY_LEASE_MS + HOLD_AFTER_QUEUE_MS],
  ];
  return bounds.filter(([field, bound]) => state[field] > bound).map(([field]) => field);
}

/** `state` with each time beyond its bound (see `untrustedFields`) set back to `now`. */
export function repairBudget(state: BudgetState, now: number, policy: BudgetPolicy): BudgetState {
  const repaired = { ...state };
  for (const field of untrustedFields(state, now, policy)) repaired[field] = now;
  return repaired;
}

/** The state of a deployment nobody has leased from yet. */
export function initialBudget(policy: BudgetPolicy): BudgetState {
  return { tat: 0, base: policy.ceiling, grownAt: 0, holdUntil: 0, version: 0 };
}

/**
 * The shared rate at `now`, req/s: the base, grown since it was set, within the bounds. Only
 * the time the deployment is leasing counts (at most IDLE_GROWTH_MS between two leases): the
 * next run starts at the rate the last one learned, not back at the ceiling.
 */
export function budgetRate(state: BudgetState, now: number, policy: BudgetPolicy): number {
  const growingMs = state.grownAt === 0 ? 0 : Math.min(IDLE_GROWTH_MS, Math.max(0, now - state.grownAt));
  const grown = state.base * (1 + (INCREASE_PER_S * growingMs) / 1000);
  return Math.min(leasingCeiling(policy), Math.max(policy.minRate ?? DEFAULT_MIN_RATE, grown));
}

/**
 * The next `wanted` slots (at most a lease slice of the shared rate, at least one) and the state
 * after. SharedBudget takes a lease only when the schedule is booked at most MAX_QUEUE_MS ahead.
 */
export function takeLease(
  state: BudgetState,
  now: number,
  wanted: number,
  policy: BudgetPolicy,
): { lease: Lease; next: BudgetState } {
  const rate = budgetRate(state, now, policy);
  const interval = 1000 / rate;
  const tokens = Math.max(1, Math.min(Math.floor(wanted), Math.floor(leaseSliceMs(rate, policy) / interval)));
  // Slots nobody took lapse, except for a short burst an idle deployment may spend at once.
  const start = Math.max(state.tat, now - BURST_MS);
  const end = start + tokens * interval;
  return {
    lease: { start, interval, tokens, expiresAt: Math.max(end, now) + LEASE_GRACE_MS },
    next: {
      ...state,
      tat: end,
      base: budgetRate(state, now, policy),
      grownAt: now,
      version: state.version + 1,
    },
  };
}

/**
 * The state after a container saw 429s: `share` of its answers lately, while sending at
 * `sentRate` req/s of the shared rate. The API then allows about sentRate × (1 − share).
 * Undefined when the event was answered already (a cut is made once per event).
 */
export function cutRate(
  state: BudgetState,
  now: number,
  throttled: { share: number; sentRate: number },
  policy: BudgetPolicy,
): BudgetState | undefined {
  if (now < state.holdUntil) return undefined;
  const rate = budgetRate(state, now, policy);
  const measured = throttled.sentRate * (1 - throttled.share) * (1 - DIP);
  const base = Math.max(rate * MAX_CUT_TO, Math.min(rate * (1 - MIN_CUT), measured));
  const floor = policy.minRate ?? DEFAULT_MIN_RATE;
  return {
    ...state,
    base: Math.max(floor, base),
    grownAt: now,
    holdUntil: now + Math.min(Math.max(0, state.tat - now), leaseSliceMs(rate, policy)) + HOLD_AFTER_QUEUE_MS,
    version: state.version + 1,
  };
}

/** The store did not settle a write in MAX_ATTEMPTS tries. */
export class BudgetContentionError extends Error {
  constructor() {
    super(`the request budget changed under ${MAX_ATTEMPTS} writes in a row`);
    this.name = 'BudgetContentionError';
  }
}

/** A repair of the item (see `untrustedFields`): what was read, what was written, and when. */
export interface BudgetRepair {
  found: BudgetState;
  repaired: BudgetState;
  fields: (keyof BudgetState)[];
  /** The item's time as this container knew it, and its wall clock then. */
  itemNow: number;
  wallNow: number;
}

export interface SharedBudgetOptions {
  clock?: Clock;
  /** Random in [0, 1), for the pause after a conflict. */
  random?: () => number;
  /** Called after the first repair this container writes (not again: one log per container). */
  onRepair?: (repair: BudgetRepair) => void;
}

/** A change of the state at `now` (the item's time); undefined: nothing to write. */
type Change = (state: BudgetState, now: number) => BudgetState | undefined;

/**
 * A container's handle on the shared budget: read-modify-write with a conditional write,
 * retried on a conflict from the state the store returned (or a fresh read). The state last
 * seen is kept, so an uncontended lease is one write. It keeps the offset of the item's time
 * from its wall clock, and hands out leases on its wall clock.
 */
export class SharedBudget {
  private known: { state: BudgetState; stored: boolean } | undefined;
  /** The last update lost a race: others write too, so the state kept is likely stale. */
  private contended = false;
  /** The version this container wrote last. */
  private written: number | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** The item's time less this container's wall clock, ms: in [0, MAX_SKEW_MS], learned from reads. */
  private offset = 0;
  private repairReported = false;
  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(
    private readonly store: BudgetStore,
    readonly policy: BudgetPolicy,
    private readonly options: SharedBudgetOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
  }

  /**
   * Up to `wanted` slots of the shared schedule, starting within MAX_QUEUE_MS; while others
   * have booked it further, it waits (a slice at most each time) and asks again.
   */
  async lease(wanted: number): Promise<Lease> {
    for (;;) {
      let lease: Lease | undefined;
      let retryInMs = 0;
      await this.update((state, now) => {
        // Each attempt of the read-modify-write starts over: a lease taken by an attempt whose
        // write lost to another container's is not this container's. (It was kept when the next
        // attempt found the schedule booked too far ahead: two containers then held the same
        // slots, sent them together and met 429s.)
        lease = undefined;
        const bookedMs = state.tat - now;
        if (bookedMs > MAX_QUEUE_MS) {
          retryInMs = bookedMs - MAX_QUEUE_MS;
          return undefined;
        }
        const taken = takeLease(state, now, wanted, this.policy);
        lease = taken.lease;
        return taken.next;
      });
      if (lease !== undefined) {
        // On this container's clock: the limiter compares slots with its wall clock.
        return { ...lease, start: lease.start - this.offset, expiresAt: lease.expiresAt - this.offset };
      }
      await this.clock.sleep(Math.min(retryInMs, maxGrantWaitMs(this.policy) - MAX_QUEUE_MS));
    }
  }

  /** Reports 429s (see `cutRate`); nothing is written when the event was answered already. */
  async throttled(share: number, sentRate: number): Promise<void> {
    // Known to be answered (by a hold the item may have set): no request at all.
    const held = this.known && this.known.state.holdUntil - this.itemNow(this.known.state);
    if (held !== undefined && held > 0 && held <= STEADY_LEASE_MS + HOLD_AFTER_QUEUE_MS) return;
    await this.update((state, now) => cutRate(state, now, { share, sentRate }, this.policy));
  }

  /** The shared rate as last seen, req/s. */
  rate(): number {
    const state = this.known?.state ?? initialBudget(this.policy);
    return budgetRate(state, this.itemNow(state), this.policy);
  }

  /**
   * The item's time now, as far as this container knows, having seen `state`: a stamp not
   * further ahead of its wall clock than MAX_SKEW_MS raises the offset (a wall clock that
   * stepped back is made up for too); one further ahead is not believed.
   */
  private itemNow(state: BudgetState): number {
    const wallNow = this.clock.wallNow();
    const ahead = state.grownAt - wallNow;
    if (ahead > this.offset && ahead <= MAX_SKEW_MS) this.offset = ahead;
    return wallNow + this.offset;
  }

  /** One read-modify-write at a time per container: its own writes must not race each other. */
  private update(change: Change): Promise<void> {
    const run = this.queue.then(() => this.readModifyWrite(change));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async readModifyWrite(change: Change): Promise<void> {
    // Read first when others write too: a read and a write, where a stale write costs three.
    if (this.contended) this.known = undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (this.known === undefined) {
        const read = await this.store.read();
        // Nobody wrote since this container did: the state it keeps will do next time.
        if (read?.version === this.written) this.contended = false;
        this.known = read
          ? { state: read, stored: true }
          : { state: initialBudget(this.policy), stored: false };
      }
      const { state, stored } = this.known;
      const now = this.itemNow(state);
      // A time no honest writer could have written is set back with this write, whatever it is.
      const fields = untrustedFields(state, now, this.policy);
      const sane = fields.length > 0 ? repairBudget(state, now, this.policy) : state;
      const next =
        change(sane, now) ?? (fields.length > 0 ? { ...sane, version: state.version + 1 } : undefined);
      if (next === undefined) return;
      const written = await this.store.write(next, stored ? state.version : undefined);
      if (written.ok) {
        this.known = { state: next, stored: true };
        this.written = next.version;
        if (fields.length > 0) this.reportRepair({ found: state, repaired: next, fields, itemNow: now });
        return;
      }
      this.contended = true;
      this.known = written.current ? { state: written.current, stored: true } : undefined;
      await this.clock.sleep(this.random() * CONFLICT_BACKOFF_MS * (attempt + 1));
    }
    throw new BudgetContentionError();
  }

  private reportRepair(repair: Omit<BudgetRepair, 'wallNow'>): void {
    if (this.repairReported) return;
    this.repairReported = true;
    this.options.onRepair?.({ ...repair, wallNow: this.clock.wallNow() });
  }
}
