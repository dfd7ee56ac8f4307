/**
 * A small seeded PRNG (mulberry32) and an integer hash, so that every generated value is a pure
 * function of (seed, ids...). Not cryptographic; fast and reproducible across Node versions.
 */

const TWO_POW_32 = 2 ** 32;

/** 32-bit hash of a list of numbers (integers up to 2^53; negatives allowed). */
export function hashInts(...parts: number[]): number {
  let h = 0x811c9dc5;
  for (const part of parts) {
    const lo = part >>> 0;
    const hi = Math.floor(part / TWO_POW_32) >>> 0;
    h = Math.imul(h ^ lo, 0x01000193);
    h ^= h >>> 15;
    h = Math.imul(h ^ hi, 0x85ebca6b);
    h ^= h >>> 13;
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Deterministic random source. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / TWO_POW_32;
  }

  /** Integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** `value` or null with the given probability of null. */
  orNull<T>(probability: number, value: () => T): T | null {
    return this.chance(probability) ? null : value();
  }

  /** A hex string of `length` characters. */
  hex(length: number): string {
    let out = '';
    while (out.length < length)
      out += Math.floor(this.next() * TWO_POW_32)
        .toString(16)
        .padStart(8, '0');
    return out.slice(0, length);
  }
}

/** An Rng seeded from the hash of the given numbers. */
export function rngFor(...parts: number[]): Rng {
  return new Rng(hashInts(...parts));
}

/** Salts that separate the random streams of unrelated concerns drawn from the same seed. */
export const STREAM = {
  dataset: 1,
  states: 2,
  keys: 3,
  faults: 4,
  campaign: 5,
  job: 6,
  location: 7,
  report: 8,
  size: 9,
  invalid: 10,
  latency: 11,
} as const;
