/**
 * How long a Lambda invocation may run, and the longest single steps that bound rests on. Issue
 * 31's target: no invocation over half its timeout, what is left going to the next one (a new
 * plan or report message, the next finish-run look). The other half absorbs
 * what the estimates below do not know (a slower CPU, a slower API), so that a step late by that
 * much still ends before its timeout and keeps what it did.
 *
 * Each step stops *starting* work at a point computed from its timeout: the point plus the
 * longest its work in flight and its wrap-up can take is at most {@link MAX_TIMEOUT_SHARE} of
 * the timeout. Every step still does one piece of work at least (a page, an output), so that
 * handing on can never go round without end; with a timeout shorter than twice that piece, the
 * share can then be passed, which the settings' documentation says.
 */
import { DEFAULT_TIMEOUT_MS } from '../../api/client.js';

/** The share of its timeout an invocation may use at most (issue 31). */
export const MAX_TIMEOUT_SHARE = 0.5;

/**
 * The Lambdas' retry policy for API requests (functions/aws/runtime.ts): a Lambda does not sleep
 * through long waits (a longer Retry-After hands the message back instead), and gives up
 * retrying a request after 30 s.
 */
export const LAMBDA_API_RETRY = { maxRetryAfterMs: 5_000, maxElapsedMs: 30_000 } as const;

/**
 * The longest one API request may take in a Lambda, retries included: its last attempt starts
 * at most `maxElapsedMs` after the first, waits in the limiter at most `maxRetryAfterMs`, and
 * is cut at the request timeout.
 */
export const REQUEST_WORST_MS =
  LAMBDA_API_RETRY.maxElapsedMs + LAMBDA_API_RETRY.maxRetryAfterMs + DEFAULT_TIMEOUT_MS;

/**
 * When, in ms after an invocation of `timeoutMs` starts, it must stop starting work whose
 * longest in flight, with the wrap-up after it, is `worstMs`: what keeps it within
 * {@link MAX_TIMEOUT_SHARE}. Zero when even that is too long: the step then does its one piece
 * of work and hands on.
 *
 * @example
 * stopStartingAfter(300_000, 95_000) // 55_000: a 5-minute invocation starts no page after 55 s
 */
export function stopStartingAfter(timeoutMs: number, worstMs: number): number {
  return Math.max(0, MAX_TIMEOUT_SHARE * timeoutMs - worstMs);
}
