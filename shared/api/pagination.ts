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
 * Where a listing stands after a page: what a listing resumed in another process needs, with
 * its {@link ListingMemory}, to go on by the same rules as one that never stopped.
 */
export interface ListingCursor {
  /** The page to read next. */
  nextPage: number;
  /** `meta.total` of page 1: how far the list may grow while it is read. */
  firstTotal: number;
  /** Pages in a row, up to this one, that brought no item not seen before. */
  stalePages: number;
}

/**
 * What a listing remembers of the items it read, to tell a repeat from a new item: the digest
 * of each valid item's first copy by id, and the digests of the invalid items. About 40 bytes
 * an item: a listing of 100,000 jobs holds 4 MB.
 */
export interface ListingMemory {
  firstCopy: Map<number, string>;
  invalidSeen: Set<string>;
}

/** An empty memory: a listing from page 1. */
export const emptyListingMemory = (): ListingMemory => ({ firstCopy: new Map(), invalidSeen: new Set() });

/** One page of a listing, with what a resumed listing needs to go on after it. */
export interface ListedPage<T> {
  page: number;
  items: ListedItem<T>[];
  /** The last page: the listing is complete. */
  last: boolean;
  /** Where the listing stands after this page. */
  cursor: ListingCursor;
  /** What the listing learned from this page (added to its memory): to checkpoint with the cursor. */
  learned: { firstCopies: Array<[id: number, digest: string]>; invalidDigests: string[] };
}

/** Where a resumed listing starts: a cursor and the memory of the pages before it. */
export interface ListingStart {
  cursor: ListingCursor;
  memory: ListingMemory;
}

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
  for await (const page of listPages(endpoint, readPage, schema)) yield* page.items;
}

/**
 * The pages of `endpoint`, as {@link paginate} reads them, one at a time: from page 1, or from
 * `start` (a cursor and memory saved from an earlier listing). A resumed listing follows the
 * same rules as one that never stopped: an item seen before the cursor is a repeat, and the
 * list may grow only as far as its first page allows.
 *
 * `start.memory` is taken over and added to: the caller passes a memory it no longer uses.
 */
export async function* listPages<T extends { id: number }>(
  endpoint: string,
  readPage: (page: number) => Promise<ListEnvelope>,
  schema: ItemSchema<T>,
  start?: ListingStart,
): AsyncGenerator<ListedPage<T>> {
  const { firstCopy, invalidSeen } = start?.memory ?? emptyListingMemory();
  let firstTotal: number | undefined = start?.cursor.firstTotal;
  let stalePages = start?.cursor.stalePages ?? 0;
  const refuseAt = (page: number, what: string) =>
    new ListingError(`GET ${endpoint} page ${page}: ${what}`, { status: 200, path: endpoint });
  const staleProblem = (page: number) =>
    refuseAt(page, `${stalePages} pages in a row brought no item not seen before: the pages do not advance`);
  // A listing saved after its stale page and before it read on stops where it would have stopped.
  if (start && stalePages > STALE_PAGES_TOLERATED) throw staleProblem(start.cursor.nextPage - 1);
  for (let page = start?.cursor.nextPage ?? 1; ; page += 1) {
    const { data, meta } = await readPage(page);
    const refuse = (what: string) => refuseAt(page, what);
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
    const items: ListedItem<T>[] = [];
    const learned: ListedPage<T>['learned'] = { firstCopies: [], invalidDigests: [] };
    for (const raw of data) {
      const listed = classifyItem(raw, schema, firstCopy, invalidSeen, learned);
      if (listed.kind !== 'repeat') fresh++;
      items.push(listed);
    }
    stalePages = data.length > 0 && fresh === 0 ? stalePages + 1 : 0;
    const last = page >= meta.last_page;
    // The page's items first (each is accounted for, repeats too), then the refusal.
    yield { page, items, last, cursor: { nextPage: page + 1, firstTotal, stalePages }, learned };
    if (stalePages > STALE_PAGES_TOLERATED) throw staleProblem(page);
    if (last) return;
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
  learned: ListedPage<T>['learned'],
): ListedItem<T> {
  const tooDeep = depthIssue(raw);
  // Too deep to serialise: nothing to compare it with, so it is never taken for a repeat.
  if (tooDeep) return { kind: 'invalid', raw, issues: [tooDeep] };
  const digest = digestOf(raw);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    if (invalidSeen.has(digest)) return { kind: 'repeat', id: undefined, raw, changed: false };
    invalidSeen.add(digest);
    learned.invalidDigests.push(digest);
    return { kind: 'invalid', raw, issues: issuesOf(parsed.error) };
  }
  const { id } = parsed.data;
  const first = firstCopy.get(id);
  if (first !== undefined) return { kind: 'repeat', id, raw, changed: first !== digest };
  firstCopy.set(id, digest);
  learned.firstCopies.push([id, digest]);
  return { kind: 'item', item: parsed.data, raw };
}

/** A short digest of an item's JSON: remembering every item of a long list whole would cost its size again. */
function digestOf(raw: unknown): string {
  return createHash('sha1')
    .update(JSON.stringify(raw) ?? 'undefined')
    .digest('base64');
}
