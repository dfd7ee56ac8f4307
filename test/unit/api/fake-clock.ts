/**
 * A virtual clock for the limiter and the retry loop: `sleep` registers a timer, and
 * `advance`/`runUntilSettled` move time from timer to timer, letting promise chains run in
 * between. Deterministic; optional seeded timer lateness imitates a busy event loop.
 */
import type { Clock } from '../../../shared/api/clock.js';

interface Timer {
  at: number;
  seq: number;
  resolve: () => void;
}

export interface FakeClockOptions {
  /** Wall-clock epoch ms at virtual time 0. */
  wallStart?: number;
  /** Each timer fires up to this many ms late (uniform, from `random`). */
  maxLatenessMs?: number;
  random?: () => number;
}

export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers: Timer[] = [];
  private readonly wallStart: number;
  private readonly maxLatenessMs: number;
  private readonly random: () => number;

  constructor(options: FakeClockOptions = {}) {
    this.wallStart = options.wallStart ?? Date.UTC(2026, 0, 1);
    this.maxLatenessMs = options.maxLatenessMs ?? 0;
    this.random = options.random ?? Math.random;
  }

  now(): number {
    return this.t;
  }

  wallNow(): number {
    return this.wallStart + this.t;
  }

  sleep(ms: number): Promise<void> {
    const lateness = this.maxLatenessMs > 0 ? this.random() * this.maxLatenessMs : 0;
    return new Promise((resolve) => {
      this.timers.push({ at: this.t + Math.max(0, ms) + lateness, seq: this.seq++, resolve });
    });
  }

  /** Timers not fired yet. */
  pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer due on the way, in order. */
  async advance(ms: number): Promise<void> {
    const until = this.t + ms;
    for (;;) {
      await settle();
      const next = this.earliest();
      if (next === undefined || next.at > until) break;
      this.fire(next);
    }
    this.t = until;
    await settle();
  }

  /** Fires timers in order until `done` resolves (or `maxMs` of virtual time passes). */
  async run<T>(done: Promise<T>, maxMs = 3_600_000): Promise<T> {
    let finished = false;
    const result = done.finally(() => {
      finished = true;
    });
    const until = this.t + maxMs;
    for (;;) {
      await settle();
      if (finished) break;
      const next = this.earliest();
      if (next === undefined)
        throw new Error('FakeClock.run: no timer left and the promise is still pending');
      if (next.at > until) throw new Error(`FakeClock.run: still pending after ${maxMs} ms of virtual time`);
      this.fire(next);
    }
    return result;
  }

  private earliest(): Timer | undefined {
    let best: Timer | undefined;
    for (const timer of this.timers) {
      if (best === undefined || timer.at < best.at || (timer.at === best.at && timer.seq < best.seq))
        best = timer;
    }
    return best;
  }

  private fire(timer: Timer): void {
    this.timers = this.timers.filter((t) => t !== timer);
    this.t = Math.max(this.t, timer.at);
    timer.resolve();
  }
}

/** Lets every pending promise continuation run (a macrotask turn drains the microtask queue). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Real time that skips every sleep: `sleep(ms)` resolves at once and moves the clock `ms`
 * ahead. For tests against real sockets that must not wait out backoffs or Retry-After; the
 * requested sleeps are recorded.
 */
export class SkippingClock implements Clock {
  readonly sleeps: number[] = [];
  private offset = 0;

  now(): number {
    return performance.now() + this.offset;
  }

  wallNow(): number {
    return Date.now() + this.offset;
  }

  sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.offset += Math.max(0, ms);
    return Promise.resolve();
  }
}
