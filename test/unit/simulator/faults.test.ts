import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { get, jobsPath, V1 } from './helpers.js';

const VERIFY = `${V1}/verify`;

describe('simulator scripted faults (failNext)', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 41, campaigns: 1, jobsPerCampaign: 30 });
  });
  afterAll(() => sim.close());
  afterEach(() => {
    sim.setFaults({});
    sim.resetStats();
  });

  it.each(['500', '502', '503'] as const)('answers %s with an HTML body, then recovers', async (kind) => {
    sim.failNext(/\/verify$/, kind);
    const failed = await get(sim, VERIFY);
    const next = await get(sim, VERIFY);
    expect(failed.status).toBe(Number(kind));
    expect(failed.headers.get('content-type')).toContain('text/html');
    expect(failed.text).toMatch(/^<!DOCTYPE html>\n<html>/);
    expect(failed.json).toBeUndefined();
    expect(next.status).toBe(200);
  });

  it('resets the connection without an answer', async () => {
    sim.failNext(/verify/, 'reset');
    await expect(get(sim, VERIFY)).rejects.toThrow();
    expect(sim.stats.byStatus).toEqual({ reset: 1 });
    expect((await get(sim, VERIFY)).status).toBe(200);
  });

  it('truncates: a 200 whose Content-Length is never delivered, the connection cut', async () => {
    sim.failNext(/verify/, 'truncate');
    const response = await fetch(`${sim.url}${VERIFY}`, {
      headers: { authorization: `Bearer ${sim.keys.valid}` },
    });
    expect(response.status).toBe(200);
    expect(Number(response.headers.get('content-length'))).toBeGreaterThan(10);
    await expect(response.text()).rejects.toThrow();
    expect(sim.stats.byStatus).toEqual({ truncated: 1 });
  });

  it('delays a slow answer past a client timeout, and still answers a patient client', async () => {
    sim.setFaults({ slowMs: 10_000 });
    sim.failNext(/verify/, 'slow');
    await expect(get(sim, VERIFY, { signal: AbortSignal.timeout(100) })).rejects.toThrow();
    sim.setFaults({ slowMs: 20 });
    sim.failNext(/verify/, 'slow');
    expect((await get(sim, VERIFY)).status).toBe(200);
  });

  it('answers invalid_json with a 200 JSON content type whose body does not parse', async () => {
    sim.failNext(/verify/, 'invalid_json');
    const reply = await get(sim, VERIFY);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('application/json');
    expect(() => JSON.parse(reply.text)).toThrow();
  });

  it('answers not_json_html with a 200 HTML page', async () => {
    sim.failNext(/verify/, 'not_json_html');
    const reply = await get(sim, VERIFY);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('text/html');
    expect(reply.json).toBeUndefined();
  });

  it('answers a scripted 429 with Retry-After and a scripted 422 with errors', async () => {
    sim.failNext(/campaigns/, '429');
    sim.failNext(/campaigns/, '422');
    const limited = await get(sim, `${V1}/campaigns`);
    const invalid = await get(sim, `${V1}/campaigns`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.json).toEqual({ error_code: 'RATE_LIMIT_EXCEEDED', message: 'Too many requests.' });
    expect(invalid.status).toBe(422);
    expect(invalid.json).toMatchObject({
      error_code: 'VALIDATION_FAILED',
      errors: { per_page: [expect.any(String)] },
    });
  });

  it('matches the path and query, and applies a script `times` times', async () => {
    const campaign = sim.dataset.campaigns[0]!;
    sim.failNext(/page=2/, '503', 2);
    const statuses = [];
    for (const page of [1, 2, 2, 2, 1])
      statuses.push((await get(sim, jobsPath(campaign.id, `?page=${page}`))).status);
    expect(statuses).toEqual([200, 503, 503, 200, 200]);
  });

  it('checks auth before a scripted fault, which stays armed', async () => {
    sim.failNext(/verify/, '500');
    expect((await get(sim, VERIFY, { key: null })).status).toBe(401);
    expect((await get(sim, VERIFY)).status).toBe(500);
  });
});

describe('simulator random faults', () => {
  async function statuses(seed: number, faults: Parameters<Simulator['setFaults']>[0], count: number) {
    const sim = await startSimulator({ seed, campaigns: 1, jobsPerCampaign: 1, faults });
    try {
      const out: string[] = [];
      for (let i = 0; i < count; i++) {
        out.push(
          await get(sim, VERIFY).then(
            (r) => String(r.status),
            () => 'error',
          ),
        );
      }
      return { out, byStatus: { ...sim.stats.byStatus } };
    } finally {
      await sim.close();
    }
  }

  it('answers every request with a 5xx HTML page at serverError 1', async () => {
    const { out } = await statuses(1, { serverError: 1 }, 12);
    expect(new Set(out)).toEqual(new Set(['500', '502', '503']));
  });

  it('resets every request at reset 1 and truncates every one at truncate 1', async () => {
    expect((await statuses(2, { reset: 1 }, 4)).byStatus).toEqual({ reset: 4 });
    expect((await statuses(3, { truncate: 1 }, 4)).byStatus).toEqual({ truncated: 4 });
  });

  it('draws the same faults for the same seed, at roughly the asked share', async () => {
    const faults = { serverError: 0.2, reset: 0.1 };
    const first = await statuses(7, faults, 100);
    const second = await statuses(7, faults, 100);
    expect(first.out).toEqual(second.out);
    const failed = first.out.filter((s) => s !== '200').length;
    expect(failed).toBeGreaterThan(15);
    expect(failed).toBeLessThan(50);
    expect(first.byStatus.reset).toBeGreaterThan(0);
  });

  it('rejects a probability outside [0,1]', async () => {
    await expect(startSimulator({ faults: { reset: 2 } })).rejects.toThrow(/reset/);
  });
});
