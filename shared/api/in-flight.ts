/**
 * How many requests the client keeps in flight. Little's law: to sustain a rate of r requests
 * per second when each takes L seconds, r x L must be in flight. A fixed number is wrong at
 * almost every latency (8 caps a 250 ms API at 32 req/s), so the number follows a moving
 * average of the latency, between a floor and a ceiling (`--concurrency`).
 */

/** Requests in flight = rate x latency x HEADROOM + SPARE: room for latency that varies. */
const HEADROOM = 1.5;
const SPARE = 2;
/** Weight of the newest sample in the moving average of latency (about the last five requests). */
const WEIGHT = 0.2;

export interface InFlightOptions {
  /** Fewest requests allowed in flight, and the number before any latency is known. */
  floor: number;
  /** Most requests in flight, whatever the latency. */
  ceiling: number;
}

export class InFlightLimit {
  readonly floor: number;
  readonly ceiling: number;
  private averageMs: number | undefined;

  constructor(options: InFlightOptions) {
    this.ceiling = Math.max(1, Math.floor(options.ceiling));
    this.floor = Math.min(this.ceiling, Math.max(1, Math.floor(options.floor)));
  }

  /** The requests allowed in flight to sustain `rate` req/s at the latency seen lately. */
  at(rate: number): number {
    if (this.averageMs === undefined) return this.floor;
    const needed = Math.ceil(((rate * this.averageMs) / 1000) * HEADROOM) + SPARE;
    return Math.min(this.ceiling, Math.max(this.floor, needed));
  }

  /** The latency seen lately, ms (0 before the first answer). */
  latencyMs(): number {
    return this.averageMs ?? 0;
  }

  /** A request's answer came back `latencyMs` after it was sent. */
  onAnswered(latencyMs: number): void {
    this.averageMs =
      this.averageMs === undefined ? latencyMs : this.averageMs + WEIGHT * (latencyMs - this.averageMs);
  }
}
