/**
 * A token bucket per API key: `burst` tokens, refilled at `ratePerSecond`. An empty bucket
 * answers 429 with Retry-After: the whole seconds until one token is back (at least 1).
 */
import { performance } from 'node:perf_hooks';
import type { RateLimit } from './types.js';

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private limit: RateLimit | null;

  constructor(limit: RateLimit | null | undefined) {
    this.limit = validated(limit);
  }

  /** Replaces the limit; every bucket starts full again. */
  set(limit: RateLimit | null | undefined): void {
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

function validated(limit: RateLimit | null | undefined): RateLimit | null {
  if (!limit) return null;
  if (!(limit.ratePerSecond > 0) || !(limit.burst >= 1)) {
    throw new Error(
      `simulator: rate limit needs ratePerSecond > 0 and burst >= 1, got ${JSON.stringify(limit)}`,
    );
  }
  return { ...limit };
}
