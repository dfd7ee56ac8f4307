/**
 * What the request budget trusts of the shared item: a time in it far ahead (a bad write, a
 * clock far off), containers whose clocks disagree, and timers however far the item points.
 */
import { describe, expect, it } from 'vitest';
import { BudgetLimiter } from '../../../shared/api/budget-limiter.js';
import type { Clock } from '../../../shared/api/clock.js';
import {
  type BudgetRepair,
  type BudgetState,
  budgetRate,
  FALLBACK_HEADROOM,
  fallbackRate,
  initialBudget,
  LEASE_MS,
  leasingCeiling,
  MAX_QUEUE_MS,
  maxGrantWaitMs,
  repairBudget,
  SharedBudget,
  STEADY_LEASE_MS,
  untrustedFields,
} from '../../../shared/api/request-budget.js';
import { MemoryStore, nodeTimerClock, skewedClock } from './budget-store.js';
import { FakeClock } from './fake-clock.js';

const POLICY = { ceiling: 50 };
/** Whatever the item says, a caller is granted within a lease slice (the steady one at most) and a second. */
const MAX_WAIT_MS = STEADY_LEASE_MS + 1_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** An item a container wrote just now, but for `overrides`. */
function itemAt(wallNow: number, overrides: Partial<BudgetState>): BudgetState {
  return { tat: wallNow, base: 50, grownAt: wallNow, holdUntil: 0, version: 7, ...overrides };
}

function limiterOn(store: MemoryStore, clock: Clock, repairs: BudgetRepair[] = []): BudgetLimiter {
  return new BudgetLimiter({
    budget: new SharedBudget(store, POLICY, { clock, onRepair: (repair) => repairs.push(repair) }),
    fallback: () => {
      throw new Error('the store did not fail');
    },
    clock,
  });
}

describe('the request budget bounds what it trusts of the item', () => {
  it('grants within a lease slice and a second when the item says an hour ahead, and repairs it', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    const found = itemAt(clock.wallNow(), { tat: clock.wallNow() + HOUR_MS });
    store.state = found;
    const repairs: BudgetRepair[] = [];
    const limiter = limiterOn(store, clock, repairs);

    await clock.run(limiter.acquire(), 2 * HOUR_MS);

    expect(clock.now()).toBeLessThanOrEqual(MAX_WAIT_MS);
    // Written back: the next container is not sent an hour out either.
    expect(store.state?.tat).toBeLessThanOrEqual(clock.wallNow() + MAX_WAIT_MS);
    expect(repairs).toEqual([expect.objectContaining({ found, fields: ['tat'], itemNow: 5 })]);
  });

  it('reports a repair once per container, not once per request', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    const repairs: BudgetRepair[] = [];
    const limiter = limiterOn(store, clock, repairs);

    for (let i = 0; i < 3; i++) {
      // Another bad write each time: a time in the hold an hour out, the item's own time a day.
      store.state = itemAt(clock.wallNow(), { holdUntil: clock.wallNow() + HOUR_MS, version: 10 + i });
      (await clock.run(limiter.acquire(), 10_000))();
      store.state = itemAt(clock.wallNow(), { grownAt: clock.wallNow() + DAY_MS, version: 20 + i });
      (await clock.run(limiter.acquire(), 10_000))();
      await clock.run(clock.sleep(1_000));
    }

    expect(repairs).toHaveLength(1);
    expect(clock.now()).toBeLessThan(6 * MAX_WAIT_MS);
    expect(store.state?.grownAt).toBeLessThanOrEqual(clock.wallNow());
  });

  it('believes an item whose clock is within the skew allowed: no repair, and slots on its time', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    // Written by a container 50 s ahead, who leased up to 200 ms after its time.
    store.state = itemAt(clock.wallNow() + 50_000, { tat: clock.wallNow() + 50_200 });
    const repairs: BudgetRepair[] = [];
    const budget = new SharedBudget(store, POLICY, { clock, onRepair: (r) => repairs.push(r) });

    const lease = await clock.run(budget.lease(5));

    expect(repairs).toEqual([]);
    // The read took 5 ms: the item's time is known to 5 ms, on the safe side.
    expect(lease.start - clock.wallNow()).toBeCloseTo(200 - 5, 6);
    // Booked on the item's time: after its 50.2 s, five slots of 20 ms.
    expect(store.state?.tat).toBeCloseTo(50_300, 6);
  });

  it('waits for a schedule booked further than a second ahead, then leases within a second', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    // Others leased up to 1.2 s ahead (a legitimate item: within a slice and a second).
    store.state = itemAt(clock.wallNow(), { tat: clock.wallNow() + 1_200 });
    const repairs: BudgetRepair[] = [];
    const budget = new SharedBudget(store, POLICY, { clock, onRepair: (r) => repairs.push(r) });

    const lease = await clock.run(budget.lease(5));

    expect(repairs).toEqual([]);
    expect(lease.start).toBeCloseTo(1_200, 6);
    // Asked again 200 ms after the read, when the schedule was booked a second ahead.
    expect(lease.start - clock.wallNow()).toBeLessThanOrEqual(MAX_QUEUE_MS);
    expect(clock.now()).toBeGreaterThanOrEqual(200);
  });

  it('sets no timer past the bound when the item says 30 days ahead (no wake-up storm)', async () => {
    const fake = new FakeClock({ wallStart: 0 });
    const clock = nodeTimerClock(fake);
    const store = new MemoryStore(fake, 5);
    store.state = itemAt(clock.wallNow(), { tat: clock.wallNow() + 30 * DAY_MS });
    const limiter = limiterOn(store, clock);

    const granted = await fake.run(limiter.acquire(), 2_000).then(
      () => true,
      () => false,
    );

    expect(Math.max(...clock.sleeps)).toBeLessThanOrEqual(MAX_WAIT_MS);
    expect(clock.sleeps.length).toBeLessThan(20);
    expect(granted).toBe(true);
  });

  it('does not push a container’s slots out by the clock skew of another', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    const ahead = limiterOn(store, skewedClock(clock, 30_000));
    const correct = limiterOn(store, clock);

    // The container 30 s ahead leases first; then the correct one asks.
    (await clock.run(ahead.acquire()))();
    const asked = clock.now();
    (await clock.run(correct.acquire(), HOUR_MS))();

    expect(clock.now() - asked).toBeLessThanOrEqual(MAX_WAIT_MS);
  });

  it('keeps two containers 30 s apart to the ceiling together, both served', async () => {
    const clock = new FakeClock({ wallStart: 0 });
    const store = new MemoryStore(clock, 5);
    const containers = [limiterOn(store, skewedClock(clock, 30_000)), limiterOn(store, clock)];
    const end = 10_000;
    const grants: number[][] = [[], []];

    await clock.run(
      Promise.all(
        containers.flatMap((limiter, i) =>
          Array.from({ length: 8 }, async () => {
            while (clock.now() < end) {
              const release = await limiter.acquire();
              grants[i]?.push(clock.now());
              await clock.sleep(50);
              limiter.onSuccess();
              release();
            }
          }),
        ),
      ),
      end + HOUR_MS,
    );

    const within = (times: number[] | undefined) => (times ?? []).filter((t) => t < end).length;
    const total = within(grants[0]) + within(grants[1]);
    // 50 req/s for 10 s, plus the 100 ms burst and one lease of overlap when the item's time jumped.
    expect(total).toBeLessThanOrEqual(500 + 5 + 2 * 13);
    expect(total).toBeGreaterThanOrEqual(450);
    // The correct container gets its part of it, not nothing for 30 s (28% with 1 s leases at
    // the ceiling, 30-50% with 250 ms ones: the container ahead's first lease after the jump is longer).
    expect(within(grants[1])).toBeGreaterThan(total * 0.25);
  });
});

describe('the bounds of the item (pure)', () => {
  it('distrusts each time beyond what an honest writer could have written, and sets it back', () => {
    const now = 1_000_000;
    const honest = itemAt(now, { tat: now + maxGrantWaitMs(POLICY, 50), holdUntil: now + LEASE_MS + 500 });
    const bad = { ...honest, tat: now + 30 * DAY_MS, grownAt: now + 1, holdUntil: now + HOUR_MS };

    expect(untrustedFields(honest, now, POLICY)).toEqual([]);
    expect(untrustedFields(bad, now, POLICY)).toEqual(['tat', 'grownAt', 'holdUntil']);
    expect(repairBudget(bad, now, POLICY)).toEqual({ ...bad, tat: now, grownAt: now, holdUntil: now });
  });

  it('waits longer on what the item says only when a slot lasts longer than a slice (a low rate)', () => {
    expect(maxGrantWaitMs(POLICY, 50)).toBe(STEADY_LEASE_MS + 1_000);
    expect(maxGrantWaitMs(POLICY, 1)).toBe(STEADY_LEASE_MS + 1_000);
    // One slot at the lowest rate, 0.2 req/s, lasts 5 s: the longest wait, the limiter's longest timer.
    expect(maxGrantWaitMs(POLICY)).toBe(5_000 + 1_000);
  });

  it('leaves the headroom to the containers that may fall back, so any mix stays under the ceiling', () => {
    const policy = { ceiling: 20, containers: 5 };
    const share = fallbackRate(policy);

    expect(share).toBeCloseTo((20 * FALLBACK_HEADROOM) / 4, 9);
    expect(leasingCeiling(policy)).toBeCloseTo(20 * (1 - FALLBACK_HEADROOM), 9);
    expect(budgetRate(initialBudget(policy), 0, policy)).toBeCloseTo(18, 9);
    // Up to four in fallback while one leases; all five in fallback.
    for (let down = 0; down <= 4; down++)
      expect(leasingCeiling(policy) + down * share).toBeLessThanOrEqual(20);
    expect(5 * share).toBeLessThanOrEqual(20);
    // Alone, a container leases all of it, and falls back to all of it.
    expect(leasingCeiling({ ceiling: 20 })).toBe(20);
    expect(fallbackRate({ ceiling: 20 })).toBe(20);
  });
});
