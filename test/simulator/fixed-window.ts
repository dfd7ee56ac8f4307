/**
 * A fixed window per API key, counted as Laravel's `throttle` middleware does: the first request
 * after a window expired opens a new one; `windowRequests` requests are admitted in it, the rest
 * answer 429 and are not counted (Laravel checks tooManyAttempts before it hits). The window runs
 * on the wall clock (Date.now()), the clock of the epoch times in the headers. Laravel's headers
 * name the reset in whole seconds (its availableAt): exact when the window turns on that second
 * (turn 'second'), up to a second early when it turns where its cache key expires (turn 'exact',
 * Redis), or rounded up to the next whole second, up to a second after the turn (turn 'ceil',
 * express-rate-limit's default store, with Laravel's headers). The other styles' resets are
 * rounded up, so a client that waits for them finds the window expired.
 */
import type { Verdict } from './rate-limit.js';
import type { FixedWindowLimit, RateLimitHeaderStyle, WindowTurn } from './types.js';

const STYLES: readonly RateLimitHeaderStyle[] = ['none', 'laravel', 'github', 'ietf'];
export const WINDOW_TURNS: readonly WindowTurn[] = ['second', 'exact', 'ceil'];

interface Window {
  /** Requests admitted in this window. */
  hits: number;
  /** Wall-clock ms at which the window is over. */
  expiresAt: number;
  /** Wall-clock ms of the reset Laravel names (its availableAt: a whole second). */
  namedResetAt: number;
}

/** The windows of every key under one limit (a new limit starts a new FixedWindows). */
export class FixedWindows {
  private readonly windows = new Map<string, Window>();
  private readonly limit: Required<FixedWindowLimit>;

  constructor(limit: FixedWindowLimit) {
    this.limit = validatedWindow(limit);
  }

  /**
   * Counts one request of `key` at wall-clock `now` (ms), or refuses it; the headers are the
   * style's rate-limit headers.
   */
  take(key: string, now = Date.now()): Verdict {
    const current = this.windows.get(key);
    const window = current === undefined || now >= current.expiresAt ? this.open(key, now) : current;
    if (window.hits >= this.limit.windowRequests) {
      return {
        ok: false,
        retryAfterSeconds: retryAfterSeconds(this.limit, window, now),
        headers: styleHeaders(this.limit, window, now, true),
      };
    }
    window.hits += 1;
    return {
      ok: true,
      windowStarted: window !== current,
      headers: styleHeaders(this.limit, window, now, false),
    };
  }

  private open(key: string, now: number): Window {
    const { windowMs, headers, turn } = this.limit;
    const turnsOnSecond = headers === 'laravel' && turn === 'second';
    const expiresAt = turnsOnSecond ? Math.floor(now / 1000) * 1000 + windowMs : now + windowMs;
    // Laravel: availableAt = the current Unix second + decaySeconds; 'ceil': the turn rounded up.
    const namedResetAt =
      turn === 'ceil' ? Math.ceil(expiresAt / 1000) * 1000 : Math.floor(now / 1000) * 1000 + windowMs;
    const window = { hits: 0, expiresAt, namedResetAt };
    this.windows.set(key, window);
    return window;
  }
}

/** Whole seconds from `now` until `at`, rounded up: at least 1 while the window runs. */
function secondsUntil(at: number, now: number): number {
  return Math.ceil((at - now) / 1000);
}

/**
 * A 429's Retry-After. Laravel's is its availableIn: the named reset less the current whole
 * second, 0 once that second has come (while a Redis window runs on). The others' (and turn
 * 'ceil''s) are the seconds left, rounded up.
 */
function retryAfterSeconds(limit: Required<FixedWindowLimit>, window: Window, now: number): number {
  if (limit.headers !== 'laravel' || limit.turn === 'ceil') return secondsUntil(window.expiresAt, now);
  return Math.max(0, (window.namedResetAt - Math.floor(now / 1000) * 1000) / 1000);
}

/**
 * The headers of `style` for a request just admitted (counted) or refused. A refused request
 * meets a full window, so its remaining count is 0.
 */
function styleHeaders(
  limit: Required<FixedWindowLimit>,
  window: Window,
  now: number,
  refused: boolean,
): Record<string, string> {
  const quota = limit.windowRequests;
  const remaining = String(quota - window.hits);
  switch (limit.headers) {
    case 'none':
      return {};
    case 'laravel':
      return {
        'x-ratelimit-limit': String(quota),
        'x-ratelimit-remaining': remaining,
        ...(refused ? { 'x-ratelimit-reset': String(window.namedResetAt / 1000) } : {}),
      };
    case 'github':
      return {
        'x-ratelimit-limit': String(quota),
        'x-ratelimit-remaining': remaining,
        'x-ratelimit-used': String(window.hits),
        'x-ratelimit-reset': String(Math.ceil(window.expiresAt / 1000)),
      };
    case 'ietf':
      return {
        'ratelimit-policy': `"default";q=${quota};w=${Math.ceil(limit.windowMs / 1000)}`,
        ratelimit: `"default";r=${remaining};t=${secondsUntil(window.expiresAt, now)}`,
      };
  }
}

function validatedWindow(limit: FixedWindowLimit): Required<FixedWindowLimit> {
  const { windowRequests, windowMs, headers = 'none', turn = 'second' } = limit;
  if (!(Number.isInteger(windowRequests) && windowRequests >= 1) || !(windowMs > 0 && windowMs < Infinity)) {
    throw new Error(
      `simulator: rate limit needs an integer windowRequests >= 1 and windowMs > 0, got ${JSON.stringify(limit)}`,
    );
  }
  if (!STYLES.includes(headers))
    throw new Error(`simulator: rate limit headers must be one of ${STYLES.join(', ')}, got "${headers}"`);
  if (headers === 'laravel' && windowMs % 1000 !== 0) {
    throw new Error(
      `simulator: rate limit with laravel headers needs windowMs in whole seconds (a multiple of 1000), got ${windowMs}`,
    );
  }
  if (!WINDOW_TURNS.includes(turn))
    throw new Error(`simulator: window turn must be one of ${WINDOW_TURNS.join(', ')}, got "${turn}"`);
  if (limit.turn !== undefined && headers !== 'laravel')
    throw new Error(
      'simulator: a window turn is set only with laravel headers (the others turn where they say)',
    );
  return { windowRequests, windowMs, headers, turn };
}
