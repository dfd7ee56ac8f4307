/**
 * What the client hands back for data it could read: a list item (valid or not, always with
 * the raw JSON) and the outcome of one Get Report call. Also turns zod errors into the
 * flat `ValidationIssue` list that quarantine files and logs carry.
 */
import type { z } from 'zod';
import type { ApiError } from '../errors.js';
import type { NotReadyReason, Report } from './schemas.js';

/** One reason a value failed its schema. */
export interface ValidationIssue {
  /** Where, e.g. `data.sections[3].questions[0].response` (relative to the validated value). */
  path: string;
  message: string;
  /** zod's issue code, e.g. `invalid_type`. */
  code: string;
}

/**
 * A list item as listed, never dropped; `raw` is the item exactly as JSON.parse gave it.
 * `item`: valid. `invalid`: failed its schema. `repeat`: listed again on a later page (the
 * list shifted while it was read); `changed` when its content differs from the first copy,
 * which is the one used; `id` is absent for a repeated invalid item.
 */
export type ListedItem<T> =
  | { kind: 'item'; item: T; raw: unknown }
  | { kind: 'invalid'; raw: unknown; issues: ValidationIssue[] }
  | { kind: 'repeat'; id: number | undefined; raw: unknown; changed: boolean };

/**
 * The outcome of one Get Report call; only fatal errors (401, 403 IP/domain, 422) are thrown
 * instead. A 200 is `ok` or `invalid` under the `freeze` schema contract, `unchecked` or
 * `invalid` (no JSON object in `data`) under `evolve`.
 */
export type ReportOutcome =
  /** `raw` = the response's `data` exactly as JSON.parse gave it (lossless). */
  | { kind: 'ok'; report: Report; raw: unknown }
  /**
   * `evolve`: a 200 whose `data` is an object, not checked against the spec (the row builder
   * reads it, and counts how it differs); `raw` as for `ok`.
   */
  | { kind: 'unchecked'; raw: Record<string, unknown> }
  /** 409; `try_later` only after the retries ran out. */
  | { kind: 'not_ready'; reason: NotReadyReason; message: string }
  | { kind: 'not_found'; message: string }
  /** A 200 whose body fails ReportResponseSchema; `body` is the raw text. */
  | { kind: 'invalid'; issues: ValidationIssue[]; body: string }
  /**
   * 403 FORBIDDEN on this report or a body over the size limit (not retryable), or transient
   * failures after the retry budget.
   */
  | { kind: 'failed'; error: ApiError; retryable: boolean };

/** `['data', 'sections', 3, 'id']` → `data.sections[3].id`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

/**
 * The issues of a failed parse, flat. A union that matched no variant is reported through the
 * variant that came closest (fewest issues, ignoring variants that fail on the value's type
 * itself, such as `null`), so the path points at the field that broke rather than the item.
 */
export function issuesOf(error: z.ZodError): ValidationIssue[] {
  return flatten(error.issues, []);
}

type RawIssue = z.core.$ZodIssue;

function flatten(issues: readonly RawIssue[], prefix: readonly PropertyKey[]): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      const closest = closestVariant(issue.errors);
      if (closest !== undefined) {
        out.push(...flatten(closest, path));
        continue;
      }
    }
    out.push({ path: formatPath(path), message: issue.message, code: issue.code });
  }
  return out;
}

function closestVariant(variants: readonly (readonly RawIssue[])[]): readonly RawIssue[] | undefined {
  let best: readonly RawIssue[] | undefined;
  for (const variant of variants) {
    const wrongKind =
      variant.length === 1 && variant[0]?.path.length === 0 && variant[0]?.code === 'invalid_type';
    if (wrongKind || variant.length === 0) continue;
    if (best === undefined || variant.length < best.length) best = variant;
  }
  return best;
}
