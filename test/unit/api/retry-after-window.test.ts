import { describe, expect, it } from 'vitest';
import {
  earliestTurnInMs,
  RetryAfterWindow,
  type WindowVerdict,
} from '../../../shared/api/retry-after-window.js';
import { FixedWindows } from '../../simulator/fixed-window.js';
import { TokenBuckets } from '../../simulator/rate-limit.js';

/** The API's answer to a request arriving at `at` (ms): admitted, or refused with Retry-After seconds. */
type Api = (at: number) => { ok: true } | { ok: false; retryAfterSeconds: number };

/**
 * A client that sends a request every `intervalMs` (`paceAt` may change it over time) through
 * the API, each answered `latencyMs` after it was sent (half each way), and tells the recogniser
 * every answer in order. Returns every verdict with its answer time.
 */
function drive(
  api: Api,
  recogniser: RetryAfterWindow,
  options: { requests: number; intervalMs: number | ((sentAt: number) => number); latencyMs?: number },
): Array<{ at: number; verdict: WindowVerdict }> {
  const latencyMs = options.latencyMs ?? 100;
  const verdicts = [];
  let sentAt = 0;
  for (let i = 0; i < options.requests; i += 1) {
    const answer = api(sentAt + latencyMs / 2);
    const now = sentAt + latencyMs;
    const verdict = answer.ok
      ? recogniser.success(sentAt, now)
      : recogniser.refused(sentAt, now, answer.retryAfterSeconds * 1000);
    verdicts.push({ at: now, verdict });
    const interval = options.intervalMs;
    sentAt += typeof interval === 'number' ? interval : interval(sentAt);
  }
  return verdicts;
}

/** A single API whose limit can be swapped at a time (a new FixedWindows, as the simulator does). */
function changingApi(first: Api, then: Api, atMs: number): Api {
  return (at) => (at < atMs ? first(at) : then(at));
}

describe('earliestTurnInMs', () => {
  it('is the Retry-After less the rounding, from the send: the turn is less than a second after it', () => {
    // Sent at 1,000, answered at 1,100 with Retry-After 3 s: the turn is after 3,000.
    expect(earliestTurnInMs(1_000, 1_100, 3_000)).toBe(1_900);
    // Retry-After 1 s says nothing more than "within the second": the reset has passed.
    expect(earliestTurnInMs(1_000, 1_100, 1_000)).toBe(0);
  });
});

describe('RetryAfterWindow', () => {
  it('recognises a window from the count it admits: on trial after one window, confirmed by the next', () => {
    // 200 per 5 s, sent at 50/s: each window is spent in 4 s, then 429s with Retry-After 1-2 s.
    const api = (() => {
      const windows = new FixedWindows({ windowRequests: 200, windowMs: 5_000, headers: 'none' });
      return (at: number) => windows.take('key', at);
    })();
    const recogniser = new RetryAfterWindow();

    const verdicts = drive(api, recogniser, { requests: 900, intervalMs: 20 });

    const firstWindow = verdicts.findIndex((v) => v.verdict.kind === 'window');
    // The first window's 200 are counted, and the second is held at them.
    expect(verdicts[firstWindow]?.verdict).toEqual({
      kind: 'window',
      info: { limit: 200, remaining: 199 },
      confirmed: false,
    });
    expect(verdicts[firstWindow]?.at).toBeGreaterThan(5_000);
    expect(recogniser.recognisedLimit).toBe(200);
    const last = verdicts.at(-1)?.verdict;
    expect(last?.kind === 'window' && last.confirmed).toBe(true);
  });

  it('names the earliest turn as the reset of a refusal, and counts Remaining down from the turn', () => {
    const windows = new FixedWindows({ windowRequests: 100, windowMs: 5_000, headers: 'none' });
    const recogniser = new RetryAfterWindow();

    // Requests arrive every 25 ms from 50 ms on: the windows turn at 50 ms + 5 s x k.
    const verdicts = drive((at) => windows.take('key', at), recogniser, { requests: 800, intervalMs: 25 });

    const refusals = verdicts.flatMap(({ at, verdict }) =>
      // (0: the earliest turn has passed, the window may turn any moment.)
      verdict.kind === 'window' && (verdict.info.resetInMs ?? 0) > 0
        ? [at + (verdict.info.resetInMs ?? 0)]
        : [],
    );
    expect(refusals.length).toBeGreaterThan(0);
    for (const reset of refusals) {
      const turn = 50 + Math.ceil((reset - 50) / 5_000) * 5_000;
      // Never after the turn, and less than a second (and the way there) before it.
      expect(reset).toBeLessThanOrEqual(turn);
      expect(turn - reset).toBeLessThanOrEqual(1_050);
    }
    const remaining = verdicts.flatMap(({ verdict }) =>
      verdict.kind === 'window' && verdict.info.resetInMs === undefined ? [verdict.info.remaining] : [],
    );
    expect(remaining.slice(0, 3)).toEqual([99, 98, 97]);
  });

  it('never recognises a token bucket that sends Retry-After (whole seconds until a token is back)', () => {
    for (const [ratePerSecond, burst] of [
      [50, 10],
      [20, 5],
      [5, 20],
    ] as const) {
      for (const pace of [1.2, 1.5, 3]) {
        const buckets = new TokenBuckets({ ratePerSecond, burst });
        const recogniser = new RetryAfterWindow();
        // A pace that slows down and speeds up again, as a limiter's does around a bucket's rate.
        const intervalMs = (sentAt: number) => 1000 / (ratePerSecond * (sentAt % 7_000 < 3_500 ? pace : 0.8));

        const verdicts = drive((at) => buckets.take('key', at), recogniser, { requests: 3_000, intervalMs });

        expect(
          verdicts.filter((v) => v.verdict.kind !== 'unknown'),
          `${ratePerSecond}/s, burst ${burst}, ${pace}x`,
        ).toEqual([]);
      }
    }
  });

  it('learns a changed limit afresh: the old one is dropped at the first window that admits fewer', () => {
    const before = new FixedWindows({ windowRequests: 200, windowMs: 5_000, headers: 'none' });
    const after = new FixedWindows({ windowRequests: 120, windowMs: 5_000, headers: 'none' });
    const api = changingApi(
      (at) => before.take('key', at),
      (at) => after.take('key', at),
      30_000,
    );
    const recogniser = new RetryAfterWindow();

    const verdicts = drive(api, recogniser, { requests: 3_000, intervalMs: 20 });

    const limits = verdicts.map((v) => (v.verdict.kind === 'window' ? v.verdict.info.limit : v.verdict.kind));
    const forgotten = limits.indexOf('forgotten');
    expect(limits.slice(0, forgotten)).toContain(200);
    expect(forgotten).toBeGreaterThan(0);
    expect((verdicts[forgotten]?.at ?? 0) / 1000).toBeGreaterThanOrEqual(30);
    // Not trusted after the change: 200 never again, 120 learnt.
    expect(limits.slice(forgotten)).not.toContain(200);
    expect(recogniser.recognisedLimit).toBe(120);
  });

  it('drops a count on trial that the API lets through past (it was no window)', () => {
    const recogniser = new RetryAfterWindow();
    // A window of 20 in 2 s, then 429s told 2 s: put on trial.
    let t = 0;
    for (let i = 0; i < 20; i += 1, t += 100) recogniser.success(t, t + 50);
    recogniser.refused(t, t + 50, 2_000);
    t += 2_000;
    expect(recogniser.success(t, t + 50).kind).toBe('window');
    // The next "window" lets 24 through without a 429, more than twice: not a window of 20.
    const kinds: string[] = [];
    for (let i = 0; i < 100; i += 1, t += 100) kinds.push(recogniser.success(t, t + 50).kind);

    expect(kinds).toContain('forgotten');
    expect(kinds.at(-1)).toBe('unknown');
    expect(recogniser.recognisedLimit).toBeUndefined();
  });
});
