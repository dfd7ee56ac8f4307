import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FixedWindows } from '../../simulator/fixed-window.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { get, jobsPath, rateHeaders, sleep, untilWallClock, V1 } from './helpers.js';

const VERIFY = `${V1}/verify`;

/** Waits, if need be, until the wall clock is in the first half of a second. */
async function untilEarlyInASecond(): Promise<void> {
  if (Date.now() % 1000 >= 500) await untilWallClock(Math.ceil(Date.now() / 1000) * 1000);
}

describe('FixedWindows (wall clock given)', () => {
  it('counts a window from its first request, refuses without counting, and opens the next on expiry', () => {
    const windows = new FixedWindows({ windowRequests: 2, windowMs: 1000 });
    const at = (ms: number, key = 'k') => windows.take(key, ms);
    expect(at(5_300)).toEqual({ ok: true, windowStarted: true, headers: {} });
    expect(at(5_900)).toEqual({ ok: true, windowStarted: false, headers: {} });
    expect(at(6_000)).toEqual({ ok: false, retryAfterSeconds: 1, headers: {} });
    expect(at(6_299)).toEqual({ ok: false, retryAfterSeconds: 1, headers: {} });
    expect(at(6_000, 'other')).toEqual({ ok: true, windowStarted: true, headers: {} });
    expect(at(6_300)).toEqual({ ok: true, windowStarted: true, headers: {} });
    expect(at(6_300).ok).toBe(true);
    expect(at(6_301).ok).toBe(false);
  });

  it('does not let refused requests extend the window', () => {
    const windows = new FixedWindows({ windowRequests: 1, windowMs: 10_000 });
    expect(windows.take('k', 0).ok).toBe(true);
    expect(windows.take('k', 1_000)).toMatchObject({ ok: false, retryAfterSeconds: 9 });
    expect(windows.take('k', 8_500)).toMatchObject({ ok: false, retryAfterSeconds: 2 });
    expect(windows.take('k', 10_000)).toMatchObject({ ok: true, windowStarted: true });
  });

  it('laravel: ends the window on a whole second; Limit and Remaining when admitted, Reset on a 429', () => {
    const windows = new FixedWindows({ windowRequests: 3, windowMs: 2000, headers: 'laravel' });
    const admitted = (remaining: number) => ({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': `${remaining}`,
    });
    const refused = { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '12' };
    expect(windows.take('k', 10_500)).toEqual({ ok: true, windowStarted: true, headers: admitted(2) });
    expect(windows.take('k', 10_600)).toEqual({ ok: true, windowStarted: false, headers: admitted(1) });
    expect(windows.take('k', 10_700)).toEqual({ ok: true, windowStarted: false, headers: admitted(0) });
    expect(windows.take('k', 10_900)).toEqual({ ok: false, retryAfterSeconds: 2, headers: refused });
    expect(windows.take('k', 11_999)).toEqual({ ok: false, retryAfterSeconds: 1, headers: refused });
    expect(windows.take('k', 12_000)).toEqual({ ok: true, windowStarted: true, headers: admitted(2) });
  });

  it('laravel on Redis (turn exact): the window ends windowMs after its first request, past the whole-second reset named', () => {
    const windows = new FixedWindows({
      windowRequests: 2,
      windowMs: 2000,
      headers: 'laravel',
      turn: 'exact',
    });
    const refused = { 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '12' };
    expect(windows.take('k', 10_700).ok).toBe(true);
    expect(windows.take('k', 10_800).ok).toBe(true);
    expect(windows.take('k', 10_900)).toEqual({ ok: false, retryAfterSeconds: 2, headers: refused });
    // The named reset has come, the window runs on: Retry-After 0, the same reset.
    expect(windows.take('k', 12_000)).toEqual({ ok: false, retryAfterSeconds: 0, headers: refused });
    expect(windows.take('k', 12_699)).toEqual({ ok: false, retryAfterSeconds: 0, headers: refused });
    expect(windows.take('k', 12_700)).toMatchObject({ ok: true, windowStarted: true });
    expect(
      () => new FixedWindows({ windowRequests: 2, windowMs: 2000, headers: 'github', turn: 'exact' }),
    ).toThrow(/only with laravel/);
  });

  it('laravel headers, turn ceil: the window ends windowMs after its first request, the reset named rounded up', () => {
    const windows = new FixedWindows({ windowRequests: 2, windowMs: 2000, headers: 'laravel', turn: 'ceil' });
    const refused = { 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '13' };
    expect(windows.take('k', 10_300).ok).toBe(true);
    expect(windows.take('k', 10_400).ok).toBe(true);
    // The turn is at 12.3 s: the reset named is the next whole second, Retry-After the seconds left rounded up.
    expect(windows.take('k', 10_500)).toEqual({ ok: false, retryAfterSeconds: 2, headers: refused });
    expect(windows.take('k', 12_299)).toEqual({ ok: false, retryAfterSeconds: 1, headers: refused });
    expect(windows.take('k', 12_300)).toMatchObject({ ok: true, windowStarted: true });
  });

  it('github: Limit, Remaining, Used and Reset (rounded up) on every answer', () => {
    const windows = new FixedWindows({ windowRequests: 2, windowMs: 1500, headers: 'github' });
    const headers = (remaining: number, used: number, reset: number) => ({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': `${remaining}`,
      'x-ratelimit-used': `${used}`,
      'x-ratelimit-reset': `${reset}`,
    });
    expect(windows.take('k', 10_200)).toEqual({ ok: true, windowStarted: true, headers: headers(1, 1, 12) });
    expect(windows.take('k', 10_300)).toEqual({ ok: true, windowStarted: false, headers: headers(0, 2, 12) });
    expect(windows.take('k', 10_400)).toEqual({
      ok: false,
      retryAfterSeconds: 2,
      headers: headers(0, 2, 12),
    });
    expect(windows.take('k', 11_000)).toEqual({
      ok: false,
      retryAfterSeconds: 1,
      headers: headers(0, 2, 12),
    });
    expect(windows.take('k', 11_700)).toEqual({ ok: true, windowStarted: true, headers: headers(1, 1, 14) });
  });

  it('ietf: RateLimit-Policy with q and w, RateLimit with r and t', () => {
    const windows = new FixedWindows({ windowRequests: 2, windowMs: 1500, headers: 'ietf' });
    const headers = (r: number, t: number) => ({
      'ratelimit-policy': '"default";q=2;w=2',
      ratelimit: `"default";r=${r};t=${t}`,
    });
    expect(windows.take('k', 1_000)).toEqual({ ok: true, windowStarted: true, headers: headers(1, 2) });
    expect(windows.take('k', 2_000)).toEqual({ ok: true, windowStarted: false, headers: headers(0, 1) });
    expect(windows.take('k', 2_100)).toEqual({ ok: false, retryAfterSeconds: 1, headers: headers(0, 1) });
    expect(windows.take('k', 2_500)).toEqual({ ok: true, windowStarted: true, headers: headers(1, 2) });
  });

  it('rejects a window that could never admit a request, an unknown style, and laravel windows off whole seconds', () => {
    expect(() => new FixedWindows({ windowRequests: 0, windowMs: 1000 })).toThrow(/windowRequests/);
    expect(() => new FixedWindows({ windowRequests: 1.5, windowMs: 1000 })).toThrow(/windowRequests/);
    expect(() => new FixedWindows({ windowRequests: 1, windowMs: 0 })).toThrow(/windowMs > 0/);
    expect(() => new FixedWindows({ windowRequests: 1, windowMs: Number.NaN })).toThrow(/windowMs > 0/);
    const style = 'nginx' as 'none';
    expect(() => new FixedWindows({ windowRequests: 1, windowMs: 1000, headers: style })).toThrow(
      'simulator: rate limit headers must be one of none, laravel, github, ietf, got "nginx"',
    );
    expect(() => new FixedWindows({ windowRequests: 1, windowMs: 1500, headers: 'laravel' })).toThrow(
      'simulator: rate limit with laravel headers needs windowMs in whole seconds (a multiple of 1000), got 1500',
    );
    expect(() => new FixedWindows({ windowRequests: 1, windowMs: 1500, headers: 'github' })).not.toThrow();
  });
});

describe('simulator fixed-window rate limit over HTTP', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({
      seed: 33,
      campaigns: 1,
      jobsPerCampaign: 1,
      rateLimit: { windowRequests: 1, windowMs: 1000, headers: 'laravel' },
    });
  });
  afterAll(() => sim.close());
  beforeEach(() => sim.resetStats());

  it('validates the window at start and in setRateLimit, keeping the previous limit', async () => {
    await expect(
      startSimulator({ rateLimit: { windowRequests: 1, windowMs: 2500, headers: 'laravel' } }),
    ).rejects.toThrow(/multiple of 1000/);
    sim.setRateLimit({ windowRequests: 1, windowMs: 60_000 });
    expect(() => sim.setRateLimit({ windowRequests: 0, windowMs: 1000 })).toThrow(/windowRequests/);
    expect((await get(sim, VERIFY)).status).toBe(200);
    expect((await get(sim, VERIFY)).status).toBe(429);
  });

  it('none: counts the window from its first request; 429s carry only Retry-After and are not counted', async () => {
    sim.setRateLimit({ windowRequests: 3, windowMs: 1000 });
    await sleep(300); // a window counted from setRateLimit would end 700 ms after the first request
    const sent = performance.now();
    const replies = [];
    for (let i = 0; i < 5; i++) replies.push(await get(sim, VERIFY));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(rateHeaders(replies[0]!)).toEqual({});
    expect(rateHeaders(replies[3]!)).toEqual({ 'retry-after': '1' });
    expect(replies[3]!.json).toEqual({ error_code: 'RATE_LIMIT_EXCEEDED', message: 'Too many requests.' });
    expect(sim.stats.windowStarts).toHaveLength(1);
    const started = sim.stats.windowStarts[0]!;
    expect(started).toBeGreaterThanOrEqual(sent);

    await sleep(started + 800 - performance.now());
    expect((await get(sim, VERIFY)).status).toBe(429);
    await sleep(started + 1_020 - performance.now());
    const next = [];
    for (let i = 0; i < 4; i++) next.push((await get(sim, VERIFY)).status);
    expect(next).toEqual([200, 200, 200, 429]);
    expect(sim.stats.windowStarts).toHaveLength(2);
    expect(sim.stats.windowStarts[1]! - started).toBeGreaterThanOrEqual(1_000);
    expect(sim.stats.byStatus).toEqual({ '200': 6, '429': 4 });
    sim.resetStats();
    expect(sim.stats.windowStarts).toEqual([]);
  });

  it('keeps one window per key', async () => {
    sim.setRateLimit({ windowRequests: 1, windowMs: 60_000 });
    expect((await get(sim, VERIFY)).status).toBe(200);
    expect((await get(sim, VERIFY)).status).toBe(429);
    expect((await get(sim, VERIFY, { key: sim.keys.other_company })).status).toBe(200);
    expect(sim.stats.windowStarts).toHaveLength(2);
  });

  it('laravel: Limit and Remaining on admitted answers (404 too); a 429 adds Retry-After and the real Reset', async () => {
    sim.setRateLimit({ windowRequests: 3, windowMs: 2000, headers: 'laravel' });
    await untilEarlyInASecond(); // so that the whole burst falls in the second it started in
    const second = Math.floor(Date.now() / 1000);
    const ok = await get(sim, VERIFY);
    const notFound = await get(sim, jobsPath(999_999));
    const last = await get(sim, VERIFY);
    const limited = await get(sim, VERIFY);
    const admitted = (remaining: number) => ({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': `${remaining}`,
    });
    expect([ok.status, notFound.status, last.status, limited.status]).toEqual([200, 404, 200, 429]);
    expect([rateHeaders(ok), rateHeaders(notFound), rateHeaders(last)]).toEqual([
      admitted(2),
      admitted(1),
      admitted(0),
    ]);
    const reset = second + 2;
    expect(rateHeaders(limited)).toEqual({
      'retry-after': '2',
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(reset),
    });

    await untilWallClock(reset * 1000 - 150);
    const before = await get(sim, VERIFY);
    expect([before.status, before.headers.get('retry-after')]).toEqual([429, '1']);
    await untilWallClock(reset * 1000);
    const after = await get(sim, VERIFY);
    expect([after.status, rateHeaders(after)]).toEqual([200, admitted(2)]);
  });

  it('github: Limit, Remaining, Used and Reset on every answer; refused requests leave Used alone', async () => {
    sim.setRateLimit({ windowRequests: 2, windowMs: 1500, headers: 'github' });
    const sent = Date.now();
    const first = await get(sim, VERIFY);
    const received = Date.now();
    const reset = Number(first.headers.get('x-ratelimit-reset'));
    expect(reset).toBeGreaterThanOrEqual(Math.ceil((sent + 1500) / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil((received + 1500) / 1000));
    const replies = [first];
    for (let i = 0; i < 3; i++) replies.push(await get(sim, VERIFY));
    const headers = (remaining: number, used: number) => ({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': `${remaining}`,
      'x-ratelimit-used': `${used}`,
      'x-ratelimit-reset': String(reset),
    });
    expect(replies.map((r) => [r.status, rateHeaders(r)])).toEqual([
      [200, headers(1, 1)],
      [200, headers(0, 2)],
      [429, { ...headers(0, 2), 'retry-after': '2' }],
      [429, { ...headers(0, 2), 'retry-after': '2' }],
    ]);

    await untilWallClock(reset * 1000);
    const next = await get(sim, VERIFY);
    expect(next.status).toBe(200);
    expect(rateHeaders(next)).toMatchObject({ 'x-ratelimit-remaining': '1', 'x-ratelimit-used': '1' });
    expect(Number(next.headers.get('x-ratelimit-reset'))).toBeGreaterThan(reset);
  });

  it('ietf: RateLimit-Policy and RateLimit with r and t on every answer; waiting t seconds is enough', async () => {
    sim.setRateLimit({ windowRequests: 2, windowMs: 1500, headers: 'ietf' });
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await get(sim, VERIFY));
    const policy = '"default";q=2;w=2';
    expect(replies.map((r) => [r.status, rateHeaders(r)])).toEqual([
      [200, { 'ratelimit-policy': policy, ratelimit: '"default";r=1;t=2' }],
      [200, { 'ratelimit-policy': policy, ratelimit: '"default";r=0;t=2' }],
      [429, { 'ratelimit-policy': policy, ratelimit: '"default";r=0;t=2', 'retry-after': '2' }],
    ]);
    await sleep(2_000);
    const next = await get(sim, VERIFY);
    expect([next.status, next.headers.get('ratelimit')]).toEqual([200, '"default";r=1;t=2']);
  });

  it('answers a scripted 429 as before: Retry-After 1 only, not counted by the window', async () => {
    sim.setRateLimit({ windowRequests: 1, windowMs: 60_000, headers: 'github' });
    sim.failNext(/verify/, '429');
    const scripted = await get(sim, VERIFY);
    expect([scripted.status, rateHeaders(scripted)]).toEqual([429, { 'retry-after': '1' }]);
    const admitted = await get(sim, VERIFY);
    expect([admitted.status, admitted.headers.get('x-ratelimit-used')]).toEqual([200, '1']);
  });
});
