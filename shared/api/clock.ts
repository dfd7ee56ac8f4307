/**
 * The time source of the API client and its rate limiter. Production code uses the system
 * clock; tests pass a fake one to run the limiter and the retry loop on virtual time.
 */
export interface Clock {
  /** Monotonic milliseconds (only differences matter). */
  now(): number;
  /** Wall-clock milliseconds since the epoch, for HTTP-date `Retry-After` values. */
  wallNow(): number;
  /** Resolves after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

/** The real clock: `performance.now()`, `Date.now()` and `setTimeout`. */
export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms))),
};
