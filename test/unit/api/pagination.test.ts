import { describe, expect, it } from 'vitest';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { paginate } from '../../../shared/api/pagination.js';
import { JobItemSchema, type ListEnvelope } from '../../../shared/api/schemas.js';
import { ApiError, ConfigError } from '../../../shared/errors.js';

const page = (n: number, last: number, data: unknown[], current = n): ListEnvelope => ({
  data,
  meta: { current_page: current, per_page: 100, total: 300, last_page: last },
});

async function collect(pages: ListEnvelope[]) {
  const out = [];
  for await (const item of paginate(async (n) => pages[n - 1]!, JobItemSchema)) out.push(item);
  return out;
}

describe('paginate', () => {
  it('yields an invalid item once when the list shifts it onto the next page', async () => {
    const bad = { id: 'x', job_status: 1 };
    const items = await collect([page(1, 2, [{ id: 1 }, bad]), page(2, 2, [bad, { id: 2 }])]);
    expect(items.map((i) => i.valid)).toEqual([true, false, true]);
  });

  it('refuses a page whose meta names another page (page ignored by a proxy)', async () => {
    await expect(collect([page(1, 3, [{ id: 1 }]), page(2, 3, [{ id: 1 }], 1)])).rejects.toThrow(ApiError);
  });

  it('takes a negative id as an invalid item, not as a job to fetch', async () => {
    const [item] = await collect([page(1, 1, [{ id: -5 }])]);
    expect(item?.valid).toBe(false);
  });
});

describe('AdaptiveRateLimiter options', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses a maxRate of %s', (maxRate) => {
    expect(() => new AdaptiveRateLimiter({ maxRate })).toThrow(ConfigError);
  });
});
