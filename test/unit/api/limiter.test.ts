import { describe, expect, it } from 'vitest';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { FakeClock } from './fake-clock.js';
import { simulate } from './limiter-sim.js';

/** Acquires `n` slots and records the virtual time of each grant (slots released at once). */
async function grantTimes(limiter: AdaptiveRateLimiter, clock: FakeClock, n: number, onGrant?: () => void) {
  const times: number[] = [];
  const all = Array.from({ length: n }, async () => {
    const release = await limiter.acquire();
    times.push(clock.now());
    onGrant?.();
    release();
  });
  await clock.run(Promise.all(all));
  return times;
}

describe('AdaptiveRateLimiter', () => {
  it('spaces requests evenly at the initial rate', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 10, clock });

    const times = await grantTimes(limiter, clock, 4);

    expect(times).toEqual([0, 100, 200, 300]);
  });

  it('never has more than `concurrency` requests in flight', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 1000, maxRate: 1000, concurrency: 2, clock });
    let inFlight = 0;
    let peak = 0;

    const work = Array.from({ length: 10 }, async () => {
      const release = await limiter.acquire();
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await clock.sleep(50);
      inFlight -= 1;
      release();
    });
    await clock.run(Promise.all(work));

    expect(peak).toBe(2);
    // Five rounds of two 50 ms requests.
    expect(clock.now()).toBeGreaterThanOrEqual(250);
  });

  it('speeds up while requests succeed (slow start) and never passes the ceiling', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 5, maxRate: 40, clock });

    await grantTimes(limiter, clock, 30, () => limiter.onSuccess());
    const after30 = limiter.currentRate();
    await grantTimes(limiter, clock, 300, () => limiter.onSuccess());

    expect(after30).toBeGreaterThan(5);
    expect(limiter.currentRate()).toBe(40);
  });

  it('does not speed up while the client asks less than the rate allows', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 10, clock });

    for (let i = 0; i < 20; i += 1) {
      await clock.run(limiter.acquire()).then((release) => release());
      limiter.onSuccess();
      await clock.advance(1_000);
    }

    expect(limiter.currentRate()).toBe(10);
  });

  it('slows down on a 429 and counts the 429s of one burst as one event', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 40, clock });

    limiter.onThrottle();
    const afterFirst = limiter.currentRate();
    limiter.onThrottle();
    limiter.onThrottle();

    expect(afterFirst).toBeLessThan(40);
    expect(limiter.currentRate()).toBe(afterFirst);
    await clock.advance(1_000);
    limiter.onThrottle();
    expect(limiter.currentRate()).toBeLessThan(afterFirst);
  });

  it('holds every request back for the Retry-After when 429s keep coming after slowing down', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 100, clock });
    await clock.run(limiter.acquire()).then((release) => release());

    limiter.onThrottle(2_000);
    const [afterOne] = await grantTimes(limiter, clock, 1);
    limiter.onThrottle(2_000);
    const [afterTwo] = await grantTimes(limiter, clock, 1);

    // One 429: slow down only (the throttled request waits on its own). Another: everybody waits.
    expect(afterOne).toBeLessThan(1_000);
    expect(afterTwo).toBeGreaterThanOrEqual((afterOne ?? 0) + 2_000);
  });

  it('never slows below minRate', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 4, minRate: 1, clock });

    for (let i = 0; i < 30; i += 1) {
      limiter.onThrottle();
      await clock.advance(1_000);
    }

    expect(limiter.currentRate()).toBeGreaterThanOrEqual(1);
  });

  it('probes above its estimate when no 429 comes for a long time (the limit may have risen)', async () => {
    const clock = new FakeClock();
    const limiter = new AdaptiveRateLimiter({ initialRate: 20, maxRate: 1000, clock });
    // Two 429s a second apart with 20 successes between them: a measured limit of ~20 req/s.
    limiter.onThrottle();
    for (let i = 0; i < 20; i += 1) {
      await clock.advance(50);
      limiter.onSuccess();
    }
    limiter.onThrottle();
    const justAfter = limiter.currentRate();

    await clock.advance(60_000);

    expect(justAfter).toBeLessThan(20);
    expect(limiter.currentRate()).toBeGreaterThan(20);
  });

  // The benchmark's scenario on virtual time: a 50 req/s bucket with burst 10, unknown to the client.
  for (const [seed, retryAfter] of [
    [1, false],
    [2, false],
    [1, true],
    [2, true],
  ] as const) {
    it(`keeps just under a token bucket it is not told about (seed ${seed}, Retry-After ${retryAfter})`, async () => {
      const result = await simulate({
        ratePerSecond: 50,
        burst: 10,
        items: 2_000,
        workers: 8,
        seed,
        retryAfter,
      });

      expect(result.ok).toBe(2_000);
      expect(result.share429).toBeLessThanOrEqual(0.01);
      expect(result.utilisation).toBeGreaterThanOrEqual(0.95);
    });
  }

  it('adapts to other limits too: few 429s, most of the allowed rate', async () => {
    for (const [ratePerSecond, burst] of [
      [20, 5],
      [10, 10],
      [80, 20],
    ] as const) {
      const result = await simulate({
        ratePerSecond,
        burst,
        items: 1_000,
        workers: 8,
        seed: 7,
        retryAfter: true,
      });

      expect(result.share429, `${ratePerSecond}/s burst ${burst}`).toBeLessThanOrEqual(0.02);
      expect(result.utilisation, `${ratePerSecond}/s burst ${burst}`).toBeGreaterThanOrEqual(0.85);
    }
  });
});
