import { describe, expect, it } from 'vitest';
import { InFlightLimit } from '../../../shared/api/in-flight.js';

function answers(limit: InFlightLimit, n: number, latencyMs: number): void {
  for (let i = 0; i < n; i += 1) limit.onAnswered(latencyMs);
}

describe('InFlightLimit', () => {
  it('starts at the floor, then keeps rate x latency with headroom in flight, between floor and ceiling', () => {
    const limit = new InFlightLimit({ floor: 4, ceiling: 128 });
    expect(limit.at(50)).toBe(4);
    answers(limit, 50, 250);
    // 50 req/s x 0.25 s = 12.5 in flight, x 1.5 + 2.
    expect(limit.at(50)).toBe(21);
    expect(limit.at(10)).toBe(6);
    answers(limit, 50, 2_000);
    expect(limit.at(50)).toBe(128);
    answers(limit, 50, 1);
    expect(limit.at(50)).toBe(4);
  });

  it('follows a moving average, not one slow answer', () => {
    const limit = new InFlightLimit({ floor: 1, ceiling: 256 });
    answers(limit, 20, 100);
    limit.onAnswered(5_000);
    expect(limit.latencyMs()).toBeCloseTo(1_080, 0);
    answers(limit, 20, 100);
    expect(limit.latencyMs()).toBeLessThan(120);
  });
});
