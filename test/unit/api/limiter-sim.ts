/**
 * A deterministic simulation of the limiter against a token-bucket API on virtual time:
 * `workers` loops fetch `items` reports each through the limiter; a 429 is retried after a
 * full-jitter backoff, as the client does. Seeded, so a run is reproducible.
 */
import { AdaptiveRateLimiter, type AdaptiveRateLimiterOptions } from '../../../shared/api/limiter.js';
import { FakeClock } from './fake-clock.js';

export interface SimulationOptions {
  /** The API's token bucket, unknown to the limiter. */
  ratePerSecond: number;
  burst: number;
  items: number;
  workers: number;
  /** Round trip, ms (each request takes 50-100% of it). */
  latencyMs?: number;
  /** Timers fire up to this many ms late. */
  timerLatenessMs?: number;
  seed?: number;
  /** The API sends Retry-After (whole seconds until a token is back, at least 1), as the simulator does. */
  retryAfter?: boolean;
  limiter?: Omit<AdaptiveRateLimiterOptions, 'clock'>;
}

export interface SimulationResult {
  ok: number;
  throttled: number;
  durationS: number;
  utilisation: number;
  share429: number;
  /** The limiter's rate at the end. */
  finalRate: number;
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

export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const random = seededRandom(options.seed ?? 1);
  const clock = new FakeClock({ maxLatenessMs: options.timerLatenessMs ?? 2, random });
  const limiter = new AdaptiveRateLimiter({ concurrency: options.workers, ...options.limiter, clock });
  const latency = options.latencyMs ?? 4;
  let tokens = options.burst;
  let refilledAt = 0;
  const take = () => {
    const now = clock.now();
    tokens = Math.min(options.burst, tokens + ((now - refilledAt) * options.ratePerSecond) / 1000);
    refilledAt = now;
    if (tokens < 1) return Math.max(1, Math.ceil((1 - tokens) / options.ratePerSecond)) * 1000;
    tokens -= 1;
    return 0;
  };
  let ok = 0;
  let throttled = 0;
  let next = 0;
  const halfTrip = () => clock.sleep((latency * (0.5 + random() * 0.5)) / 2);
  const worker = async () => {
    while (next < options.items) {
      next += 1;
      for (let attempt = 1; ; attempt += 1) {
        const release = await limiter.acquire();
        await halfTrip();
        const waitMs = take();
        await halfTrip();
        const retryAfterMs = options.retryAfter ? waitMs : undefined;
        if (waitMs === 0) limiter.onSuccess();
        else limiter.onThrottle(retryAfterMs);
        release();
        if (waitMs === 0) {
          ok += 1;
          break;
        }
        throttled += 1;
        await clock.sleep(retryAfterMs ?? random() * Math.min(30_000, 250 * 2 ** (attempt - 1)));
      }
    }
  };
  await clock.run(Promise.all(Array.from({ length: options.workers }, worker)));
  const durationS = clock.now() / 1000;
  return {
    ok,
    throttled,
    durationS,
    utilisation: ok / durationS / options.ratePerSecond,
    share429: throttled / (ok + throttled),
    finalRate: limiter.currentRate(),
  };
}
