import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { TokenBuckets } from '../../simulator/rate-limit.js';
import { get, V1 } from './helpers.js';

describe('TokenBuckets', () => {
  it('allows a burst, then refills at the rate, with Retry-After rounded up to whole seconds', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 2, burst: 3 });
    const at = (ms: number) => buckets.take('k', ms);
    expect([at(0), at(0), at(0)].every((r) => r.ok)).toBe(true);
    expect(at(0)).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(at(499)).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(at(500).ok).toBe(true);
    expect(at(500).ok).toBe(false);
    expect(buckets.take('other', 500).ok).toBe(true);
  });

  it('asks for more than one second when the rate is below one per second', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 0.25, burst: 1 });
    expect(buckets.take('k', 0).ok).toBe(true);
    expect(buckets.take('k', 0)).toEqual({ ok: false, retryAfterSeconds: 4 });
    expect(buckets.take('k', 3_000)).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it('never lets the bucket hold more than the burst', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 100, burst: 2 });
    const results = [0, 1, 2].map(() => buckets.take('k', 60_000));
    expect(results.map((r) => r.ok)).toEqual([true, true, false]);
  });

  it('rejects a limit that could never let a request through', () => {
    expect(() => new TokenBuckets({ ratePerSecond: 0, burst: 1 })).toThrow(/ratePerSecond/);
    expect(() => new TokenBuckets({ ratePerSecond: 1, burst: 0 })).toThrow(/burst/);
  });
});

describe('simulator rate limiting over HTTP', () => {
  let sim: Simulator;
  beforeAll(async () => {
    // A rate so low that no token comes back during the test: the outcome does not depend on timing.
    sim = await startSimulator({
      seed: 31,
      campaigns: 1,
      jobsPerCampaign: 1,
      rateLimit: { ratePerSecond: 0.01, burst: 3 },
    });
  });
  afterAll(() => sim.close());

  it('answers 429 RATE_LIMIT_EXCEEDED with Retry-After once the burst is spent, per key', async () => {
    const replies = [];
    for (let i = 0; i < 5; i++) replies.push(await get(sim, `${V1}/verify`));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    const limited = replies[3]!;
    expect(limited.json).toEqual({ error_code: 'RATE_LIMIT_EXCEEDED', message: 'Too many requests.' });
    // one token takes 100 s at 0.01/s; a slow machine may have refilled a sliver of it already
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(90);
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(100);
    expect(sim.stats.byStatus).toEqual({ '200': 3, '429': 2 });
    expect(sim.stats.okTimes).toHaveLength(3);
    const otherKey = await get(sim, `${V1}/verify`, { key: sim.keys.other_company });
    expect(otherKey.status).toBe(200);
  });

  it('does not rate-limit requests that fail authentication', async () => {
    const reply = await get(sim, `${V1}/verify`, { key: 'unknown' });
    expect(reply.status).toBe(401);
  });

  it('lifts the limit with setRateLimit(null)', async () => {
    sim.setRateLimit(null);
    expect((await get(sim, `${V1}/verify`)).status).toBe(200);
  });
});
