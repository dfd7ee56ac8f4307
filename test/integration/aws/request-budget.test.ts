/**
 * The request budget on a local DynamoDB (dynalite over HTTP): the item's conditional writes,
 * containers that together keep to the ceiling, and the fallback when the table fails.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readEnv } from '../../../functions/aws/env.js';
import { containerLimiter, DynamoBudgetStore } from '../../../functions/aws/request-budget.js';
import type { RateLimiter } from '../../../shared/api/limiter.js';
import { initialBudget } from '../../../shared/api/request-budget.js';
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

    // 20 req/s in all (not 60), plus the 100 ms burst and the slots already leased at the end.
    expect(times.length).toBeLessThanOrEqual(20 * seconds + 2 + 3 * 5);
    expect(times.length).toBeGreaterThanOrEqual(20 * 2 * 0.8);
    expect((dynamo.requests() - before) / seconds).toBeLessThan(30);
    expect(warnings).toEqual([]);
  });

  it('falls back to a share of the ceiling when the table fails, and logs it once', async () => {
    const limiter = containerLimiter(env('missing', 'no-such-table', 50), log);

    const started = performance.now();
    const times = await drive(limiter, 1_000);
    const seconds = (performance.now() - started) / 1000;

    expect(times.length).toBeGreaterThan(0);
    // The container's own limiter at 50 / 5 req/s (its first rate, 10, is its ceiling then).
    expect(times.length).toBeLessThanOrEqual(10 * seconds + 2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('request budget table failed');
    expect(String(warnings[0]?.fields?.error)).toContain('ResourceNotFoundException');
  });
});
