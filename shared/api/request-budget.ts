/**
 * One request budget for a whole deployment. Every container that calls the API takes its
 * requests from one token bucket kept in a shared store (a DynamoDB item in AWS), so the
 * configured ceiling bounds the deployment, not each container. The bucket is kept as a
 * theoretical arrival time (GCRA): a lease of n tokens is the next n slots of the shared
 * schedule, one write per lease whatever the wait, and leases of different containers never
 * overlap. The shared rate adapts to the API: a 429 seen by any container lowers it for all
 * (by the share of 429s that container saw), and it grows back slowly (AIMD).
 */

import { type Clock, systemClock } from './clock.js';

/** The item's key for a deployment's stage. */
export const budgetKey = (stage: string) => `request-budget#${stage}`;

/** The shared item. Times are wall-clock epoch ms: containers compare them across machines. */
export interface BudgetState {
  /** When the tokens granted so far are spent at the shared rate (GCRA's theoretical arrival time). */
  tat: number;
  /** The deployment's rate at `grownAt`, req/s (the ceiling before any cut). */
  base: number;
  /** When the rate was last set (0: never): by a cut, or grown by a lease. */
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

/** A run of slots of the shared schedule: token i may be spent from `start + i × interval`. */
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
}

/** A lease is at most this long a stretch of the shared schedule: a few writes per second in all. */
export const LEASE_MS = 250;
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
 * leased further ahead count for LEASE_MS at most: containers that meet 429s thin those.)
 */
const HOLD_AFTER_QUEUE_MS = 500;
const DEFAULT_MIN_RATE = 0.2;
/** Attempts of a read-modify-write before the store is deemed unusable... */
const MAX_ATTEMPTS = 10;
/** ...with a random pause of up to this many ms times the attempt between them (others write meanwhile). */
const CONFLICT_BACKOFF_MS = 5;

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
  return Math.min(policy.ceiling, Math.max(policy.minRate ?? DEFAULT_MIN_RATE, grown));
}

/** The next `wanted` slots (at most LEASE_MS of the shared rate, at least one) and the state after. */
export function takeLease(
  state: BudgetState,
  now: number,
  wanted: number,
  policy: BudgetPolicy,
): { lease: Lease; next: BudgetState } {
  const interval = 1000 / budgetRate(state, now, policy);
  const tokens = Math.max(1, Math.min(Math.floor(wanted), Math.floor(LEASE_MS / interval)));
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
    holdUntil: now + Math.min(Math.max(0, state.tat - now), LEASE_MS) + HOLD_AFTER_QUEUE_MS,
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

/**
 * A container's handle on the shared budget: read-modify-write with a conditional write,
 * retried on a conflict from the state the store returned (or a fresh read). The state last
 * seen is kept, so an uncontended lease is one write.
 */
export class SharedBudget {
  private known: { state: BudgetState; stored: boolean } | undefined;
  /** The last update lost a race: others write too, so the state kept is likely stale. */
  private contended = false;
  /** The version this container wrote last. */
  private written: number | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: BudgetStore,
    readonly policy: BudgetPolicy,
    private readonly clock: Clock = systemClock,
    private readonly random: () => number = Math.random,
  ) {}

  /** Up to `wanted` slots of the shared schedule. */
  async lease(wanted: number): Promise<Lease> {
    let lease: Lease | undefined;
    await this.update((state) => {
      const taken = takeLease(state, this.clock.wallNow(), wanted, this.policy);
      lease = taken.lease;
      return taken.next;
    });
    if (lease === undefined) throw new Error('unreachable: a lease is always taken');
    return lease;
  }

  /** Reports 429s (see `cutRate`); nothing is written when the event was answered already. */
  async throttled(share: number, sentRate: number): Promise<void> {
    // Known to be answered: no request at all.
    if (this.known !== undefined && this.clock.wallNow() < this.known.state.holdUntil) return;
    await this.update((state) => cutRate(state, this.clock.wallNow(), { share, sentRate }, this.policy));
  }

  /** The shared rate as last seen, req/s. */
  rate(): number {
    return budgetRate(this.known?.state ?? initialBudget(this.policy), this.clock.wallNow(), this.policy);
  }

  /** One read-modify-write at a time per container: its own writes must not race each other. */
  private update(change: (state: BudgetState) => BudgetState | undefined): Promise<void> {
    const run = this.queue.then(() => this.readModifyWrite(change));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async readModifyWrite(change: (state: BudgetState) => BudgetState | undefined): Promise<void> {
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
      const next = change(state);
      if (next === undefined) return;
      const written = await this.store.write(next, stored ? state.version : undefined);
      if (written.ok) {
        this.known = { state: next, stored: true };
        this.written = next.version;
        return;
      }
      this.contended = true;
      this.known = written.current ? { state: written.current, stored: true } : undefined;
      await this.clock.sleep(this.random() * CONFLICT_BACKOFF_MS * (attempt + 1));
    }
    throw new BudgetContentionError();
  }
}
