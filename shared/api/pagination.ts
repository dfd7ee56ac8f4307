/**
 * Reading every page of a list endpoint (spec 2.1, 4.5): ask page 1, 2, ... until the page
 * number reaches `meta.last_page`, re-read on every page because the list may change while it
 * is read. Items are validated one by one and never dropped; an item seen on an earlier page
 * (the list shifted) is yielded once.
 */
import type { z } from 'zod';
import { ApiError } from '../errors.js';
import { issuesOf, type ListedItem } from './outcome.js';
import type { ListEnvelope } from './schemas.js';

/** A zod schema of a list item (kept structural so both item schemas fit). */
export interface ItemSchema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: z.ZodError };
}

/**
 * Yields the items of every page; `readPage` returns the validated envelope of one page.
 * Stops after the page whose number is at least its `meta.last_page` (so an empty list, a
 * page past the end, and `last_page: 0` all end the listing).
 */
export async function* paginate<T extends { id: number }>(
  readPage: (page: number) => Promise<ListEnvelope>,
  schema: ItemSchema<T>,
): AsyncGenerator<ListedItem<T>> {
  const seen = new Set<number>();
  const seenInvalid = new Set<string>();
  for (let page = 1; ; page += 1) {
    const envelope = await readPage(page);
    if (envelope.meta.current_page !== page) {
      // A server or proxy that ignores `page` would have us re-read page 1 and drop it all as seen.
      throw new ApiError(`asked for page ${page}, the API answered page ${envelope.meta.current_page}`, {
        status: 200,
        retryable: false,
      });
    }
    for (const raw of envelope.data) {
      const parsed = schema.safeParse(raw);
      if (!parsed.success) {
        // Yielded once too, like valid items, when the list shifts between pages.
        const text = JSON.stringify(raw);
        if (seenInvalid.has(text)) continue;
        seenInvalid.add(text);
        yield { valid: false, raw, issues: issuesOf(parsed.error) };
        continue;
      }
      if (seen.has(parsed.data.id)) continue;
      seen.add(parsed.data.id);
      yield { valid: true, item: parsed.data, raw };
    }
    if (page >= envelope.meta.last_page) return;
    // An empty page beyond what `total` accounts for: a last_page that runs away would
    // otherwise have us read empty pages without end.
    const { total, per_page: perPage } = envelope.meta;
    if (envelope.data.length === 0 && perPage > 0 && page >= Math.ceil(total / perPage)) return;
  }
}
