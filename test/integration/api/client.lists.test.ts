import { describe, expect, it } from 'vitest';
import { ListingError } from '../../../shared/errors.js';
import { listPage } from '../../unit/api/fixtures.js';
import { API, collect, harness } from './harness.js';
import type { RecordedRequest, Reply } from './server.js';

/** Serves `pages[page - 1]` for ?page=page (an empty page past the end). */
function pages(...bodies: Record<string, unknown>[]) {
  return (req: RecordedRequest): Reply => {
    const page = Number(req.query.get('page'));
    return { body: bodies[page - 1] ?? listPage([], page, bodies.length) };
  };
}

const ids = (n: number, from = 1) =>
  Array.from({ length: n }, (_, i) => ({ id: from + i, campaign_name: `C${from + i}` }));

describe('IntegrationApiClient pagination', () => {
  it('reads every page with per_page=100 until page reaches meta.last_page', async () => {
    const { client, server } = await harness(
      pages(
        listPage(ids(100), 1, 3, 230),
        listPage(ids(100, 101), 2, 3, 230),
        listPage(ids(30, 201), 3, 3, 230),
      ),
    );

    const items = await collect(client.campaigns());

    expect(items).toHaveLength(230);
    expect(items.every((i) => i.kind === 'item')).toBe(true);
    expect(server.requests.map((r) => r.url)).toEqual([
      `${API}/campaigns?page=1&per_page=100`,
      `${API}/campaigns?page=2&per_page=100`,
      `${API}/campaigns?page=3&per_page=100`,
    ]);
  });

  it('reads an empty list with one request', async () => {
    for (const lastPage of [0, 1]) {
      const { client, server } = await harness(() => ({ body: listPage([], 1, lastPage, 0) }));
      await expect(collect(client.campaigns())).resolves.toEqual([]);
      expect(server.requests).toHaveLength(1);
    }
  });

  it('follows meta when the list grows while it is read', async () => {
    const { client, server } = await harness(
      pages(
        listPage(ids(100), 1, 2, 200),
        listPage(ids(100, 101), 2, 3, 201),
        listPage(ids(1, 201), 3, 3, 201),
      ),
    );

    const items = await collect(client.jobs(9));

    expect(items).toHaveLength(201);
    expect(server.requests).toHaveLength(3);
    expect(server.requests[0]?.path).toBe(`${API}/campaigns/9/jobs`);
  });

  it('stops at a page past a shrunk last_page', async () => {
    // Page 2 was announced, but by the time it is read the list shrank to one page.
    const { client, server } = await harness(pages(listPage(ids(100), 1, 2, 150), listPage([], 2, 1, 90)));

    const items = await collect(client.campaigns());

    expect(items).toHaveLength(100);
    expect(server.requests).toHaveLength(2);
  });

  it('yields an item repeated on the next page once, and its second copy as a repeat', async () => {
    // An insertion at the head shifts item 100 from page 1 to page 2.
    const { client } = await harness(
      pages(listPage(ids(100), 1, 2, 200), listPage(ids(100, 100), 2, 2, 200)),
    );

    const items = await collect(client.campaigns());

    const seen = items.flatMap((i) => (i.kind === 'item' ? [i.item.id] : []));
    expect(seen).toHaveLength(199);
    expect(new Set(seen).size).toBe(199);
    expect(items.filter((i) => i.kind === 'repeat')).toEqual([
      { kind: 'repeat', id: 100, raw: { id: 100, campaign_name: 'C100' }, changed: false },
    ]);
  });

  it('yields an item that fails its schema as invalid, with its raw JSON and the issues, and goes on', async () => {
    const bad = { id: 'seven', campaign_name: 'X' };
    const { client } = await harness(() => ({ body: listPage([{ id: 1 }, bad, { id: 3 }], 1, 1) }));

    const items = await collect(client.campaigns());

    expect(items.map((i) => i.kind)).toEqual(['item', 'invalid', 'item']);
    const invalid = items[1];
    expect(invalid).toMatchObject({ kind: 'invalid', raw: bad });
    if (invalid?.kind === 'invalid')
      expect(invalid.issues[0]).toMatchObject({ path: 'id', code: 'invalid_type' });
  });

  it('keeps unknown fields of a list item, in the item and in raw', async () => {
    const item = { id: 5, job_status: 2, published_at: '2026-01-02T03:04:05Z', nested: { a: [1, null] } };
    const { client } = await harness(() => ({ body: listPage([item], 1, 1) }));

    const [listed] = await collect(client.jobs(1));

    expect(listed).toEqual({ kind: 'item', item, raw: item });
  });

  it('refuses a last_page that runs away beyond meta.total on the first page', async () => {
    const { client, server } = await harness((req) => ({
      body: listPage([], Number(req.query.get('page')), 1_000_000, 0),
    }));

    await expect(collect(client.campaigns())).rejects.toThrow(ListingError);
    expect(server.requests).toHaveLength(1);
  });
});

describe('IntegrationApiClient.jobCount', () => {
  it("is a campaign's meta.total from one request at the smallest page", async () => {
    const { client, server } = await harness(() => ({ body: listPage(ids(10), 1, 1235, 12_345) }));
    await expect(client.jobCount(9)).resolves.toBe(12_345);
    expect(server.requests.map((r) => r.url)).toEqual([`${API}/campaigns/9/jobs?page=1&per_page=10`]);
  });
});
