/**
 * Reading every page of a list endpoint (spec 2.1, 4.5): ask page 1, 2, ... until the page
 * number reaches `meta.last_page`, re-read on every page because the list may change while it
 * is read. Items are validated one by one and never dropped; an item seen on an earlier page
 * (the list shifted) comes back as a repeat.
 *
 * The API's `meta` decides how long the listing goes on, so it is checked before it is
 * believed: a listing that cannot end (a `last_page` beyond what `total` allows, a list that
 * grows faster than it is read, pages that bring nothing new) stops with a ListingError.
 */
import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { ListingError } from '../errors.js';
import { depthIssue } from './json-depth.js';
import { issuesOf, type ListedItem } from './outcome.js';
import type { ListEnvelope } from './schemas.js';

/** A zod schema of a list item (kept structural so both item schemas fit). */
export interface ItemSchema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: z.ZodError };
}

/**
 * Pages in a row that bring no item not seen before, tolerated: one is a list that grew by
 * a page at its head while it was read; two are pages that do not advance.
 */
const STALE_PAGES_TOLERATED = 1;

/**
 * Yields the items of every page of `endpoint`; `readPage` returns the validated envelope of
 * one page. Stops after the page whose number is at least its `meta.last_page` (so an empty
 * list and `last_page: 0` end the listing); throws ListingError when the pages contradict
 * themselves, so that no answer can keep the listing going without end.
 */
export async function* paginate<T extends { id: number }>(
  endpoint: string,
  readPage: (page: number) => Promise<ListEnvelope>,
  schema: ItemSchema<T>,
): AsyncGenerator<ListedItem<T>> {
  const firstCopy = new Map<number, string>();
  const invalidSeen = new Set<string>();
  let firstTotal: number | undefined;
  let stalePages = 0;
  for (let page = 1; ; page += 1) {
    const { data, meta } = await readPage(page);
    const refuse = (what: string) =>
      new ListingError(`GET ${endpoint} page ${page}: ${what}`, { status: 200, path: endpoint });
    if (meta.current_page !== page) {
      // A server or proxy that ignores `page` would have us read page 1 without end.
      throw refuse(`asked for page ${page}, the API answered page ${meta.current_page}`);
    }
    const problem = metaProblem(meta, data.length);
    if (problem) throw refuse(problem);
    firstTotal ??= meta.total;
    // Campaigns or jobs created while the list is read are expected, not a list that doubles.
    if (meta.total > 2 * firstTotal + meta.per_page) {
      throw refuse(`the list grew from ${firstTotal} to ${meta.total} items while it was read`);
    }

    let fresh = 0;
    for (const raw of data) {
      const listed = classifyItem(raw, schema, firstCopy, invalidSeen);
      if (listed.kind !== 'repeat') fresh++;
      yield listed;
    }
    stalePages = data.length > 0 && fresh === 0 ? stalePages + 1 : 0;
    if (stalePages > STALE_PAGES_TOLERATED) {
      throw refuse(`${stalePages} pages in a row brought no item not seen before: the pages do not advance`);
    }
    if (page >= meta.last_page) return;
  }
}

/** What makes a page's `meta` unbelievable, or undefined. */
function metaProblem(meta: ListEnvelope['meta'], items: number): string | undefined {
  if (meta.per_page < 1 || meta.total < 0)
    return `meta has per_page ${meta.per_page} and total ${meta.total}`;
  if (items > meta.per_page) return `${items} items on a page of per_page ${meta.per_page}`;
  const pages = Math.ceil(meta.total / meta.per_page);
  // An empty list may say last_page 0 or 1; otherwise total and per_page fix last_page.
  const allowed = pages === 0 ? [0, 1] : [pages];
  if (!allowed.includes(meta.last_page)) {
    return `meta.last_page ${meta.last_page} does not match meta.total ${meta.total} at per_page ${meta.per_page} (${pages} page${pages === 1 ? '' : 's'})`;
  }
  return undefined;
}

/** One item: valid, invalid (its schema, or nested too deep to write), or a repeat of one seen. */
function classifyItem<T extends { id: number }>(
  raw: unknown,
  schema: ItemSchema<T>,
  firstCopy: Map<number, string>,
  invalidSeen: Set<string>,
): ListedItem<T> {
  const tooDeep = depthIssue(raw);
  // Too deep to serialise: nothing to compare it with, so it is never taken for a repeat.
  if (tooDeep) return { kind: 'invalid', raw, issues: [tooDeep] };
  const digest = digestOf(raw);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    if (invalidSeen.has(digest)) return { kind: 'repeat', id: undefined, raw, changed: false };
    invalidSeen.add(digest);
    return { kind: 'invalid', raw, issues: issuesOf(parsed.error) };
  }
  const { id } = parsed.data;
  const first = firstCopy.get(id);
  if (first !== undefined) return { kind: 'repeat', id, raw, changed: first !== digest };
  firstCopy.set(id, digest);
  return { kind: 'item', item: parsed.data, raw };
}

/** A short digest of an item's JSON: remembering every item of a long list whole would cost its size again. */
function digestOf(raw: unknown): string {
  return createHash('sha1')
    .update(JSON.stringify(raw) ?? 'undefined')
    .digest('base64');
}
