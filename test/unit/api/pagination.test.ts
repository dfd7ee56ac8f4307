import { describe, expect, it } from 'vitest';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import {
  emptyListingMemory,
  type ListingCursor,
  listPages,
  paginate,
} from '../../../shared/api/pagination.js';
import { JobItemSchema, type ListEnvelope } from '../../../shared/api/schemas.js';
import { ConfigError, ListingError } from '../../../shared/errors.js';

const ENDPOINT = '/integration/v1/client/campaigns/7/jobs';

/** A page whose meta agrees with itself unless told otherwise. */
const page = (
  n: number,
  data: unknown[],
  meta: Partial<ListEnvelope['meta']> & { total: number },
): ListEnvelope => ({
  data,
  meta: {
    current_page: n,
    per_page: 100,
    last_page: Math.max(1, Math.ceil(meta.total / (meta.per_page ?? 100))),
    ...meta,
  },
});

const ids = (count: number, from = 1) => Array.from({ length: count }, (_, i) => ({ id: from + i }));

/** Reads every page `pageOf` gives, up to `limit` pages (a guard for the test itself). */
async function collect(pageOf: (n: number) => ListEnvelope, limit = 1_000) {
  const out = [];
  let asked = 0;
  for await (const item of paginate(
    ENDPOINT,
    async (n) => {
      asked++;
      if (asked > limit) throw new Error(`the listing asked for ${asked} pages`);
      return pageOf(n);
    },
    JobItemSchema,
  ))
    out.push(item);
  return { items: out, asked };
}

const listing = (pages: ListEnvelope[]) => collect((n) => pages[n - 1]!);

describe('paginate', () => {
  it('yields an invalid item once, and its copy on the next page as a repeat', async () => {
    const bad = { id: 'x', job_status: 1 };
    const { items: read } = await listing([
      page(1, [{ id: 1 }, bad], { total: 4, per_page: 2 }),
      page(2, [bad, { id: 2 }], { total: 4, per_page: 2 }),
    ]);
    expect(read.map((i) => i.kind)).toEqual(['item', 'invalid', 'repeat', 'item']);
  });

  it('refuses a page whose meta names another page (page ignored by a proxy)', async () => {
    await expect(
      listing([page(1, ids(100), { total: 300 }), page(1, ids(100), { total: 300 })]),
    ).rejects.toThrow(/page 2: asked for page 2, the API answered page 1/);
  });

  it('takes a negative id as an invalid item, not as a job to fetch', async () => {
    const { items } = await listing([page(1, [{ id: -5 }], { total: 1 })]);
    expect(items[0]?.kind).toBe('invalid');
  });

  it('takes an item nested deeper than the lake can hold as invalid, without serialising it', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const { items } = await listing([page(1, [{ id: 1, extra: deep }, { id: 2 }], { total: 2 })]);
    expect(items.map((i) => i.kind)).toEqual(['invalid', 'item']);
    expect(items[0]).toMatchObject({ issues: [{ code: 'too_deep' }] });
  });

  it('counts the same id with other content as a changed repeat, and keeps the first copy', async () => {
    const { items } = await listing([
      page(1, [{ id: 1, job_status: 1 }, { id: 2 }], { total: 4, per_page: 2 }),
      page(2, [{ id: 1, job_status: 2 }, { id: 3 }], { total: 4, per_page: 2 }),
    ]);
    expect(items).toEqual([
      { kind: 'item', item: { id: 1, job_status: 1 }, raw: { id: 1, job_status: 1 } },
      { kind: 'item', item: { id: 2 }, raw: { id: 2 } },
      { kind: 'repeat', id: 1, raw: { id: 1, job_status: 2 }, changed: true },
      { kind: 'item', item: { id: 3 }, raw: { id: 3 } },
    ]);
  });

  it('follows a list that grows while it is read', async () => {
    const { items, asked } = await listing([
      page(1, ids(100), { total: 200 }),
      page(2, ids(100, 101), { total: 250 }),
      page(3, ids(50, 201), { total: 250 }),
    ]);
    expect(items).toHaveLength(250);
    expect(asked).toBe(3);
  });

  it('stops when last_page grows with every page (a list that grows as fast as it is read)', async () => {
    // Every page brings new items and a meta that agrees with itself: only the growth is wrong.
    const growing = collect((n) => page(n, ids(100, 100 * n), { total: 100 * (n + 1) }), 50);
    await expect(growing).rejects.toThrow(ListingError);
    await expect(growing).rejects.toThrow(
      `GET ${ENDPOINT} page 5: the list grew from 200 to 600 items while it was read`,
    );
  });

  it('stops when the pages echo the request but bring the same item every time', async () => {
    const echo = (n: number) => page(n, [{ id: 1 }], { total: 1_000_000, per_page: 1 });
    await expect(collect(echo, 50)).rejects.toThrow(
      /page 3: 2 pages in a row brought no item not seen before: the pages do not advance/,
    );
  });

  it('refuses a last_page that total and per_page do not allow, on the first page', async () => {
    const runaway = (n: number) => page(n, [{ id: n }], { total: 1, last_page: 1_000_000 });
    await expect(collect(runaway, 50)).rejects.toThrow(
      /page 1: meta.last_page 1000000 does not match meta.total 1 at per_page 100 \(1 page\)/,
    );
  });

  it('refuses more items on a page than per_page', async () => {
    await expect(listing([page(1, ids(101), { total: 101, last_page: 2 })])).rejects.toThrow(
      /101 items on a page of per_page 100/,
    );
  });

  it('tolerates one page of nothing new (a page-sized insertion at the head), not two', async () => {
    const { items } = await listing([
      page(1, ids(100), { total: 300 }),
      page(2, ids(100), { total: 300 }),
      page(3, ids(100, 101), { total: 300 }),
    ]);
    expect(items.filter((i) => i.kind === 'item')).toHaveLength(200);
  });

  it('ends on an empty list with last_page 0 or 1', async () => {
    for (const lastPage of [0, 1]) {
      const { items, asked } = await listing([page(1, [], { total: 0, last_page: lastPage })]);
      expect([items.length, asked]).toEqual([0, 1]);
    }
  });
});

/** What a listing yields and how it ends: its items, then its error's message (or none). */
async function outcomeOf(run: (items: unknown[]) => Promise<void>) {
  const items: unknown[] = [];
  try {
    await run(items);
    return { items, error: undefined };
  } catch (error) {
    return { items, error: (error as Error).message };
  }
}

/**
 * The listing stopped after `split` pages, its cursor and what it learned kept, and resumed by a
 * new pager with a memory rebuilt from them (as plan-campaign's pieces do).
 */
const resumedAfter = (pageOf: (n: number) => ListEnvelope, split: number) =>
  outcomeOf(async (items) => {
    const memory = emptyListingMemory();
    let cursor: ListingCursor | undefined;
    let read = 0;
    for await (const p of listPages(ENDPOINT, async (n) => pageOf(n), JobItemSchema)) {
      items.push(...p.items);
      for (const [id, digest] of p.learned.firstCopies) memory.firstCopy.set(id, digest);
      for (const digest of p.learned.invalidDigests) memory.invalidSeen.add(digest);
      cursor = p.cursor;
      if (p.last) return;
      if (++read === split) break;
    }
    for await (const p of listPages(ENDPOINT, async (n) => pageOf(n), JobItemSchema, {
      cursor: cursor!,
      memory,
    }))
      items.push(...p.items);
  });

describe('listPages resumed from a saved cursor and memory', () => {
  const lists: Record<string, (n: number) => ListEnvelope> = {
    'a changed repeat and an invalid item listed twice': (n) =>
      [
        page(1, [{ id: 1 }, { id: 'x' }], { total: 6, per_page: 2 }),
        page(2, [{ id: 1, job_status: 2 }, { id: 'x' }], { total: 6, per_page: 2 }),
        page(3, [{ id: 2 }, { id: 3 }], { total: 6, per_page: 2 }),
      ][n - 1]!,
    'pages that echo the request': (n) => page(n, [{ id: 1 }], { total: 1_000_000, per_page: 1 }),
    'a list that grows as fast as it is read': (n) =>
      page(n, ids(100, n * 100), { total: 100 * (n + 1), last_page: n + 1 }),
    'a page-sized insertion at the head': (n) =>
      [
        page(1, ids(100), { total: 300 }),
        page(2, ids(100), { total: 300 }),
        page(3, ids(100, 101), { total: 300 }),
      ][n - 1]!,
  };

  for (const [name, pageOf] of Object.entries(lists)) {
    it(`yields and refuses what one listing does, wherever it stopped: ${name}`, async () => {
      const whole = await outcomeOf(async (items) => {
        for await (const item of paginate(ENDPOINT, async (n) => pageOf(n), JobItemSchema)) items.push(item);
      });
      expect(whole.items.length).toBeGreaterThan(0);

      for (const split of [1, 2, 3, 4]) expect(await resumedAfter(pageOf, split)).toEqual(whole);
    });
  }
});

describe('AdaptiveRateLimiter options', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses a maxRate of %s', (maxRate) => {
    expect(() => new AdaptiveRateLimiter({ maxRate })).toThrow(ConfigError);
  });
});
