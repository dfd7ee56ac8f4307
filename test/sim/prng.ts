/**
 * The simulation's only source of randomness: sfc32, seeded from one number. Every choice a
 * seed makes (latencies, faults, the dataset, clock offsets, run ids) comes from a `Prng`, so
 * the same seed gives the same trace. Nothing in the simulated path calls `Math.random`.
 */
export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;
  readonly #seed: number;

  constructor(seed: number) {
    this.#seed = seed >>> 0;
    // splitmix32 spreads a small seed over the four words of state.
    let s = seed >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = next();
    this.#b = next();
    this.#c = next();
    this.#d = next();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Uniform in [0, 1). */
  next(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return p > 0 && this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** A new generator whose sequence depends only on this one's next draw. */
  fork(): Prng {
    return new Prng(Math.floor(this.next() * 4294967296));
  }

  /**
   * A generator of its own for the draws of one scenario feature, from this one's seed and the
   * feature's name, not from this one's position: a feature drawn from its stream keeps its
   * draws however many draws other features add before it, and adds none to theirs.
   */
  stream(name: string): Prng {
    // FNV-1a over the name.
    let h = 0x811c9dc5;
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
    return new Prng((this.#seed ^ h) >>> 0);
  }

  /** `() => number` for code that takes a random function (ExportDeps.random). */
  get fn(): () => number {
    return () => this.next();
  }
}
