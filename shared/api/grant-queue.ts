/**
 * The callers a rate limiter keeps waiting, and the requests it has let go: what the
 * AdaptiveRateLimiter and the BudgetLimiter share. The limiter's pump decides when the next
 * request may go; the queue grants it to the first caller, counts it in flight until it is
 * released, and keeps the one timer that wakes the pump for the next slot. It also tells the
 * window quota what the API's headers say, since the quota counts the requests in flight.
 */
import type { Clock } from './clock.js';
import type { InFlightLimit } from './in-flight.js';
import type { RateLimitInfo } from './rate-limit-headers.js';
import type { WindowQuota } from './window-quota.js';

/**
 * Node fires a timer set for longer than this after 1 ms: a far wake-up is cut to it, and the
 * pump sets the next.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Every request is held back longer than its caller waits: the limiter says how long instead. */
export class RateLimitWaitError extends Error {
  constructor(readonly waitMs: number) {
    super(`every request is held back for ${Math.round(waitMs)} ms (the API's rate limit)`);
    this.name = 'RateLimitWaitError';
  }
}

/**
 * A request slot: call it once the answer is read. `sentAt` is when the slot was granted, on the
 * limiter's clock: the limiter is told it with the answer, to know which window sent it.
 */
export interface Release {
  (): void;
  readonly sentAt: number;
}

/** A caller waiting for a request slot. */
export interface Waiter {
  resolve: (release: Release) => void;
  reject: (error: unknown) => void;
  maxWaitMs: number | undefined;
}

export interface GrantQueueOptions {
  /** Sleeps until a wake-up. */
  clock: Clock;
  /** The limiter's time, ms: grants, latencies and wake-ups are counted in it. */
  now: () => number;
  /** Told the latency of every request released. */
  inFlightLimit: InFlightLimit;
  /** Told of every request granted (a limiter may swap the quota behind this: see limiter.ts). */
  quota: Pick<WindowQuota, 'spend' | 'observe' | 'refused'>;
  /** The limiter's pump: runs when a caller comes, a request is released or a wake-up is due. */
  pump: () => void;
  /** No timer is set for longer than this, ms (default: Node's longest); the pump then sets the next. */
  maxSleepMs?: number;
}

/**
 * Waiting callers in order (FIFO) and the requests in flight. A request's release function
 * counts once however often it is called. `grant` says whether anybody was granted: each
 * limiter keeps its own account of its grants.
 */
export class GrantQueue {
  private readonly waiting: Waiter[] = [];
  /** Requests granted and not released yet. */
  private outstanding = 0;
  /** Time for which a wake-up of the pump is scheduled. */
  private wakeAt: number | undefined;

  constructor(private readonly options: GrantQueueOptions) {}

  /** Callers waiting. */
  get length(): number {
    return this.waiting.length;
  }

  /** Requests granted and not released yet. */
  get inFlight(): number {
    return this.outstanding;
  }

  /** Waits for a request slot; resolves with the function to call once the answer is read. */
  enqueue(maxWaitMs?: number): Promise<Release> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject, maxWaitMs });
      this.options.pump();
    });
  }

  /** Takes every caller waiting out of the queue, in order (another limiter serves them). */
  drain(): Waiter[] {
    return this.waiting.splice(0);
  }

  /** Callers that wait at most less than `waitMs` are told so now rather than kept waiting. */
  refuseLongWaits(waitMs: number): void {
    for (const waiter of this.waiting.filter((w) => w.maxWaitMs !== undefined && waitMs > w.maxWaitMs)) {
      this.waiting.splice(this.waiting.indexOf(waiter), 1);
      waiter.reject(new RateLimitWaitError(waitMs));
    }
  }

  /** Lets the first caller's request go; false when nobody is waiting (the limiter counts only grants). */
  grant(grantedAt: number): boolean {
    const waiter = this.waiting.shift();
    if (waiter === undefined) return false;
    this.outstanding += 1;
    this.options.quota.spend(grantedAt);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.outstanding -= 1;
      this.options.inFlightLimit.onAnswered(this.options.now() - grantedAt);
      this.options.pump();
    };
    waiter.resolve(Object.assign(release, { sentAt: grantedAt }));
    return true;
  }

  /**
   * The rate-limit fields of an answer to the request sent at `sentAt` (unknown: taken as sent
   * now); its own request is still counted in flight.
   */
  observe(info: RateLimitInfo, now: number, sentAt = now): void {
    this.options.quota.observe(info, now, this.outstanding - 1, sentAt);
  }

  /**
   * A 429 with the rate-limit fields of its headers; true when they say the window is spent:
   * then nobody goes before it turns, and the limiter keeps its rate.
   */
  refusedByWindow(info: RateLimitInfo, now: number, retryAfterMs: number | undefined, sentAt = now): boolean {
    // A reset the headers name is preferred; Retry-After is rounded to whole seconds.
    this.options.quota.refused(info, now, info.resetInMs === undefined ? retryAfterMs : undefined, sentAt);
    return (info.remaining ?? 0) === 0;
  }

  /** Pumps at `at` (or after maxSleepMs, whichever is first); one timer, for the earliest time asked. */
  wake(at: number): void {
    const now = this.options.now();
    const until = Math.min(at, now + Math.min(this.options.maxSleepMs ?? MAX_TIMER_MS, MAX_TIMER_MS));
    if (this.wakeAt !== undefined && this.wakeAt <= until) return;
    this.wakeAt = until;
    void this.options.clock.sleep(until - now).then(() => {
      if (this.wakeAt === until) this.wakeAt = undefined;
      this.options.pump();
    });
  }
}
