import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  DEFAULT_RETRY_POLICY,
  decideRetry,
  parseRetryAfter,
  policyForFailure,
  resolveRetryPolicy,
  UNRESOLVED_NAME_ATTEMPTS,
} from '../../../shared/api/retry.js';
import { ConfigError } from '../../../shared/errors.js';

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0);

describe('parseRetryAfter', () => {
  it('reads delay-seconds', () => {
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter('7', NOW)).toBe(7_000);
    expect(parseRetryAfter(' 120 ', NOW)).toBe(120_000);
    expect(parseRetryAfter('1.5', NOW)).toBe(1_500);
  });

  it('reads an HTTP-date as the time left until it, and a past date as 0', () => {
    expect(parseRetryAfter('Thu, 15 Jan 2026 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Thu, 15 Jan 2026 11:00:00 GMT', NOW)).toBe(0);
  });

  it('ignores a missing, empty or malformed header', () => {
    for (const value of [undefined, null, '', 'soon', '-5', '1e3', '12abc']) {
      expect(parseRetryAfter(value, NOW), String(value)).toBeUndefined();
    }
  });
});

describe('backoffDelayMs', () => {
  const policy = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 250, maxDelayMs: 2_000 };

  it('draws from [0, base x 2^(attempt-1)], capped at maxDelayMs (full jitter)', () => {
    expect(backoffDelayMs(1, policy, () => 0)).toBe(0);
    expect(backoffDelayMs(1, policy, () => 0.999)).toBe(249);
    expect(backoffDelayMs(3, policy, () => 0.5)).toBe(500);
    expect(backoffDelayMs(10, policy, () => 0.999)).toBe(1_998);
  });
});

describe('decideRetry', () => {
  const policy = resolveRetryPolicy({ maxAttempts: 3, maxElapsedMs: 10_000, maxRetryAfterMs: 5_000 });
  const half = () => 0.5;

  it('retries within the budget, after the Retry-After when there is one', () => {
    expect(decideRetry({ attempts: 1, elapsedMs: 0 }, policy, half)).toEqual({ retry: true, delayMs: 125 });
    expect(decideRetry({ attempts: 1, elapsedMs: 0, retryAfterMs: 4_000 }, policy, half)).toEqual({
      retry: true,
      delayMs: 4_000,
    });
  });

  it('stops after maxAttempts', () => {
    expect(decideRetry({ attempts: 3, elapsedMs: 0 }, policy, half)).toMatchObject({ retry: false });
  });

  it('stops when the wait would end after maxElapsedMs', () => {
    expect(decideRetry({ attempts: 1, elapsedMs: 7_000, retryAfterMs: 4_000 }, policy, half)).toMatchObject({
      retry: false,
    });
  });

  it('stops at once for a Retry-After longer than maxRetryAfterMs', () => {
    const decision = decideRetry({ attempts: 1, elapsedMs: 0, retryAfterMs: 6_000 }, policy, half);
    expect(decision).toMatchObject({ retry: false });
    if (!decision.retry) expect(decision.why).toMatch(/6000 ms/);
  });
});

describe('resolveRetryPolicy', () => {
  it('applies overrides to the defaults', () => {
    expect(resolveRetryPolicy({ maxAttempts: 2 })).toEqual({ ...DEFAULT_RETRY_POLICY, maxAttempts: 2 });
    expect(DEFAULT_RETRY_POLICY).toEqual({
      maxAttempts: 8,
      maxElapsedMs: 120_000,
      baseDelayMs: 250,
      maxDelayMs: 30_000,
      maxRetryAfterMs: 60_000,
    });
  });

  it('rejects values that make no sense', () => {
    expect(() => resolveRetryPolicy({ maxAttempts: 0 })).toThrow(ConfigError);
    expect(() => resolveRetryPolicy({ baseDelayMs: -1 })).toThrow(ConfigError);
    expect(() => resolveRetryPolicy({ maxElapsedMs: Number.NaN })).toThrow(ConfigError);
  });
});

describe('policyForFailure', () => {
  const enotfound = Object.assign(new Error('getaddrinfo ENOTFOUND api.acme.invalid'), { code: 'ENOTFOUND' });

  it('gives a host name that does not resolve one retry, not the whole budget', () => {
    const policy = policyForFailure(DEFAULT_RETRY_POLICY, enotfound);
    expect(policy.maxAttempts).toBe(UNRESOLVED_NAME_ATTEMPTS);
    expect(decideRetry({ attempts: 1, elapsedMs: 30 }, policy, () => 1)).toEqual({
      retry: true,
      delayMs: 250,
    });
    expect(decideRetry({ attempts: 2, elapsedMs: 300 }, policy).retry).toBe(false);
  });

  it('keeps the policy for a lookup that failed for now (EAI_AGAIN), any other failure, and a smaller budget', () => {
    const again = Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' });
    expect(policyForFailure(DEFAULT_RETRY_POLICY, again)).toBe(DEFAULT_RETRY_POLICY);
    expect(policyForFailure(DEFAULT_RETRY_POLICY, undefined)).toBe(DEFAULT_RETRY_POLICY);
    const one = resolveRetryPolicy({ maxAttempts: 1 });
    expect(policyForFailure(one, enotfound)).toBe(one);
  });
});
