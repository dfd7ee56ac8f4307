/**
 * A deterministic simulation of the limiter against an API on virtual time: `workers` loops
 * fetch `items` reports each through the limiter; a 429 is retried after its Retry-After or a
 * full-jitter backoff, as the client does. The API limits with a token bucket or a fixed window
 * (with the rate-limit headers of Laravel, GitHub or the IETF draft, or none) and answers after
 * a latency that may change over time. Seeded, so a run is reproducible.
 */
import { AdaptiveRateLimiter, type AdaptiveRateLimiterOptions } from '../../../shared/api/limiter.js';
import type { RateLimitInfo } from '../../../shared/api/rate-limit-headers.js';
import type { WindowTurn } from '../../simulator/types.js';
import { FakeClock } from './fake-clock.js';

export type HeaderStyle = 'none' | 'laravel' | 'github' | 'ietf';

/** A fixed window; `turn` as the simulator's (default 'second'). */
export interface WindowLimit {
  windowRequests: number;
  windowMs: number;
  headers: HeaderStyle;
  turn?: WindowTurn;
}

export type ApiLimit = { ratePerSecond: number; burst: number } | WindowLimit;

export interface SimulationOptions {
  /** The API's limit, unknown to the limiter unless its headers tell. */
  limit: ApiLimit;
  /** A limit the API changes to at a virtual time. */
  change?: { atMs: number; limit: ApiLimit };
  items: number;
  workers: number;
  /** Round trip, ms (each request takes 50-100% of it), or a function of virtual time. */
  latencyMs?: number | ((nowMs: number) => number);
  /** Timers fire up to this many ms late. */
  timerLatenessMs?: number;
  seed?: number;
  /** A token bucket sends Retry-After (whole seconds until a token is back, at least 1), as the simulator does. */
  retryAfter?: boolean;
  limiter?: Omit<AdaptiveRateLimiterOptions, 'clock'>;
  /** Called on every answer with the virtual time and the limiter, to sample its state. */
  onAnswer?: (nowMs: number, limiter: AdaptiveRateLimiter) => void;
}

export interface SimulationResult {
  ok: number;
  throttled: number;
  durationS: number;
  /**
   * Answered (non-429) requests per second over the allowed rate; for a fixed window, from the
   * start of the first window to the start of the last (the last one is cut short by the end).
   */
  utilisation: number;
  share429: number;
  /** The limiter's rate at the end. */
  finalRate: number;
  peakInFlight: number;
  /** Virtual times of the answered requests, ms. */
  okTimes: number[];
  /** Virtual times at which the API refused a request (429), ms. */
  throttledTimes: number[];
  /** Virtual times at which a fixed window opened, ms. */
  windowStarts: number[];
}

export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The allowed rate of a limit, req/s. */
export function allowedRate(limit: ApiLimit): number {
  return 'ratePerSecond' in limit ? limit.ratePerSecond : (limit.windowRequests * 1000) / limit.windowMs;
}

/** The API's verdict on a request arriving at `now`: admitted, or refused for `retryAfterMs`. */
interface Verdict {
  ok: boolean;
  retryAfterMs: number | undefined;
  info: RateLimitInfo | undefined;
  /** An epoch reset the headers name: the client reads it as a delay from when the answer comes. */
  resetAt?: number;
}

/** A token bucket: the simulator's and the client benchmark's default. */
function tokenBucket(limit: { ratePerSecond: number; burst: number }, retryAfter: boolean) {
  let tokens = limit.burst;
  let refilledAt = 0;
  return (now: number): Verdict => {
    tokens = Math.min(limit.burst, tokens + ((now - refilledAt) * limit.ratePerSecond) / 1000);
    refilledAt = now;
    if (tokens >= 1) {
      tokens -= 1;
      return { ok: true, retryAfterMs: undefined, info: undefined };
    }
    const waitMs = Math.max(1, Math.ceil((1 - tokens) / limit.ratePerSecond)) * 1000;
    return { ok: false, retryAfterMs: retryAfter ? waitMs : undefined, info: undefined };
  };
}

/**
 * Laravel's throttle: N requests per window counted from the first request after the last one
 * expired. Laravel names the reset in whole seconds, `floor(first request's second) + window`,
 * and Retry-After as that reset less the current second (0 once it has come); the window ends
 * there (turn 'second') or `windowMs` after its first request (turn 'exact', Redis). Turn 'ceil'
 * (express-rate-limit) ends it `windowMs` after its first request and names that turn rounded up
 * to the next whole second, with Retry-After the seconds left rounded up. The other
 * styles end it `windowMs` after its first request. Virtual time is the wall clock here.
 */
function fixedWindow(limit: WindowLimit, starts: number[]) {
  let expiresAt = Number.NEGATIVE_INFINITY;
  let namedReset = Number.NEGATIVE_INFINITY;
  let hits = 0;
  const ceilSeconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000)) * 1000;
  const floorSecond = (ms: number) => Math.floor(ms / 1000) * 1000;
  return (now: number): Verdict => {
    if (now >= expiresAt) {
      const laravelSecond = limit.headers === 'laravel' && (limit.turn ?? 'second') === 'second';
      expiresAt = laravelSecond ? floorSecond(now) + limit.windowMs : now + limit.windowMs;
      namedReset = limit.turn === 'ceil' ? ceilSeconds(expiresAt) : floorSecond(now) + limit.windowMs;
      hits = 0;
      starts.push(now);
    }
    const ok = hits < limit.windowRequests;
    if (ok) hits += 1;
    const remaining = limit.windowRequests - hits;
    const untilReset = expiresAt - now;
    const counts = { limit: limit.windowRequests, remaining: ok ? remaining : 0 };
    if (limit.headers === 'laravel') {
      // Reset (epoch seconds) only on a 429; Retry-After 'ceil': the seconds left rounded up.
      const retryAfterMs = ok
        ? undefined
        : limit.turn === 'ceil'
          ? ceilSeconds(untilReset)
          : Math.max(0, namedReset - floorSecond(now));
      return { ok, retryAfterMs, info: counts, resetAt: ok ? undefined : namedReset };
    }
    const retryAfterMs = ok ? undefined : Math.max(1000, ceilSeconds(untilReset));
    switch (limit.headers) {
      case 'none':
        return { ok, retryAfterMs, info: undefined };
      case 'github':
        return { ok, retryAfterMs, info: counts, resetAt: ceilSeconds(expiresAt) };
      case 'ietf':
        return { ok, retryAfterMs, info: { ...counts, resetInMs: ceilSeconds(untilReset) } };
    }
  };
}

export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const random = seededRandom(options.seed ?? 1);
  const clock = new FakeClock({ maxLatenessMs: options.timerLatenessMs ?? 2, random, wallStart: 0 });
  // A ceiling well above the limits simulated: the limiter must find them, not be held under them.
  const limiter = new AdaptiveRateLimiter({
    concurrency: options.workers,
    maxRate: 100,
    ...options.limiter,
    clock,
  });
  const latency = options.latencyMs ?? 4;
  const roundTrip = () => (typeof latency === 'number' ? latency : latency(clock.now()));
  const windowStarts: number[] = [];
  const apiFor = (limit: ApiLimit) =>
    'ratePerSecond' in limit
      ? tokenBucket(limit, options.retryAfter ?? false)
      : fixedWindow(limit, windowStarts);
  const before = apiFor(options.limit);
  const after = options.change === undefined ? before : apiFor(options.change.limit);
  const verdictAt = (now: number) =>
    (now < (options.change?.atMs ?? Number.POSITIVE_INFINITY) ? before : after)(now);
  const okTimes: number[] = [];
  const throttledTimes: number[] = [];
  let next = 0;
  const halfTrip = (trip: number) => clock.sleep((trip * (0.5 + random() * 0.5)) / 2);
  const worker = async () => {
    while (next < options.items) {
      next += 1;
      for (let attempt = 1; ; attempt += 1) {
        const release = await limiter.acquire();
        const trip = roundTrip();
        await halfTrip(trip);
        const verdict = verdictAt(clock.now());
        if (!verdict.ok) throttledTimes.push(clock.now());
        await halfTrip(trip);
        const info =
          verdict.resetAt === undefined
            ? verdict.info
            : { ...verdict.info, resetInMs: Math.max(0, verdict.resetAt - clock.wallNow()) };
        if (verdict.ok) limiter.onSuccess(info, release.sentAt);
        else limiter.onThrottle(verdict.retryAfterMs, info, release.sentAt);
        release();
        options.onAnswer?.(clock.now(), limiter);
        if (verdict.ok) {
          okTimes.push(clock.now());
          break;
        }
        await clock.sleep(verdict.retryAfterMs ?? random() * Math.min(30_000, 250 * 2 ** (attempt - 1)));
      }
    }
  };
  await clock.run(Promise.all(Array.from({ length: options.workers }, worker)));
  const durationS = clock.now() / 1000;
  const ok = okTimes.length;
  const throttled = throttledTimes.length;
  return {
    ok,
    throttled,
    durationS,
    utilisation: utilisation(okTimes, windowStarts, allowedRate(options.limit), durationS),
    share429: throttled / (ok + throttled),
    finalRate: limiter.currentRate(),
    peakInFlight: limiter.state().peakInFlight,
    okTimes,
    throttledTimes,
    windowStarts,
  };
}

/**
 * Windows a client takes to learn where Laravel's windows turn: slow start does not spend the
 * first (0), a probe meets the first named reset at the end of window 1, and the turns into
 * windows 2 and 3 are scanned.
 */
export const LEARNING_WINDOWS = 4;

/** What a window run recorded: this simulation's result, or the HTTP simulator's stats. */
type WindowRecord = Pick<SimulationResult, 'okTimes' | 'throttledTimes' | 'windowStarts'>;

/**
 * A fixed window's figures once the client had `skip` windows to learn in: utilisation from the
 * start of window `skip` (counted from 0) to the start of the last, and the 429s per window over
 * that span.
 */
export function afterWindows(
  record: WindowRecord,
  limit: Pick<WindowLimit, 'windowRequests' | 'windowMs'>,
  skip = LEARNING_WINDOWS,
): { utilisation: number; refusalsPerWindow: number; windows: number } {
  const from = record.windowStarts[skip];
  const to = record.windowStarts.at(-1);
  if (from === undefined || to === undefined || to <= from) throw new Error('too few windows to measure');
  const within = (t: number) => t >= from && t < to;
  const windows = record.windowStarts.length - 1 - skip;
  const allowed = (limit.windowRequests * 1000) / limit.windowMs;
  return {
    utilisation: record.okTimes.filter(within).length / ((to - from) / 1000) / allowed,
    refusalsPerWindow: record.throttledTimes.filter(within).length / windows,
    windows,
  };
}

/** `windows` windows' worth of reports through `limit`, 128 callers, 100 ms of latency. */
export function simulateWindows(limit: WindowLimit, windows: number, seed = 1): Promise<SimulationResult> {
  return simulate({
    limit,
    items: limit.windowRequests * windows,
    workers: 128,
    latencyMs: 100,
    seed,
    limiter: { concurrency: 128 },
  });
}

function utilisation(okTimes: number[], windowStarts: number[], allowed: number, durationS: number): number {
  const first = windowStarts[0];
  const last = windowStarts.at(-1);
  if (first === undefined || last === undefined || last === first)
    return okTimes.length / durationS / allowed;
  const counted = okTimes.filter((t) => t >= first && t < last).length;
  return counted / ((last - first) / 1000) / allowed;
}
