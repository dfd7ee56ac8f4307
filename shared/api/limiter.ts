/**
 * Client-side rate limiting. The Integration API answers 429 when called too fast but does not
 * publish its thresholds (spec section 8), so the limiter discovers them: it speeds up while
 * requests succeed, and on a 429 estimates the rate the API allows and hovers just below it,
 * probing upward slowly. When answers carry rate-limit headers it also keeps to what they say.
 * The number of requests in flight follows rate x latency (in-flight.ts). One limiter is
 * shared by every request of the process.
 */
import { ConfigError } from '../errors.js';
import { RUN_DEFAULTS } from '../run-defaults.js';
import { type Clock, systemClock } from './clock.js';
import { GrantQueue, type Release } from './grant-queue.js';
import { InFlightLimit } from './in-flight.js';
import type { RateLimitInfo } from './rate-limit-headers.js';
import { earliestTurnInMs, RetryAfterWindow, type WindowVerdict } from './retry-after-window.js';
import type { WindowFacts } from './window-facts.js';
import { WindowQuota } from './window-quota.js';

/** Paces and bounds the requests of a process; the client reports every answer back to it. */
export interface RateLimiter {
  /**
   * Waits for a request slot (rate, requests in flight, the API's window); call the returned
   * function once the answer is read. Rejects with a RateLimitWaitError, at once, when every
   * request is held back for longer than `maxWaitMs` (a spent window, a Retry-After).
   */
  acquire(maxWaitMs?: number): Promise<Release>;
  /**
   * A request got an answer other than 429, with the rate-limit fields of its headers;
   * `sentAt` is its slot's `Release.sentAt` (when the request went, on the limiter's clock).
   */
  onSuccess(info?: RateLimitInfo, sentAt?: number): void;
  /**
   * A request got 429; `retryAfterMs` when the API said how long to wait. Without rate-limit
   * fields the limiter slows down, and if 429s keep coming, holds every request back for the
   * Retry-After; with them (a window the API says is spent) it holds every request back until
   * the window turns, and keeps its rate.
   */
  onThrottle(retryAfterMs?: number, info?: RateLimitInfo, sentAt?: number): void;
  /** The pacing rate right now, in requests per second. */
  currentRate(): number;
  /** What was learnt of the API's fixed windows, to start the next run from (undefined: nothing yet). */
  windowFacts?(): WindowFacts | undefined;
}

// The queue of waiting callers both limiters share throws and grants these; callers import them from here.
export { RateLimitWaitError, type Release } from './grant-queue.js';

/** The limiter's state, for benchmarks and logs. */
export interface LimiterState {
  rate: number;
  inFlight: number;
  /** Requests allowed in flight right now. */
  inFlightLimit: number;
  /** The most requests in flight at once so far. */
  peakInFlight: number;
  /** Moving average of the time from grant to answer, ms. */
  latencyMs: number;
  /** The limit of a fixed window recognised from Retry-After alone (retry-after-window.ts), if any. */
  retryAfterWindowLimit: number | undefined;
}

export interface AdaptiveRateLimiterOptions {
  /** Rate of the first requests, req/s (default 10). */
  initialRate?: number;
  /** Ceiling, req/s: never faster than this (default: the CLI's, RUN_DEFAULTS.maxRate). */
  maxRate?: number;
  /** Floor, req/s: a run of 429s never slows below this (default 0.2). */
  minRate?: number;
  /** Most requests in flight at once, whatever the latency (default RUN_DEFAULTS.concurrency). */
  concurrency?: number;
  /** Fewest requests allowed in flight, and the number before the latency is known (default 4). */
  minConcurrency?: number;
  /** What an earlier run learnt of the API's fixed windows (the output's state): met from the first turn. */
  windowFacts?: WindowFacts;
  /** Time source; tests pass a fake one. */
  clock?: Clock;
}

export const LIMITER_DEFAULTS = {
  initialRate: 10,
  maxRate: RUN_DEFAULTS.maxRate.value,
  minRate: 0.2,
  concurrency: RUN_DEFAULTS.concurrency.value,
  minConcurrency: 4,
} as const;

/** Before the first 429 the rate doubles this often while requests are paced (slow start). */
const SLOW_START_DOUBLING_S = 0.5;
/**
 * ...or once per this many round trips when that is longer: a 429 is heard of one round trip
 * after the request that met it, and what was sent meanwhile at a rate too high meets one too.
 */
const SLOW_START_DOUBLING_TRIPS = 2;
const GUESS_DOUBLING_TRIPS = 4;
/** After a guessed estimate the rate doubles this often until the next 429 (a gentler slow start). */
const GUESS_DOUBLING_S = 2;
/** After a measured estimate the rate drops to (1 - DIP) x the limit, so the API's bucket refills a little... */
const DIP = 0.1;
/** ...then returns to a plateau just below the limit... */
const MARGIN = 0.01;
// ...and the phases that follow are timed in "request units" (the time one request takes at the
// estimated limit), so that the share of 429s stays the same at any rate: one 429 per several
// hundred requests. A unit is capped so that a low estimate is still left behind in minutes.
/** Longest request unit, seconds. */
const MAX_UNIT_S = 0.2;
/**
 * A unit is at least this share of a round trip: what is sent at too high a rate is heard of a
 * round trip later, so the phases must last several round trips for the API's bucket to refill.
 */
const TRIPS_PER_UNIT = 10;
/** The rate returns towards the limit with this time constant after a dip, in units. */
const RECOVERY_TAU_UNITS = 25;
/**
 * Probing above a confirmed estimate (the limit may have risen): a plateau of `plateau` units,
 * then `slope` x the limit per unit, doubling every `doubling` units without a 429. An estimate
 * not confirmed yet may be far too low (the API's bucket overflowed while the client was below
 * the limit): it is probed sooner and faster.
 */
const CONFIRMED_PROBE = { plateau: 150, slope: 0.0002, doubling: 250 } as const;
const TENTATIVE_PROBE = { plateau: 25, slope: 0.001, doubling: 50 } as const;
/** A measurement is confirmed when the rate at which the 429 came is at most this multiple of it. */
const CONFIRM_BRACKET = 1.15;
/** 429s within this time of the last decrease belong to the same congestion event (at least). */
const MIN_EVENT_HOLD_MS = 250;
/** An estimate from one 429 to the next needs this many successes between them to be meaningful. */
const MIN_MEASURED_SUCCESSES = 10;
/** The span between two 429s counts as saturated when the pacer sat idle less than this share of it. */
const MAX_IDLE_SHARE = 0.1;
/** A span between two 429s with more than this share spent in a Retry-After pause measures nothing. */
const MAX_PAUSED_SHARE = 0.25;
/** Share of a pacing interval a late timer may make up. */
const CATCH_UP = 0.5;

interface LimitEstimate {
  /**
   * measured: the limit was counted between two 429s: dip, plateau just below, then probe slowly.
   * guessed: half the rate at which the 429 came (TCP's multiplicative decrease): grow again
   * exponentially from there until the next 429, which gives a measurement.
   */
  kind: 'measured' | 'guessed';
  /** Estimated rate the API allows (measured), or the rate to grow from (guessed), req/s. */
  limit: number;
  /** A measurement bracketed closely (see CONFIRM_BRACKET). */
  confirmed: boolean;
  /** Time of the 429 that produced the estimate. */
  at: number;
  /** Time the rate curve starts from: `at`, or the end of a Retry-After pause. */
  from: number;
  /** Whether a further 429 of the same event has lowered the estimate already (once is enough). */
  recut: boolean;
}

/**
 * AIMD-like limiter with a memory. Slow start (doubling every 0.5 s) until the first 429, then
 * half that rate, regrowing (doubling every 2 s) until the next 429. From then on the allowed
 * rate is measured: the successes counted between two 429s, divided by the time between them
 * (exact for a token bucket whose burst was spent both times). After each 429 the rate dips
 * 10% below the measurement, recovers to a plateau 1% under it, and after a while probes
 * upward, slowly at first, in case the limit rose. A 429 that comes again right after the
 * slow-down, with no success in between, lowers the estimate once more and, with a
 * Retry-After, holds every request back.
 * Pacing is spread evenly (no bursts) and FIFO. The requests in flight follow rate x latency
 * between `minConcurrency` and `concurrency`. Rate-limit headers, when the API sends them, are
 * obeyed: no request goes out in a window the API says is spent. A fixed window the API names
 * only by Retry-After is recognised from the count it admits (retry-after-window.ts) and met
 * the same way; its 429s then no longer slow the rate.
 *
 * Measured: BENCHMARKS.md, "API client" (test/bench/client.ts: token buckets behind 0 to
 * 1,000 ms of latency, fixed windows with and without headers).
 *
 * @example
 * const limiter = new AdaptiveRateLimiter({ maxRate: 40, concurrency: 64 });
 * const release = await limiter.acquire();
 * try { ... } finally { release(); }
 */
export class AdaptiveRateLimiter implements RateLimiter {
  private readonly clock: Clock;
  private readonly maxRate: number;
  private readonly minRate: number;
  private readonly inFlightLimit: InFlightLimit;
  /** Replaced by a fresh one when a window recognised from Retry-After alone proves wrong. */
  private quota: WindowQuota;
  /** A fixed window the API names only by Retry-After; silent once the API sends rate-limit fields. */
  private readonly retryAfterWindow: RetryAfterWindow;
  private headersSeen = false;

  /** Slow-start rate; used until the first 429. */
  private slowStartRate: number;
  private estimate: LimitEstimate | undefined;

  private readonly queue: GrantQueue;
  private peakInFlight = 0;
  /** Earliest time of the next grant (even spacing). */
  private nextAt = Number.NEGATIVE_INFINITY;
  /** Set by Retry-After: nobody is granted before this time. */
  private pausedUntil = Number.NEGATIVE_INFINITY;
  /** Whether the last grant waited for its pacing slot (demand above the rate). */
  private lastGrantPaced = false;
  /** Time of the last grant. */
  private lastGrantAt = Number.NEGATIVE_INFINITY;

  private successes = 0;
  private successesAtEvent = 0;
  /** Time the pacer sat unused since the last 429 (demand below the rate, or concurrency-bound). */
  private idleMsSinceEvent = 0;
  /** Time every request was held back for a Retry-After since the last 429 event. */
  private pausedMsSinceEvent = 0;

  constructor(options: AdaptiveRateLimiterOptions = {}) {
    this.clock = options.clock ?? systemClock;
    for (const [name, value] of Object.entries({ maxRate: options.maxRate, minRate: options.minRate })) {
      if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
        throw new ConfigError(`rate limiter: ${name} must be a positive number of requests per second`);
      }
    }
    this.maxRate = options.maxRate ?? LIMITER_DEFAULTS.maxRate;
    this.minRate = Math.min(options.minRate ?? LIMITER_DEFAULTS.minRate, this.maxRate);
    this.inFlightLimit = new InFlightLimit({
      floor: options.minConcurrency ?? LIMITER_DEFAULTS.minConcurrency,
      ceiling: options.concurrency ?? LIMITER_DEFAULTS.concurrency,
    });
    this.slowStartRate = this.clamp(options.initialRate ?? LIMITER_DEFAULTS.initialRate);
    // Facts learnt from Retry-After alone: their limit is on trial from the first window.
    const facts = options.windowFacts;
    this.quota = new WindowQuota(facts);
    this.retryAfterWindow = new RetryAfterWindow(facts?.source === 'retry-after' ? facts.limit : undefined);
    this.queue = new GrantQueue({
      clock: this.clock,
      now: () => this.clock.now(),
      inFlightLimit: this.inFlightLimit,
      quota: {
        spend: (now) => this.quota.spend(now),
        observe: (info, now, othersInFlight, sentAt) => this.quota.observe(info, now, othersInFlight, sentAt),
        refused: (info, now, retryInMs, sentAt) => this.quota.refused(info, now, retryInMs, sentAt),
      },
      pump: () => this.pump(),
    });
  }

  acquire(maxWaitMs?: number): Promise<Release> {
    return this.queue.enqueue(maxWaitMs);
  }

  onSuccess(info?: RateLimitInfo, sentAt?: number): void {
    const now = this.clock.now();
    if (info !== undefined) this.headersSeen = true;
    const window = info ?? this.recognised(this.retryAfterWindow.success(sentAt ?? now, now));
    if (window !== undefined) this.queue.observe(window, now, sentAt);
    this.successes += 1;
    // Grow only while demand is above the rate: an idle client learns nothing about the API.
    if (this.estimate === undefined && this.lastGrantPaced) {
      const doublingS = Math.max(SLOW_START_DOUBLING_S, (SLOW_START_DOUBLING_TRIPS * this.tripMs()) / 1000);
      this.slowStartRate = this.clamp(this.slowStartRate + Math.LN2 / doublingS);
    }
  }

  onThrottle(retryAfterMs?: number, info?: RateLimitInfo, sentAt?: number): void {
    const now = this.clock.now();
    if (info !== undefined) this.headersSeen = true;
    const window = info ?? this.recognised(this.retryAfterWindow.refused(sentAt ?? now, now, retryAfterMs));
    // The API says the window is spent: waiting for its turn is the answer, not a slower rate.
    if (window !== undefined && this.queue.refusedByWindow(window, now, retryAfterMs, sentAt)) {
      this.pump();
      return;
    }
    this.congestion(now, retryAfterMs);
    // Retry-After is rounded up to whole seconds: nothing gets through before it less a second.
    // Beyond that second (a spent window; a bucket at 1 req/s or more never says so much),
    // everybody waits it out at once, instead of meeting 429s until a second 429 pauses them.
    const earliest = retryAfterMs === undefined ? 0 : earliestTurnInMs(sentAt ?? now, now, retryAfterMs);
    if (earliest > 0 && retryAfterMs !== undefined && this.estimate !== undefined)
      this.pauseFor(this.estimate, now, retryAfterMs);
    this.pump();
  }

  /**
   * What the Retry-After recogniser says, as the fields to hand the window machinery (undefined:
   * none). Once confirmed, the rate grows again as in slow start: the quota paces the windows,
   * and a rate estimated from their 429s would leave each window part unused. A recognised
   * window that proved wrong takes its quota with it: what that quota learnt was of a window
   * that is not there.
   */
  private recognised(verdict: WindowVerdict): RateLimitInfo | undefined {
    if (this.headersSeen) return undefined;
    if (verdict.kind === 'forgotten') {
      this.quota = new WindowQuota();
      return undefined;
    }
    if (verdict.kind === 'unknown') return undefined;
    if (verdict.confirmed && this.estimate !== undefined) {
      this.slowStartRate = this.rateAt(this.clock.now());
      this.estimate = undefined;
      this.pausedUntil = Number.NEGATIVE_INFINITY;
    }
    return verdict.info;
  }

  /** A 429 without the API's account of its window: slow down (see the class comment). */
  private congestion(now: number, retryAfterMs: number | undefined): void {
    const latencyMs = this.tripMs();
    const previous = this.estimate;
    const hold = Math.max(MIN_EVENT_HOLD_MS, 2 * latencyMs);
    if (previous === undefined || now - previous.at >= hold) {
      this.newEvent(now, previous);
    } else if (now - previous.at > 2 * latencyMs) {
      // A 429 for a request sent after the slow-down. If the API let requests through since the
      // last 429, it refilled and drained its bucket again: a new event, as after the hold (the
      // count may measure the limit). Read as "not enough" instead, a 429 just inside the hold
      // halved a guess once more and paused everybody for the Retry-After; the next count then
      // spanned the pause and a regrowth below the limit, and the low estimate it gave took
      // several more 429s to leave behind (0.92 of the limit on some seeds). With nothing let
      // through (a spent window, say), the slow-down was not enough.
      if (this.successes > this.successesAtEvent) this.newEvent(now, previous);
      else this.slowDownFurther(previous, now, retryAfterMs);
    }
  }

  /**
   * A new congestion event: slowing down is enough. (The throttled request itself waits its
   * Retry-After in the client. A token bucket's Retry-After is rounded up to whole seconds:
   * making everybody wait it would idle the client for most of a second.)
   */
  private newEvent(now: number, previous: LimitEstimate | undefined): void {
    this.estimate = { ...this.estimateLimit(now, previous), at: now, from: now, recut: false };
    this.successesAtEvent = this.successes;
    this.idleMsSinceEvent = 0;
    this.pausedMsSinceEvent = 0;
    // The next slot was spaced at the old rate: at the new one it comes an interval after the
    // last grant. Else the first request after the slow-down follows the refused one as closely
    // as before, meets the API's bucket still empty, and its 429 reads as a slow-down that was
    // not enough.
    this.nextAt = Math.max(this.nextAt, this.lastGrantAt + 1000 / this.rateAt(now));
  }

  /** Lowers the estimate once more, and if the API said how long, holds every request back that long. */
  private slowDownFurther(estimate: LimitEstimate, now: number, retryAfterMs: number | undefined): void {
    if (!estimate.recut) {
      estimate.recut = true;
      estimate.limit = this.clamp(estimate.limit * (estimate.kind === 'guessed' ? 0.5 : 1 - DIP));
    }
    // A fixed window, say: everybody waits.
    if (retryAfterMs !== undefined && retryAfterMs > 0) this.pauseFor(estimate, now, retryAfterMs);
  }

  /** Holds every request back `waitMs`; the rate curve starts after the wait. */
  private pauseFor(estimate: LimitEstimate, now: number, waitMs: number): void {
    const until = now + waitMs;
    this.pausedMsSinceEvent += Math.max(0, until - Math.max(now, this.pausedUntil));
    this.pausedUntil = Math.max(this.pausedUntil, until);
    estimate.from = Math.max(estimate.from, until);
  }

  /** The time from a grant to its answer, lately. */
  private tripMs(): number {
    return this.inFlightLimit.latencyMs();
  }

  currentRate(): number {
    return this.rateAt(this.clock.now());
  }

  windowFacts(): WindowFacts | undefined {
    const facts = this.quota.facts();
    // Learnt from fields the recogniser gave for an API that sends none.
    const fromRetryAfter = !this.headersSeen && this.retryAfterWindow.limitHeld !== undefined;
    return facts && fromRetryAfter ? { ...facts, source: 'retry-after' } : facts;
  }

  state(): LimiterState {
    const rate = this.currentRate();
    return {
      rate,
      inFlight: this.queue.inFlight,
      inFlightLimit: this.inFlightLimit.at(rate),
      peakInFlight: this.peakInFlight,
      latencyMs: this.inFlightLimit.latencyMs(),
      retryAfterWindowLimit: this.headersSeen ? undefined : this.retryAfterWindow.recognisedLimit,
    };
  }

  private rateAt(now: number): number {
    const e = this.estimate;
    if (e === undefined) return this.slowStartRate;
    const seconds = Math.max(0, now - e.from) / 1000;
    if (e.kind === 'guessed') {
      const doublingS = Math.max(GUESS_DOUBLING_S, (GUESS_DOUBLING_TRIPS * this.tripMs()) / 1000);
      return this.clamp(e.limit * 2 ** (seconds / doublingS));
    }
    const unitS = Math.max(Math.min(1 / e.limit, MAX_UNIT_S), this.tripMs() / 1000 / TRIPS_PER_UNIT);
    const units = seconds / unitS;
    const recovery = (DIP - MARGIN) * Math.exp(-units / RECOVERY_TAU_UNITS);
    const { plateau, slope, doubling } = e.confirmed ? CONFIRMED_PROBE : TENTATIVE_PROBE;
    const probing = units - plateau;
    const probe = probing <= 0 ? 0 : ((slope * doubling) / Math.LN2) * (2 ** (probing / doubling) - 1);
    return this.clamp(e.limit * (1 - MARGIN - recovery + probe));
  }

  /**
   * The rate the API allows, judged at a 429. From the previous 429 to this one the client was
   * throttled at both ends, so (for a token bucket) the successes in between are what the API
   * refilled: a measurement, when the client was pushing all the time. Otherwise (first 429,
   * or the client was often idle) the API's burst allowance hides the limit: halve and regrow.
   */
  private estimateLimit(
    now: number,
    previous: LimitEstimate | undefined,
  ): Pick<LimitEstimate, 'kind' | 'limit' | 'confirmed'> {
    const rate = this.rateAt(now);
    if (previous !== undefined) {
      const span = now - previous.at;
      const counted = this.successes - this.successesAtEvent;
      const saturated = this.idleMsSinceEvent <= MAX_IDLE_SHARE * span;
      // While paused the bucket refills and may overflow: the count then falls short of what
      // the API allows, by at most the paused share. Small enough, it is still a measurement.
      const measurable = saturated && this.pausedMsSinceEvent <= MAX_PAUSED_SHARE * span;
      if (measurable && counted >= MIN_MEASURED_SUCCESSES) {
        // The count is a lower bound of the limit (the bucket may have overflowed on the way)
        // and the rate at this 429 an upper one: close together, the estimate is confirmed.
        const limit = (counted * 1000) / span;
        return { kind: 'measured', limit: this.clamp(limit), confirmed: rate <= CONFIRM_BRACKET * limit };
      }
      // 429s again too soon to count anything: the last measurement was a little high.
      if (saturated && previous.kind === 'measured') {
        return {
          kind: 'measured',
          limit: this.clamp(previous.limit * (1 - DIP)),
          confirmed: previous.confirmed,
        };
      }
    }
    return { kind: 'guessed', limit: this.clamp(rate / 2), confirmed: false };
  }

  private clamp(rate: number): number {
    return Math.min(this.maxRate, Math.max(this.minRate, rate));
  }

  /** Grants waiting callers, in order, as their pacing slots come and the in-flight limit allows. */
  private pump(): void {
    while (this.queue.length > 0) {
      const now = this.clock.now();
      if (this.queue.inFlight >= this.inFlightLimit.at(this.rateAt(now))) return; // A release pumps again.
      const heldUntil = Math.max(this.pausedUntil, this.quota.heldUntil(now, this.queue.inFlight));
      // (+Infinity: held until a probe's answer says for how long.)
      if (heldUntil > now && Number.isFinite(heldUntil)) this.queue.refuseLongWaits(heldUntil - now);
      const slotAt = Math.max(this.nextAt, heldUntil);
      if (slotAt > now) {
        if (Number.isFinite(slotAt)) this.queue.wake(slotAt); // Else held until an answer comes back.
        return;
      }
      const interval = 1000 / this.rateAt(now);
      const lateBy = now - slotAt;
      this.lastGrantPaced = lateBy <= interval;
      if (this.lastGrantPaced) {
        // A late timer catches up half an interval at most: keeps the average rate under a
        // little timer lateness without sending two requests at once (a strict bucket 429s that).
        this.nextAt = Math.max(slotAt, now - CATCH_UP * interval) + interval;
      } else {
        if (Number.isFinite(slotAt)) this.idleMsSinceEvent += lateBy - interval;
        this.nextAt = now + interval;
      }
      if (this.queue.grant(now)) {
        this.lastGrantAt = now;
        this.peakInFlight = Math.max(this.peakInFlight, this.queue.inFlight);
      }
    }
  }
}
