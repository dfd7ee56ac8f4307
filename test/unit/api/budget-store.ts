/**
 * Test doubles for the request budget: its store in memory (with a round trip on a fake clock,
 * so conflicts happen as on DynamoDB), a clock that is some seconds off the others, and a clock
 * that treats long timers as Node does.
 */
import type { Clock } from '../../../shared/api/clock.js';
import type { BudgetState, BudgetStore, BudgetWrite } from '../../../shared/api/request-budget.js';
import type { FakeClock } from './fake-clock.js';

/** The budget's store in memory, with a round trip on the clock as DynamoDB's (conflicts happen). */
export class MemoryStore implements BudgetStore {
  state: BudgetState | undefined;
  requests = 0;
  writes = 0;
  failing = false;

  constructor(
    private readonly clock?: FakeClock,
    private readonly latencyMs = 0,
  ) {}

  async read(): Promise<BudgetState | undefined> {
    await this.trip();
    return this.state && { ...this.state };
  }

  async write(next: BudgetState, expected: number | undefined): Promise<BudgetWrite> {
    await this.trip();
    if ((this.state?.version ?? undefined) !== expected) return { ok: false };
    this.state = { ...next };
    this.writes += 1;
    return { ok: true };
  }

  private async trip(): Promise<void> {
    this.requests += 1;
    if (this.latencyMs > 0 && this.clock) await this.clock.sleep(this.latencyMs);
    if (this.failing) throw new Error('ServiceUnavailable');
  }
}

/** Another container's clock on the same virtual time: its wall clock is `skewMs` off. */
export function skewedClock(clock: FakeClock, skewMs: number): Clock {
  return {
    now: () => clock.now(),
    wallNow: () => clock.wallNow() + skewMs,
    sleep: (ms) => clock.sleep(ms),
  };
}

/** Node's largest timer delay: setTimeout fires a longer one after 1 ms. */
export const NODE_MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A fake clock whose timers behave as Node's (a delay over 2^31 − 1 ms fires after 1 ms); records every delay asked. */
export function nodeTimerClock(clock: FakeClock): Clock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => clock.now(),
    wallNow: () => clock.wallNow(),
    sleep: (ms) => {
      sleeps.push(ms);
      return clock.sleep(ms > NODE_MAX_TIMEOUT_MS ? 1 : ms);
    },
  };
}
