/**
 * The rate limit per API key: a token bucket (`burst` tokens, refilled at `ratePerSecond`; an
 * empty bucket answers 429 with Retry-After: the whole seconds until one token is back, at least
 * 1) or a fixed window (fixed-window.ts).
 */
import { performance } from 'node:perf_hooks';
import { FixedWindows } from './fixed-window.js';
import type { FixedWindowLimit, RateLimit, TokenBucketLimit } from './types.js';

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private limit: TokenBucketLimit | null;

  constructor(limit: TokenBucketLimit | null | undefined) {
    this.limit = validated(limit);
  }

  /** Replaces the limit; every bucket starts full again. */
  set(limit: TokenBucketLimit | null | undefined): void {
    this.limit = validated(limit);
    this.buckets.clear();
  }

  /** Takes one token for `key`, or says how long to wait. */
  take(key: string, now = performance.now()): TakeResult {
    const limit = this.limit;
    if (!limit) return { ok: true };
    const bucket = this.buckets.get(key) ?? { tokens: limit.burst, updatedAt: now };
    bucket.tokens = Math.min(
      limit.burst,
      bucket.tokens + ((now - bucket.updatedAt) / 1000) * limit.ratePerSecond,
    );
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return {
      ok: false,
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / limit.ratePerSecond)),
    };
  }
}

/**
 * What the limiter says about one request: admitted (`windowStarted` when it opened a fixed
 * window) or refused. `headers` go on its answer; a 429's do not include Retry-After.
 */
export type Verdict =
  | { ok: true; windowStarted: boolean; headers: Record<string, string> }
  | { ok: false; retryAfterSeconds: number; headers: Record<string, string> };

/** Whichever limit is set (token bucket, fixed window or none), behind one `take`. */
export class RateLimiter {
  private limiter: TokenBuckets | FixedWindows | null = null;

  constructor(limit: RateLimit | null | undefined) {
    this.set(limit);
  }

  /** Replaces the limit; every key starts with a full bucket or no window. */
  set(limit: RateLimit | null | undefined): void {
    if (!limit) this.limiter = null;
    else if (isWindow(limit)) this.limiter = new FixedWindows(limit);
    else this.limiter = new TokenBuckets(limit);
  }

  /** Counts one request of `key` now, or refuses it. */
  take(key: string): Verdict {
    const limiter = this.limiter;
    if (limiter instanceof FixedWindows) return limiter.take(key);
    const token = limiter?.take(key);
    if (token && !token.ok) return { ok: false, retryAfterSeconds: token.retryAfterSeconds, headers: {} };
    return { ok: true, windowStarted: false, headers: {} };
  }
}

function isWindow(limit: RateLimit): limit is FixedWindowLimit {
  return 'windowRequests' in limit || 'windowMs' in limit;
}

function validated(limit: TokenBucketLimit | null | undefined): TokenBucketLimit | null {
  if (!limit) return null;
  if (!(limit.ratePerSecond > 0) || !(limit.burst >= 1)) {
    throw new Error(
      `simulator: rate limit needs ratePerSecond > 0 and burst >= 1, got ${JSON.stringify(limit)}`,
    );
  }
  return { ...limit };
}
