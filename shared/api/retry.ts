/**
 * The retry policy of the API client: how many attempts, how long in total, how long between
 * them (exponential backoff with full jitter, or the API's Retry-After), and when to stop.
 */
import { ConfigError } from '../errors.js';

/** Bounds of the retries of one client call (one report, one list page, one verify). */
export interface RetryPolicy {
  /** Requests per call, the first included (default 8). */
  maxAttempts: number;
  /** Total time per call, sleeps included; no retry starts that would end after it (default 120_000). */
  maxElapsedMs: number;
  /** First backoff ceiling; doubles per attempt, full jitter (default 250). */
  baseDelayMs: number;
  /** Largest backoff (default 30_000). */
  maxDelayMs: number;
  /**
   * Longest Retry-After the client will sleep; a longer one ends the call as a retryable failure.
   * Lambda uses 0-5s: it retries through SQS visibility instead of sleeping.
   */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 8,
  maxElapsedMs: 120_000,
  baseDelayMs: 250,
  maxDelayMs: 30_000,
  maxRetryAfterMs: 60_000,
});

/**
 * Attempts of a call whose host name does not resolve (ENOTFOUND: the DNS server answered that
 * no such name exists). Unlike a 503 or a refused port the same name gets the same answer, so
 * one retry (a resolver that stumbled once) and then the error that says to check the name:
 * about a second, where the whole budget took ~16 s on average (up to 32 s by the jitter).
 * EAI_AGAIN (no answer from the DNS server) keeps the whole budget: it does pass.
 */
export const UNRESOLVED_NAME_ATTEMPTS = 2;

/** The policy for a failure whose network error is `cause`: fewer attempts for a name that does not resolve. */
export function policyForFailure(policy: RetryPolicy, cause: unknown): RetryPolicy {
  const code = (cause as { code?: unknown } | null | undefined)?.code;
  if (code !== 'ENOTFOUND' || policy.maxAttempts <= UNRESOLVED_NAME_ATTEMPTS) return policy;
  return { ...policy, maxAttempts: UNRESOLVED_NAME_ATTEMPTS };
}

/** The default policy with `overrides` applied; rejects values that make no sense. */
export function resolveRetryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  const policy = { ...DEFAULT_RETRY_POLICY };
  for (const [name, value] of Object.entries(overrides) as [keyof RetryPolicy, number | undefined][]) {
    if (value === undefined) continue;
    if (!Number.isFinite(value) || value < 0) {
      throw new ConfigError(`retry.${name} must be a non-negative number, got ${value}`);
    }
    policy[name] = value;
  }
  if (policy.maxAttempts < 1 || !Number.isInteger(policy.maxAttempts)) {
    throw new ConfigError(`retry.maxAttempts must be an integer >= 1, got ${policy.maxAttempts}`);
  }
  return policy;
}

/**
 * Backoff before retry number `attempt` (1 = the first retry): uniform in
 * [0, min(maxDelayMs, baseDelayMs x 2^(attempt-1))] ("full jitter"), so that callers that
 * failed together do not come back together.
 */
export function backoffDelayMs(
  attempt: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

/**
 * A `Retry-After` header in milliseconds: delay-seconds (RFC 9110: a non-negative integer;
 * fractions are accepted too) or an HTTP-date (a date in the past means 0). Anything else,
 * or no header, is `undefined`.
 */
export function parseRetryAfter(value: string | null | undefined, wallNowMs: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // HTTP-date always names the weekday and the zone (IMF-fixdate, RFC 850, asctime): require a
  // letter so that a bare number in an odd format is not read as a year.
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - wallNowMs);
}

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; why: string };

export interface RetryState {
  /** Attempts made so far (1 after the first request). */
  attempts: number;
  /** Time since the call started. */
  elapsedMs: number;
  /** The delay the API asked for, if it did. */
  retryAfterMs?: number | undefined;
}

/** Whether to try again after a transient failure, and after how long. */
export function decideRetry(
  state: RetryState,
  policy: RetryPolicy,
  random: () => number = Math.random,
): RetryDecision {
  if (state.attempts >= policy.maxAttempts) {
    return { retry: false, why: `gave up after ${state.attempts} attempts` };
  }
  if (state.retryAfterMs !== undefined && state.retryAfterMs > policy.maxRetryAfterMs) {
    return {
      retry: false,
      why: `the API asked to retry after ${state.retryAfterMs} ms, longer than the ${policy.maxRetryAfterMs} ms this caller waits`,
    };
  }
  const delayMs = state.retryAfterMs ?? backoffDelayMs(state.attempts, policy, random);
  if (state.elapsedMs + delayMs > policy.maxElapsedMs) {
    return {
      retry: false,
      why: `gave up after ${state.attempts} attempts in ${Math.round(state.elapsedMs)} ms`,
    };
  }
  return { retry: true, delayMs };
}
