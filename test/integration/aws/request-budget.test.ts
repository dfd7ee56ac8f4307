/**
 * The request budget on a local DynamoDB (dynalite over HTTP): the item's conditional writes,
 * containers that together keep to the ceiling, and the fallback when the table fails.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readEnv } from '../../../functions/aws/env.js';
import { containerLimiter, DynamoBudgetStore } from '../../../functions/aws/request-budget.js';
import type { RateLimiter } from '../../../shared/api/limiter.js';
import { FALLBACK_HEADROOM, initialBudget, LEASE_MS } from '../../../shared/api/request-budget.js';
import type { Log } from '../../../shared/log.js';
import { type LocalDynamo, startDynalite } from '../../helpers/dynalite.js';

const TABLE = 'request-budget';

describe('the request budget on DynamoDB', () => {
  let dynamo: LocalDynamo;
  const saved = { ...process.env };

  beforeAll(async () => {
    dynamo = await startDynalite();
    await dynamo.createBudgetTable(TABLE);
    // The store's client is made the SDK's way, from the environment, as in Lambda.
    Object.assign(process.env, {
      AWS_REGION: dynamo.region,
      AWS_ACCESS_KEY_ID: dynamo.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: dynamo.credentials.secretAccessKey,
      AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    });
  });

  afterAll(async () => {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
    await dynamo.close();
  });

  const store = (stage: string) =>
    new DynamoBudgetStore({ tableName: TABLE, stage, client: async () => dynamo.client() });

  it('creates the item once, then writes only over the version it read', async () => {
    const a = store('versions');
    const b = store('versions');
    const first = { ...initialBudget({ ceiling: 20 }), tat: 1_000, version: 1 };

    expect(await a.read()).toBeUndefined();
    expect(await a.write(first, undefined)).toEqual({ ok: true });
    // A second create, and a write over a stale version, lose.
    expect((await b.write({ ...first, tat: 5 }, undefined)).ok).toBe(false);
    expect(await b.write({ ...first, tat: 2_000, version: 2 }, 1)).toEqual({ ok: true });
    expect((await a.write({ ...first, tat: 3_000, version: 2 }, 1)).ok).toBe(false);
    expect(await a.read()).toEqual({ ...first, tat: 2_000, version: 2 });
  });

  const env = (stage: string, table = TABLE, ceiling = 20) =>
    readEnv({
      DATA_BUCKET: 'lake',
      RATE_CEILING: String(ceiling),
      REQUEST_BUDGET_TABLE: table,
      STAGE: stage,
      API_CONTAINERS: '5',
    });

  /** Callers acquiring from `limiter` for `ms`; the grant times. */
  async function drive(limiter: RateLimiter, ms: number, callers = 8): Promise<number[]> {
    const times: number[] = [];
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < end) {
          const release = await limiter.acquire();
          times.push(performance.now());
          limiter.onSuccess();
          release();
        }
      }),
    );
    return times;
  }

  const warnings: { message: string; fields: Record<string, unknown> | undefined }[] = [];
  const log: Log = {
    debug() {},
    info() {},
    warn: (message, fields) => warnings.push({ message, fields }),
    error() {},
  };
  afterEach(() => {
    warnings.length = 0;
  });

  it('keeps three containers together to the ceiling, leasing a few times per second', async () => {
    const limiters = [1, 2, 3].map(() => containerLimiter(env('together'), log));
    const before = dynamo.requests();

    const started = performance.now();
    const times = (await Promise.all(limiters.map((l) => drive(l, 2_000)))).flat();
    const seconds = (performance.now() - started) / 1000;

    // 20 req/s in all (not 60; 18 leased, 2 left to containers that may fall back), plus the
    // 100 ms burst and the slots already leased at the end.
    expect(times.length).toBeLessThanOrEqual(20 * seconds + 2 + 3 * 5);
    expect(times.length).toBeGreaterThanOrEqual(20 * 2 * 0.8);
    expect((dynamo.requests() - before) / seconds).toBeLessThan(30);
    expect(warnings).toEqual([]);
  });

  it('falls back to a share of the ceiling when the table fails, and logs it once', async () => {
    const limiter = containerLimiter(env('missing', 'no-such-table', 50), log);

    const started = performance.now();
    // Two callers: at its share the last one granted comes a couple of seconds after the end.
    const times = await drive(limiter, 1_000, 2);
    const seconds = (performance.now() - started) / 1000;

    expect(times.length).toBeGreaterThan(0);
    // The container's own limiter at its share of the headroom: 50 × 10% ÷ 4 = 1.25 req/s.
    expect(times.length).toBeLessThanOrEqual(1.25 * seconds + 2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('request budget table failed');
    expect(String(warnings[0]?.fields?.error)).toContain('ResourceNotFoundException');
  });

  it('keeps the deployment to the ceiling while some containers fall back and the others lease', async () => {
    const WINDOW_MS = 3_000;
    // Five containers may call the API (API_CONTAINERS); the table fails for three of them only.
    const leasing = [1, 2].map(() => containerLimiter(env('partial'), log));
    const fallingBack = [1, 2, 3].map(() => containerLimiter(env('partial', 'no-such-table'), log));

    const started = performance.now();
    const [leased, fellBack] = await Promise.all([
      Promise.all(leasing.map((l) => drive(l, WINDOW_MS))),
      // One caller each: at a fallback share the callers still waiting at the end come late.
      Promise.all(fallingBack.map((l) => drive(l, WINDOW_MS, 1))),
    ]);
    const inWindow = (times: number[][]) => times.flat().filter((t) => t < started + WINDOW_MS).length;
    const total = inWindow(leased) + inWindow(fellBack);

    // 20 req/s in all over the window (5% tolerance), plus the 100 ms burst and the first request
    // of each container falling back.
    expect(total).toBeLessThanOrEqual(20 * (WINDOW_MS / 1000) * 1.05 + 2 + 3);
    // The leasers use what they do not leave to the others: the headroom is the cost.
    expect(inWindow(leased)).toBeGreaterThanOrEqual(20 * (1 - FALLBACK_HEADROOM) * (WINDOW_MS / 1000) * 0.8);
    expect(warnings).toHaveLength(3);
  });

  it('repairs an item an hour ahead, grants within a lease slice and a second, and logs it once', async () => {
    const now = Date.now();
    await store('repair').write(
      { ...initialBudget({ ceiling: 20 }), tat: now + 3_600_000, grownAt: now, version: 1 },
      undefined,
    );
    const limiter = containerLimiter(env('repair'), log);

    const started = performance.now();
    const times = await drive(limiter, 500, 2);

    expect(times[0]! - started).toBeLessThan(LEASE_MS + 1_000);
    expect((await store('repair').read())?.tat).toBeLessThan(Date.now() + LEASE_MS + 1_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('repaired');
    expect(warnings[0]?.fields).toMatchObject({ fields: ['tat'], found: { tat: now + 3_600_000 } });
  });
});
