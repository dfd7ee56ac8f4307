/**
 * Network latency: every answer leaves `ms` after its request arrived, give or take a jitter of
 * ±20% (or the ± ms given) drawn from a seeded stream, so a run is reproducible.
 */
import { type Rng, rngFor, STREAM } from './prng.js';

/** The jitter: a delay lies in [ms × (1 − JITTER), ms × (1 + JITTER)). */
export const LATENCY_JITTER = 0.2;

/** The latency of a simulator, changeable while it runs. */
export class Latency {
  private ms: number;
  /** ± ms; undefined: ±20% of `ms`. */
  private jitterMs: number | undefined;
  private readonly rng: Rng;

  constructor(seed: number, ms = 0) {
    this.rng = rngFor(seed, STREAM.latency);
    this.ms = checked(ms);
  }

  /** Applies to requests that arrive from now on; `jitterMs` (at most `ms`) replaces the ±20%. */
  set(ms: number, jitterMs?: number): void {
    this.ms = checked(ms);
    if (jitterMs !== undefined && !(checked(jitterMs) <= ms))
      throw new Error(`simulator: latency jitter must be at most the latency, got ±${jitterMs} on ${ms} ms`);
    this.jitterMs = jitterMs;
  }

  /** The delay of the next answer in ms (0 without latency, drawing nothing). */
  draw(): number {
    if (this.ms === 0) return 0;
    return this.ms + (this.jitterMs ?? LATENCY_JITTER * this.ms) * (2 * this.rng.next() - 1);
  }
}

function checked(ms: number): number {
  if (!(ms >= 0 && ms < Infinity)) throw new Error(`simulator: latencyMs must be a number >= 0, got ${ms}`);
  return ms;
}
