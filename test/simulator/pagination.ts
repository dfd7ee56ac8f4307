/**
 * `page` / `per_page` rules of spec 4.5 and the envelope of 2.1. Unknown query parameters
 * (sort key and direction, whose names the spec does not show) are accepted and ignored.
 */
import { type Answer, jsonAnswer, validationAnswer } from './answers.js';

export const PER_PAGE_ALLOWED = [10, 20, 50, 100] as const;
export const DEFAULT_PER_PAGE = 10;

const INTEGER = /^[+-]?\d+$/;

export type Paging = { page: number; perPage: number; answer?: undefined } | { answer: Answer };

/** Reads and validates the paging parameters; a 422 answer names every offending field. */
export function parsePaging(params: URLSearchParams): Paging {
  const errors: Record<string, string[]> = {};
  const rawPage = params.get('page');
  const rawPerPage = params.get('per_page');
  let page = 1;
  let perPage = DEFAULT_PER_PAGE;
  if (rawPage !== null) {
    if (!INTEGER.test(rawPage.trim())) errors.page = ['The page field must be an integer.'];
    else if (Number(rawPage) < 1) errors.page = ['The page field must be at least 1.'];
    else page = Number(rawPage);
  }
  if (rawPerPage !== null) {
    const value = Number(rawPerPage);
    if (!INTEGER.test(rawPerPage.trim())) {
      errors.per_page = ['The per page field must be an integer.', 'The selected per page is invalid.'];
    } else if (!(PER_PAGE_ALLOWED as readonly number[]).includes(value)) {
      errors.per_page = ['The selected per page is invalid.'];
    } else perPage = value;
  }
  return Object.keys(errors).length > 0 ? { answer: validationAnswer(errors) } : { page, perPage };
}

/** One page of `items` in the list envelope; a page past the last is an empty `data`. */
export function pageAnswer<T>(items: readonly T[], page: number, perPage: number): Answer {
  const start = (page - 1) * perPage;
  return jsonAnswer(200, {
    data: start < items.length ? items.slice(start, start + perPage) : [],
    meta: {
      current_page: page,
      per_page: perPage,
      total: items.length,
      last_page: Math.max(1, Math.ceil(items.length / perPage)),
    },
  });
}
