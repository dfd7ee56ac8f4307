import { describe, expect, it } from 'vitest';
import { parseRateLimitHeaders } from '../../../shared/api/rate-limit-headers.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

describe('parseRateLimitHeaders', () => {
  it("reads Laravel's X-RateLimit-Limit and -Remaining (no reset on a 200)", () => {
    expect(parseRateLimitHeaders({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59' }, NOW)).toEqual({
      limit: 60,
      remaining: 59,
    });
  });

  it('reads X-RateLimit-Reset as epoch seconds, epoch milliseconds or delta seconds', () => {
    const epochSeconds = String(NOW / 1000 + 42);
    expect(parseRateLimitHeaders({ 'x-ratelimit-reset': epochSeconds }, NOW)).toEqual({ resetInMs: 42_000 });
    expect(parseRateLimitHeaders({ 'x-ratelimit-reset': String(NOW + 1_500) }, NOW)).toEqual({
      resetInMs: 1_500,
    });
    expect(parseRateLimitHeaders({ 'x-ratelimit-reset': '7' }, NOW)).toEqual({ resetInMs: 7_000 });
    // A reset already past is a wait of 0, not a negative one.
    expect(parseRateLimitHeaders({ 'x-ratelimit-reset': String(NOW / 1000 - 5) }, NOW)).toEqual({
      resetInMs: 0,
    });
  });

  it('reads the IETF structured fields and takes the policy with the fewest requests left', () => {
    const info = parseRateLimitHeaders(
      {
        ratelimit: '"burst";r=40;t=1, "daily";r=3;t=3600',
        'ratelimit-policy': '"burst";q=100;w=1, "daily";q=1000;w=86400',
      },
      NOW,
    );
    expect(info).toEqual({ limit: 1000, remaining: 3, resetInMs: 3_600_000 });
  });

  it("reads draft 07's dictionary and the early drafts' separate fields", () => {
    expect(parseRateLimitHeaders({ ratelimit: 'limit=100, remaining=50, reset=30' }, NOW)).toEqual({
      limit: 100,
      remaining: 50,
      resetInMs: 30_000,
    });
    expect(
      parseRateLimitHeaders(
        { 'ratelimit-limit': '100, 100;w=60', 'ratelimit-remaining': '9', 'ratelimit-reset': '12' },
        NOW,
      ),
    ).toEqual({ limit: 100, remaining: 9, resetInMs: 12_000 });
  });

  it('ignores what is not a non-negative number, and answers without the fields', () => {
    expect(parseRateLimitHeaders({}, NOW)).toBeUndefined();
    expect(parseRateLimitHeaders({ 'x-ratelimit-remaining': 'lots' }, NOW)).toBeUndefined();
    expect(parseRateLimitHeaders({ 'x-ratelimit-remaining': '-3', 'x-ratelimit-limit': '10' }, NOW)).toEqual({
      limit: 10,
    });
    expect(parseRateLimitHeaders({ ratelimit: 'garbage;;=' }, NOW)).toBeUndefined();
  });
});
