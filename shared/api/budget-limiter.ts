/**
 * A container's rate limiter on the deployment's shared budget (request-budget.ts): requests
 * are granted on the slots of the leases it takes, so the containers together keep to one rate.
 * The number in flight follows rate x latency as in the AdaptiveRateLimiter, and a window the
 * API's headers say is spent holds requests back. If the store fails, the container's own
 * limiter takes over for a while.
 */
import { type Clock, systemClock } from './clock.js';
import { GrantQueue } from './grant-queue.js';
import { InFlightLimit } from './in-flight.js';
import { LIMITER_DEFAULTS, type RateLimiter, type Release } from './limiter.js';
import type { RateLimitInfo } from './rate-limit-headers.js';
import {
  LEASE_GRACE_MS,
  type Lease,
  leaseSliceMs,
  maxGrantWaitMs,
  type SharedBudget,
} from './request-budget.js';
import type { WindowFacts } from './window-facts.js';
import { WindowQuota } from './window-quota.js';

/** The next lease is asked for this long before the last one's slots run out (a store round trip or two). */
const PREFETCH_MS = 50;
/** Answers are kept this long: the share of 429s, and the requests granted lately. */
const SHARE_WINDOW_MS = 1_000;
/** After a 429, the answers of this long are counted before the share of 429s is reported. */
const EVENT_SAMPLE_MS = 250;
/** After a store error the container's own limiter serves this long before the store is tried again. */
const FALLBACK_MS = 60_000;
/** Share of a slot interval a late timer may make up (as the AdaptiveRateLimiter). */
const CATCH_UP = 0.5;

export interface BudgetLimiterOptions {
  budget: SharedBudget;
  /** The container's own limiter (at a safe share of the ceiling), made when the store first fails. */
  fallback: () => RateLimiter;
  /** Most requests in flight at once (default RUN_DEFAULTS.concurrency). */
  concurrency?: number;
  /** Fewest requests allowed in flight (default 4). */
  minConcurrency?: number;
  /** Called once per outage of the store (the first error; again only after a success). */
  onStoreError?: (error: unknown) => void;
  /** What an earlier run learnt of the API's fixed windows (the output's state). */
  windowFacts?: WindowFacts;
  clock?: Clock;
}

/** What a BudgetLimiter did: leases taken, their tokens, the requests granted, the tokens that lapsed unused, store errors. */
export interface BudgetLimiterStats {
  leases: number;
  leased: number;
  granted: number;
  lapsed: number;
  /** Store calls that failed (the container's own limiter served meanwhile). */
  storeErrors: number;
}

interface HeldLease extends Lease {
  used: number;
  /** When it came: slots already past then are the budget's burst, used at once. */
  arrivedAt: number;
}

/**
 * Grants requests on the slots of leases from the shared budget: a lease is asked for when the
 * tokens held cannot serve the callers waiting and the last lease is about to run out, sized to
 * those callers or to the requests granted lately, whichever is more (the budget caps it). A 429
 * starts a congestion event: the share of 429s among the answers of the next 250 ms thins the
 * slots this container holds and lowers the shared rate, for every container.
 *
 * @example
 * const limiter = new BudgetLimiter({ budget: new SharedBudget(store, { ceiling: 20 }), fallback });
 * const release = await limiter.acquire();
 * try { ... } finally { release(); }
 */
export class BudgetLimiter implements RateLimiter {
  private readonly budget: SharedBudget;
  private readonly clock: Clock;
  private readonly inFlightLimit: InFlightLimit;
  private readonly quota: WindowQuota;
  private readonly queue: GrantQueue;
  private readonly leases: HeldLease[] = [];
  private leasing = false;
  private reporting = false;
  /** Rate of the latest lease, req/s: what this container sends at while it has slots. */
  private leaseRate: number | undefined;
  private nextAt = Number.NEGATIVE_INFINITY;
  private readonly grants: number[] = [];
  private readonly answers: { at: number; throttled: boolean }[] = [];
  private readonly counts: BudgetLimiterStats = {
    leases: 0,
    leased: 0,
    granted: 0,
    lapsed: 0,
    storeErrors: 0,
  };
  private fallback: RateLimiter | undefined;
  private fallbackUntil = Number.NEGATIVE_INFINITY;
  private outageReported = false;

  constructor(private readonly options: BudgetLimiterOptions) {
    this.budget = options.budget;
    this.clock = options.clock ?? systemClock;
    this.quota = new WindowQuota(options.windowFacts);
    this.inFlightLimit = new InFlightLimit({
      floor: options.minConcurrency ?? LIMITER_DEFAULTS.minConcurrency,
      ceiling: options.concurrency ?? LIMITER_DEFAULTS.concurrency,
    });
    this.queue = new GrantQueue({
      clock: this.clock,
      now: () => this.now(),
      inFlightLimit: this.inFlightLimit,
      quota: this.quota,
      pump: () => this.pump(),
      // Whatever the item says, a lease starts within this: a timer past it is never needed.
      maxSleepMs: maxGrantWaitMs(this.budget.policy),
    });
  }

  acquire(maxWaitMs?: number): Promise<Release> {
    if (this.now() < this.fallbackUntil) return this.ownLimiter().acquire(maxWaitMs);
    return this.queue.enqueue(maxWaitMs);
  }

  onSuccess(info?: RateLimitInfo, sentAt?: number): void {
    const now = this.now();
    if (now < this.fallbackUntil) this.fallback?.onSuccess(info, sentAt);
    if (info !== undefined) this.queue.observe(info, now, sentAt);
    this.record(now, false);
  }

  onThrottle(retryAfterMs?: number, info?: RateLimitInfo, sentAt?: number): void {
    const now = this.now();
    if (now < this.fallbackUntil) {
      this.fallback?.onThrottle(retryAfterMs, info, sentAt);
      return;
    }
    this.record(now, true);
    // The API says its window is spent: waiting for the turn is the answer, not a lower rate.
    if (info !== undefined && this.queue.refusedByWindow(info, now, retryAfterMs, sentAt)) {
      this.pump();
      return;
    }
    // One report at a time: the 429s of one burst are one congestion event.
    if (this.reporting) return;
    this.reporting = true;
    const sentRate = this.leaseRate ?? this.budget.rate();
    // The share of 429s among the answers that follow this one says how far above the limit the
    // deployment is (this one alone would say 100%); a lone 429 then cuts the least.
    void this.clock
      .sleep(EVENT_SAMPLE_MS)
      .then(() => {
        const sample = this.answers.filter((a) => a.at > now);
        const share = sample.filter((a) => a.throttled).length / Math.max(1, sample.length);
        this.thin(share);
        return this.budget.throttled(share, sentRate);
      })
      .then(
        () => this.storeAnswered(),
        (error: unknown) => this.storeFailed(error),
      )
      .finally(() => {
        this.reporting = false;
      });
  }

  /** Counts so far, for benchmarks and logs. */
  stats(): BudgetLimiterStats {
    return { ...this.counts };
  }

  currentRate(): number {
    return this.leaseRate ?? this.budget.rate();
  }

  /** What this container learnt of the API's windows, on its leases or else in fallback. */
  windowFacts(): WindowFacts | undefined {
    return this.quota.facts() ?? this.fallback?.windowFacts?.();
  }

  /** Wall-clock ms: lease slots are times shared with other machines. */
  private now(): number {
    return this.clock.wallNow();
  }

  private record(now: number, throttled: boolean): void {
    this.answers.push({ at: now, throttled });
    while ((this.answers[0]?.at ?? now) <= now - SHARE_WINDOW_MS) this.answers.shift();
  }

  /** Grants waiting callers, in order, on the slots of the leases held. */
  private pump(): void {
    while (this.queue.length > 0) {
      const now = this.now();
      if (this.queue.inFlight >= this.inFlightLimit.at(this.currentRate())) return; // A release pumps again.
      this.dropSpent(now);
      this.askForLease(now);
      const heldUntil = this.quota.heldUntil(now, this.queue.inFlight);
      // (+Infinity: held until a probe's answer says for how long.)
      if (heldUntil > now && Number.isFinite(heldUntil)) this.queue.refuseLongWaits(heldUntil - now);
      const lease = this.leases[0];
      if (lease === undefined) return; // The lease on its way pumps again.
      if (this.skipPassedSlots(lease, now)) continue;
      const slotAt = Math.max(lease.start + lease.used * lease.interval, this.nextAt, heldUntil);
      if (slotAt > now) {
        if (Number.isFinite(slotAt)) this.queue.wake(slotAt);
        return;
      }
      lease.used += 1;
      // A late timer catches up half a slot at most: no two requests at once.
      this.nextAt = now + lease.interval * (1 - CATCH_UP);
      if (this.queue.grant(now)) {
        this.counts.granted += 1;
        this.grants.push(now);
      }
    }
  }

  /**
   * Lets the slots of `lease` that passed a slot or more ago, while it was held, lapse (true when
   * that spent it). The schedule after a lease is other containers', so a container that fell
   * behind (a late timer, a busy event loop, callers that came late) sends its next slot on time
   * rather than catching up: caught up at twice the rate, its slots and the next lease's reached
   * the API together, as a burst the API refused, and every 429 cut the shared rate. (Slots
   * already past when the lease came, an idle deployment's burst, go at once as before.)
   */
  private skipPassedSlots(lease: HeldLease, now: number): boolean {
    const due = lease.start + lease.used * lease.interval;
    if (due < lease.arrivedAt) return false;
    const passed = Math.floor((now - due) / lease.interval);
    if (passed < 1) return false;
    const skipped = Math.min(passed, lease.tokens - lease.used);
    lease.used += skipped;
    this.counts.lapsed += skipped;
    return lease.used >= lease.tokens;
  }

  /**
   * Spreads what is left of the leases held over the same time with `share` fewer tokens: the
   * slots already leased would go on at the rate that met the 429s until the cut reaches them.
   */
  private thin(share: number): void {
    const now = this.now();
    for (const lease of this.leases) {
      const remaining = lease.tokens - lease.used;
      const keep = Math.ceil(remaining * (1 - share));
      if (keep >= remaining || keep < 1) continue;
      const from = Math.max(now, lease.start + lease.used * lease.interval);
      const end = lease.start + lease.tokens * lease.interval;
      this.counts.lapsed += remaining - keep;
      Object.assign(lease, { start: from, used: 0, tokens: keep, interval: Math.max(0, end - from) / keep });
    }
  }

  private dropSpent(now: number): void {
    while (this.leases.length > 0) {
      const lease = this.leases[0] as HeldLease;
      if (lease.used < lease.tokens && now <= lease.expiresAt) return;
      this.counts.lapsed += lease.tokens - lease.used;
      this.leases.shift();
    }
  }

  /** Asks for a lease when the tokens held fall short of the callers and the last lease ends soon. */
  private askForLease(now: number): void {
    if (this.leasing) return;
    const held = this.leases.reduce((sum, l) => sum + l.tokens - l.used, 0);
    if (held >= this.queue.length) return;
    const last = this.leases.at(-1);
    if (last !== undefined && last.start + last.tokens * last.interval - now > PREFETCH_MS) return;
    while ((this.grants[0] ?? now) <= now - SHARE_WINDOW_MS) this.grants.shift();
    // Sequential callers wait one at a time: the requests granted lately say what they need.
    const slice = leaseSliceMs(this.budget.rate(), this.budget.policy);
    const lately = Math.ceil((this.grants.length * slice) / SHARE_WINDOW_MS);
    const wanted = Math.max(this.queue.length - held, lately);
    this.leasing = true;
    this.budget
      .lease(wanted)
      .then(
        (lease) => {
          // Slots already past when it arrives (an idle deployment's burst) get their grace from now.
          const expiresAt = Math.max(lease.expiresAt, this.now() + LEASE_GRACE_MS);
          this.leases.push({ ...lease, expiresAt, used: 0, arrivedAt: this.now() });
          this.counts.leases += 1;
          this.counts.leased += lease.tokens;
          this.leaseRate = 1000 / lease.interval;
          this.storeAnswered();
        },
        (error: unknown) => this.storeFailed(error),
      )
      .finally(() => {
        this.leasing = false;
        this.pump();
      });
  }

  private storeAnswered(): void {
    this.outageReported = false;
  }

  /** The store failed: the container's own limiter serves for a while, the callers waiting included. */
  private storeFailed(error: unknown): void {
    this.counts.storeErrors += 1;
    if (!this.outageReported) {
      this.outageReported = true;
      this.options.onStoreError?.(error);
    }
    this.fallbackUntil = this.now() + FALLBACK_MS;
    const own = this.ownLimiter();
    for (const waiter of this.queue.drain())
      own.acquire(waiter.maxWaitMs).then(waiter.resolve, waiter.reject);
  }

  private ownLimiter(): RateLimiter {
    this.fallback ??= this.options.fallback();
    return this.fallback;
  }
}
