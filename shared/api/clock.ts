/**
 * The time source of the API client and its rate limiter. Production code uses the system
 * clock; tests pass a fake one to run the limiter and the retry loop on virtual time.
 */
export interface Clock {
  /** Monotonic milliseconds (only differences matter). */
  now(): number;
  /** Wall-clock milliseconds since the epoch, for HTTP-date `Retry-After` values. */
  wallNow(): number;
  /** Resolves after `ms` milliseconds, or at once when `signal` fires (its timer cleared). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock: `performance.now()`, `Date.now()` and `setTimeout`. */
export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      // Cleared on abort: a backoff left running would hold an interrupted process for seconds.
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
    }),
};
