import { describe, expect, it } from 'vitest';
import { BudgetLimiter } from '../../../shared/api/budget-limiter.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import {
  BudgetContentionError,
  type BudgetStore,
  budgetRate,
  cutRate,
  initialBudget,
  LEASE_MS,
  SharedBudget,
  STEADY_LEASE_MS,
  takeLease,
} from '../../../shared/api/request-budget.js';
import { MemoryStore } from './budget-store.js';
import { FakeClock } from './fake-clock.js';

const POLICY = { ceiling: 50 };

describe('the shared budget (pure)', () => {
  it('hands out leases one after the other, never overlapping, each at most a slice of the rate', () => {
    let state = initialBudget(POLICY);
    const leases = [];
    for (let i = 0; i < 4; i++) {
      const { lease, next } = takeLease(state, 1_000_000, 100, POLICY);
      leases.push(lease);
      state = next;
    }

    // At the ceiling, nothing to learn: a second of the rate per lease (one write a second).
    expect(leases.map((l) => l.tokens)).toEqual(Array(4).fill(Math.floor((STEADY_LEASE_MS * 50) / 1000)));
    for (let i = 1; i < leases.length; i++) {
      const before = leases[i - 1]!;
      expect(leases[i]!.start).toBeCloseTo(before.start + before.tokens * before.interval, 6);
    }
    expect(leases[0]!.interval).toBe(20);
  });

  it('leases LEASE_MS of the rate while it is below the ceiling (after a cut), so that the next cut reaches the API soon', () => {
    const cut = { ...initialBudget(POLICY), base: 40, grownAt: 1_000_000, version: 1 };

    const { lease } = takeLease(cut, 1_000_000, 100, POLICY);

    expect(lease.tokens).toBe(Math.floor((LEASE_MS * 40) / 1000));
  });

  it('lets slots nobody took lapse, but for a short burst', () => {
    const state = { ...initialBudget(POLICY), tat: 1_000, version: 3 };

    const { lease } = takeLease(state, 60_000, 5, POLICY);

    // Not from 1 s (59 s of slots hoarded), only 100 ms back.
    expect(lease.start).toBe(59_900);
    expect(lease.tokens).toBe(5);
  });

  it('cuts the rate to the limit measured from the share of 429s, once per congestion event', () => {
    const state = { ...initialBudget({ ceiling: 100 }), tat: 10_200, version: 1 };

    const cut = cutRate(state, 10_000, { share: 0.4, sentRate: 100 }, { ceiling: 100 });
    const again = cut && cutRate(cut, 10_300, { share: 0.6, sentRate: 100 }, { ceiling: 100 });
    const later = cut && cutRate(cut, 10_800, { share: 0.01, sentRate: 48 }, { ceiling: 100 });

    expect(cut?.base).toBeCloseTo(60 * 0.95, 6);
    // 429s of requests sent on slots leased before the cut (until 10.2 s) + a round trip.
    expect(again).toBeUndefined();
    expect(later?.base).toBeCloseTo(48 * 0.99 * 0.95, 6);
  });

  it('cuts at least 5% and at most by half', () => {
    const state = { ...initialBudget({ ceiling: 100 }), version: 1 };
    const policy = { ceiling: 100 };

    expect(cutRate(state, 0, { share: 0, sentRate: 100 }, policy)?.base).toBeCloseTo(95, 6);
    expect(cutRate(state, 0, { share: 0.9, sentRate: 100 }, policy)?.base).toBeCloseTo(50, 6);
  });

  it('grows the rate back slowly while leases are taken, up to the ceiling', () => {
    let state = { ...initialBudget(POLICY), base: 40, grownAt: 1, version: 1 };
    for (let now = 1; now <= 10_001; now += 250) state = takeLease(state, now, 1, POLICY).next;

    expect(budgetRate(state, 10_001, POLICY)).toBeCloseTo(40 * 1.0025 ** 40, 1);
    for (let now = 10_001; now <= 100_001; now += 250) state = takeLease(state, now, 1, POLICY).next;
    expect(budgetRate(state, 100_001, POLICY)).toBe(50);
  });

  it('keeps the rate it learned while nobody leases', () => {
    const state = { ...initialBudget(POLICY), base: 40, grownAt: 1_000, version: 1 };

    // A day later: one second of growth, not a day's.
    expect(budgetRate(state, 86_400_000, POLICY)).toBeCloseTo(40.4, 6);
  });
});

describe('SharedBudget', () => {
  it('retries a write that lost to another container, from a fresh read', async () => {
    const store = new MemoryStore();
    const a = new SharedBudget(store, POLICY);
    const b = new SharedBudget(store, POLICY);

    const first = await a.lease(5);
    const second = await b.lease(5);
    // a's cached state is stale now: its write conflicts, it reads and writes again.
    const third = await a.lease(5);

    expect(second.start).toBeCloseTo(first.start + 100, 6);
    expect(third.start).toBeCloseTo(second.start + 100, 6);
    expect(store.state?.version).toBe(3);
  });

  it('gives up after repeated conflicts', async () => {
    const store: BudgetStore = {
      read: async () => ({ ...initialBudget(POLICY), version: 1 }),
      write: async () => ({ ok: false }),
    };

    const clock = new FakeClock();

    // (The rejection is taken at once: FakeClock.run would leave it unhandled between timers.)
    const leasing = new SharedBudget(store, POLICY, { clock }).lease(1).then(
      () => undefined,
      (error: unknown) => error,
    );

    expect(await clock.run(leasing)).toBeInstanceOf(BudgetContentionError);
  });
});

/** A token bucket as the API's (the simulator's), on the fake clock. */
class ApiBucket {
  private tokens: number;
  private at = 0;
  ok = 0;
  throttled = 0;
  readonly okTimes: number[] = [];

  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {
    this.tokens = burst;
  }

  take(now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      this.ok += 1;
      this.okTimes.push(now);
      return true;
    }
    this.throttled += 1;
    return false;
  }
}

/**
 * `containers` limiters on one store, each with `callers` callers sending for `seconds` to a
 * token bucket behind `latencyMs` (half each way); the store answers after `storeMs`.
 */
async function simulate(options: {
  containers: number;
  ceiling: number;
  api: { rate: number; burst: number };
  seconds: number;
  latencyMs?: number;
  storeMs?: number;
  callers?: number;
}) {
  const clock = new FakeClock({ wallStart: 0 });
  const store = new MemoryStore(clock, options.storeMs ?? 5);
  const api = new ApiBucket(options.api.rate, options.api.burst);
  const latency = options.latencyMs ?? 50;
  const end = options.seconds * 1000;
  const grants: number[] = [];
  const work = Array.from({ length: options.containers }, async () => {
    const limiter = new BudgetLimiter({
      budget: new SharedBudget(store, { ceiling: options.ceiling }, { clock }),
      fallback: () => new AdaptiveRateLimiter({ clock }),
      clock,
    });
    const caller = async () => {
      while (clock.now() < end) {
        const release = await limiter.acquire();
        grants.push(clock.now());
        await clock.sleep(latency / 2);
        const ok = api.take(clock.now());
        await clock.sleep(latency / 2);
        if (ok) limiter.onSuccess();
        else limiter.onThrottle(1000);
        release();
      }
    };
    await Promise.all(Array.from({ length: options.callers ?? 16 }, caller));
  });
  await clock.run(Promise.all(work), end + 60_000);
  const steady = api.okTimes.filter((t) => t >= end / 4 && t < end).length / ((end * 0.75) / 1000);
  return {
    utilisation: api.okTimes.filter((t) => t < end).length / options.seconds / options.api.rate,
    steadyUtilisation: steady / options.api.rate,
    share429: api.throttled / (api.ok + api.throttled),
    storeRequestsPerS: store.requests / options.seconds,
    grants,
  };
}

describe('BudgetLimiter', () => {
  it('keeps four containers together to the ceiling', async () => {
    const result = await simulate({
      containers: 4,
      ceiling: 50,
      api: { rate: 1000, burst: 1000 },
      seconds: 10,
    });

    const perSecond = new Map<number, number>();
    for (const t of result.grants)
      perSecond.set(Math.floor(t / 1000), (perSecond.get(Math.floor(t / 1000)) ?? 0) + 1);
    const full = [...perSecond].filter(([s]) => s < 10).map(([, n]) => n);
    // At most the rate plus the 100 ms burst in any second; all of it used.
    expect(Math.max(...full)).toBeLessThanOrEqual(55);
    expect(full.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(480);
    // A few store requests per second, not one per API request.
    expect(result.storeRequestsPerS).toBeLessThan(25);
  });

  it('uses the API at its limit with few 429s when the ceiling is the limit', async () => {
    const result = await simulate({ containers: 4, ceiling: 50, api: { rate: 50, burst: 10 }, seconds: 30 });

    expect(result.utilisation).toBeGreaterThan(0.9);
    expect(result.share429).toBeLessThan(0.01);
  });

  it('finds a limit below the ceiling: every container slows down on 429s seen by any', async () => {
    const result = await simulate({ containers: 4, ceiling: 100, api: { rate: 50, burst: 10 }, seconds: 30 });

    expect(result.steadyUtilisation).toBeGreaterThan(0.85);
    expect(result.share429).toBeLessThan(0.05);
  });

  it('never hands two containers the same slots: a lease whose write lost is dropped, even when the schedule is then booked too far', async () => {
    // Both read a schedule booked 900 ms ahead and take the next second of it; one write wins.
    // The other's retry finds the schedule booked 1.9 s ahead (more than a lease may wait) and
    // waits: the lease its lost write had taken was returned all the same, the same slots as
    // the winner's (the topology bench at the ceiling: 4 containers, 429s, the shared rate cut).
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    store.state = { ...initialBudget(POLICY), tat: 10_900, grownAt: 10_000, version: 1 };
    await clock.run(clock.sleep(10_000));
    const budgets = [0, 1].map(() => new SharedBudget(store, POLICY, { clock }));

    const leases = await clock.run(Promise.all(budgets.map((budget) => budget.lease(50))));

    const [first, second] = [...leases].sort((a, b) => a.start - b.start);
    expect(first && second).toBeDefined();
    if (first && second)
      expect(second.start).toBeGreaterThanOrEqual(first.start + first.tokens * first.interval - 1e-6);
  });

  it('a container that fell behind its lease sends its next slot on time, never catching up over the next lease', async () => {
    // The slots after a lease are another container's: caught up at twice the rate, the two
    // containers' requests reached the API together and met 429s (topology bench, 4 workers).
    // One timer of this container fires 300 ms late (a busy event loop): 15 slots pass.
    let timers = 0;
    const clock = new FakeClock({ wallStart: 0, maxLatenessMs: 300, random: () => (++timers === 8 ? 1 : 0) });
    const limiter = new BudgetLimiter({
      budget: new SharedBudget(new MemoryStore(clock, 1), { ceiling: 50 }, { clock }),
      fallback: () => new AdaptiveRateLimiter({ clock }),
      concurrency: 100,
      clock,
    });
    const grants: number[] = [];
    const take = async () => {
      const release = await limiter.acquire();
      grants.push(clock.now());
      limiter.onSuccess();
      release();
    };
    await clock.run(Promise.all(Array.from({ length: 40 }, take)));

    // At most a slot more in any 100 ms than the five 20 ms apart the lease holds there.
    const most = Math.max(...grants.map((at) => grants.filter((t) => t >= at && t < at + 100).length));
    expect(most).toBeLessThanOrEqual(6);
    expect(limiter.stats().lapsed).toBeGreaterThanOrEqual(10);
  });

  it('serves a caller that waits alone, even when the store answers slower than a slot lasts', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 30);
    const limiter = new BudgetLimiter({
      budget: new SharedBudget(store, { ceiling: 100 }, { clock }),
      fallback,
      clock,
    });

    for (let i = 0; i < 20; i++) {
      const release = await clock.run(limiter.acquire());
      await clock.run(clock.sleep(10));
      limiter.onSuccess();
      release();
    }

    // A lease that arrives after its slots gets its grace from its arrival: none lapses unused.
    expect(limiter.stats()).toMatchObject({ granted: 20, lapsed: 0, storeErrors: 0 });
    // Sequential requests lease for the requests granted lately, not one by one.
    expect(limiter.stats().leases).toBeLessThan(20);

    function fallback(): AdaptiveRateLimiter {
      throw new Error('the store did not fail');
    }
  });

  it('falls back to its own limiter when the store fails, and reports the outage once', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    store.failing = true;
    const errors: unknown[] = [];
    const limiter = new BudgetLimiter({
      budget: new SharedBudget(store, POLICY, { clock }),
      fallback: () => new AdaptiveRateLimiter({ initialRate: 10, maxRate: 10, clock }),
      onStoreError: (error) => errors.push(error),
      clock,
    });

    const granted = await clock.run(
      Promise.all(
        Array.from({ length: 20 }, async () => {
          const release = await limiter.acquire();
          release();
          limiter.onThrottle(1000);
          return clock.now();
        }),
      ),
    );

    expect(granted).toHaveLength(20);
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toContain('ServiceUnavailable');
  });
});
