/**
 * A limiter that stops granting at a deadline: the requests of a Lambda invocation whose time
 * for requests is up (`shared/export/run/time-budget.ts`) are not sent, and their callers get
 * the answer a request held back too long gets (the client's `not sent`), so that what they
 * were for is left to the next delivery. Requests already granted run on.
 */
import { type RateLimiter, RateLimitWaitError, type Release } from './limiter.js';

/** What a request asked for after its invocation's deadline is refused with. */
export class DeadlineWaitError extends RateLimitWaitError {
  constructor() {
    // Longer than any caller waits for a Retry-After: the client does not retry it.
    super(Number.MAX_SAFE_INTEGER);
    this.message = "this invocation's time for requests is up: the next delivery sends it";
    this.name = 'DeadlineWaitError';
  }
}

/**
 * `inner`, granting no slot once `msUntilStop()` is zero or less: a caller asking then is
 * refused at once, and one still waiting when it comes is refused then (its slot, when `inner`
 * grants it, is given back unused).
 *
 * @example
 * const limiter = limiterUntil(shared, () => stopAt - Date.now());
 */
export function limiterUntil(inner: RateLimiter, msUntilStop: () => number): RateLimiter {
  return {
    acquire(maxWaitMs?: number): Promise<Release> {
      const left = msUntilStop();
      if (left <= 0) return Promise.reject(new DeadlineWaitError());
      return new Promise<Release>((resolve, reject) => {
        let settled = false;
        const timer = setTimeout(() => {
          settled = true;
          reject(new DeadlineWaitError());
        }, left);
        timer.unref?.();
        inner.acquire(maxWaitMs).then(
          (release) => {
            if (settled) return release(); // Granted after the deadline: given back unused.
            settled = true;
            clearTimeout(timer);
            resolve(release);
          },
          (error: unknown) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            reject(error);
          },
        );
      });
    },
    onSuccess: (info, sentAt) => inner.onSuccess(info, sentAt),
    onThrottle: (retryAfterMs, info, sentAt) => inner.onThrottle(retryAfterMs, info, sentAt),
    currentRate: () => inner.currentRate(),
  };
}
