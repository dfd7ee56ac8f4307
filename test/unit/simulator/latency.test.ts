import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { Latency } from '../../simulator/latency.js';
import { get, type Reply, rateHeaders, sleep, V1 } from './helpers.js';

const VERIFY = `${V1}/verify`;
/**
 * Timers never fire early; the upper bound leaves room for a busy test machine (535 ms was seen
 * for a 300 ms answer at a load average of 20 on 2 cores), yet stays below twice the latency.
 */
const SLACK_MS = 230;

/** The reply to a GET and how long it took (ms). */
async function timed(sim: Simulator, path: string, key?: string | null): Promise<[Reply, number]> {
  const start = performance.now();
  const reply = await get(sim, path, { key });
  return [reply, performance.now() - start];
}

describe('Latency', () => {
  it('draws delays within ±20% of the latency, the same for the same seed', () => {
    const draws = (seed: number) => {
      const latency = new Latency(seed, 100);
      return Array.from({ length: 50 }, () => latency.draw());
    };
    const delays = draws(5);
    expect(draws(5)).toEqual(delays);
    expect(draws(6)).not.toEqual(delays);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(80);
    expect(Math.max(...delays)).toBeLessThan(120);
    expect(Math.min(...delays)).toBeLessThan(90);
    expect(Math.max(...delays)).toBeGreaterThan(110);
  });

  it('draws within ± the jitter given instead, at most the latency itself', () => {
    const latency = new Latency(3);
    latency.set(250, 100);
    const delays = Array.from({ length: 200 }, () => latency.draw());
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(150);
    expect(Math.max(...delays)).toBeLessThan(350);
    expect(Math.min(...delays)).toBeLessThan(170);
    expect(Math.max(...delays)).toBeGreaterThan(330);
    expect(() => latency.set(50, 60)).toThrow(/at most the latency/);
  });

  it('delays nothing at 0 and rejects a negative latency', () => {
    const latency = new Latency(1);
    expect(latency.draw()).toBe(0);
    latency.set(40);
    expect(latency.draw()).toBeGreaterThanOrEqual(32);
    expect(() => latency.set(-1)).toThrow('simulator: latencyMs must be a number >= 0, got -1');
    expect(() => new Latency(1, Number.NaN)).toThrow(/latencyMs/);
  });
});

describe('simulator latency over HTTP', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 51, campaigns: 1, jobsPerCampaign: 1, latencyMs: 300 });
  });
  afterAll(() => sim.close());
  afterEach(() => {
    sim.setLatency(300);
    sim.setRateLimit(null);
    sim.resetStats();
  });

  it('delays a 200, a 429 and an early 401 by the latency, within the jitter', async () => {
    sim.setRateLimit({ windowRequests: 1, windowMs: 60_000 });
    const [ok, okMs] = await timed(sim, VERIFY);
    const [limited, limitedMs] = await timed(sim, VERIFY);
    const [unauthorized, unauthorizedMs] = await timed(sim, VERIFY, null);
    expect([ok.status, limited.status, unauthorized.status]).toEqual([200, 429, 401]);
    for (const ms of [okMs, limitedMs, unauthorizedMs]) {
      expect(ms).toBeGreaterThanOrEqual(240);
      expect(ms).toBeLessThan(360 + SLACK_MS);
    }
  });

  it('counts a request at arrival, while its answer is still on the way', async () => {
    sim.setRateLimit({ windowRequests: 1, windowMs: 60_000, headers: 'ietf' });
    const sent = performance.now();
    const first = get(sim, VERIFY);
    await sleep(100);
    expect(sim.stats.windowStarts).toHaveLength(1);
    expect(sim.stats.windowStarts[0]! - sent).toBeLessThan(50);
    expect(sim.stats.byStatus).toEqual({});
    const second = get(sim, VERIFY);
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, rateHeaders(a).ratelimit]).toEqual([200, '"default";r=0;t=60']);
    expect([b.status, rateHeaders(b).ratelimit]).toEqual([429, '"default";r=0;t=60']);
  });

  it('adds the delay of a slow fault', async () => {
    sim.setFaults({ slowMs: 200 });
    sim.failNext(/verify/, 'slow');
    const [reply, ms] = await timed(sim, VERIFY);
    sim.setFaults({});
    expect(reply.status).toBe(200);
    expect(ms).toBeGreaterThanOrEqual(440);
    expect(ms).toBeLessThan(560 + SLACK_MS);
  });

  it('changes the latency with setLatency, 0 answering at once', async () => {
    sim.setLatency(0);
    expect((await timed(sim, VERIFY))[1]).toBeLessThan(SLACK_MS);
    sim.setLatency(600);
    const [, ms] = await timed(sim, VERIFY);
    expect(ms).toBeGreaterThanOrEqual(480);
    expect(ms).toBeLessThan(720 + SLACK_MS);
    expect(() => sim.setLatency(-5)).toThrow(/latencyMs/);
  });

  it('closes at once with answers still waiting: they are dropped and their timers cleared', async () => {
    const slow = await startSimulator({ seed: 52, campaigns: 1, jobsPerCampaign: 1, latencyMs: 400 });
    const pending = get(slow, VERIFY).then(
      () => 'answered',
      () => 'dropped',
    );
    while (slow.stats.total === 0) await sleep(5);
    const start = performance.now();
    await slow.close();
    expect(performance.now() - start).toBeLessThan(200);
    expect(await pending).toBe('dropped');
    await sleep(600); // past the answer's time: a timer left behind would count it as aborted
    expect(slow.stats.byStatus).toEqual({});
  });
});
