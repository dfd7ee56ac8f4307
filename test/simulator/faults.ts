/**
 * Fault injection: random faults with seeded probabilities, and scripted ones ("the next N
 * requests whose path matches answer with kind") that tests use to hit an exact case.
 */
import { type Rng, rngFor, STREAM } from './prng.js';
import type { FailKind, FaultOptions } from './types.js';

/** Delay of a 'slow' answer when no slowMs is set: longer than any sane client timeout in tests. */
export const DEFAULT_SLOW_MS = 2_000;

/** What happens to one request, decided before it is handled. */
export interface FaultPlan {
  /** Replace the answer with this fault (5xx, reset, a scripted 429 ...), or none. */
  kind: FailKind | null;
  /** Delay before answering. */
  delayMs: number;
  /** True when a script chose the fault (scripted requests bypass the rate limiter). */
  scripted: boolean;
}

interface Script {
  match: RegExp;
  kind: FailKind;
  remaining: number;
}

export class Faults {
  private options: FaultOptions;
  private readonly rng: Rng;
  private scripts: Script[] = [];

  constructor(seed: number, options: FaultOptions = {}) {
    this.rng = rngFor(seed, STREAM.faults);
    this.options = checked(options);
  }

  set(options: FaultOptions): void {
    this.options = checked(options);
  }

  get slowMs(): number {
    return this.options.slowMs ?? DEFAULT_SLOW_MS;
  }

  /** Adds a script; scripts are consulted in the order they were added. */
  failNext(match: RegExp, kind: FailKind, times = 1): void {
    if (times > 0) this.scripts.push({ match, kind, remaining: times });
  }

  /** The scripted fault for a request to `pathAndQuery`, if a script matches (and is used up by one). */
  takeScript(pathAndQuery: string): FaultPlan | undefined {
    const script = this.scripts.find((s) => matches(s.match, pathAndQuery));
    if (!script) return undefined;
    script.remaining -= 1;
    if (script.remaining <= 0) this.scripts = this.scripts.filter((s) => s !== script);
    if (script.kind === 'slow') return { kind: null, delayMs: this.slowMs, scripted: true };
    return { kind: script.kind, delayMs: 0, scripted: true };
  }

  /** The random fault (or none) for the next request, from the seeded stream. */
  draw(): FaultPlan {
    const { serverError = 0, reset = 0, truncate = 0, slow = 0 } = this.options;
    const plan: FaultPlan = { kind: null, delayMs: 0, scripted: false };
    if (serverError + reset + truncate > 0) {
      const roll = this.rng.next();
      if (roll < serverError) plan.kind = this.rng.pick(['500', '502', '503'] as const);
      else if (roll < serverError + reset) plan.kind = 'reset';
      else if (roll < serverError + reset + truncate) plan.kind = 'truncate';
    }
    if (slow > 0 && this.rng.chance(slow)) plan.delayMs = this.slowMs;
    return plan;
  }
}

/** RegExp.test with the lastIndex of a /g or /y pattern reset, so a script matches every time. */
function matches(pattern: RegExp, text: string): boolean {
  pattern.lastIndex = 0;
  return pattern.test(text);
}

function checked(options: FaultOptions): FaultOptions {
  for (const name of ['serverError', 'reset', 'slow', 'truncate'] as const) {
    const p = options[name];
    if (p !== undefined && !(p >= 0 && p <= 1))
      throw new Error(`simulator: fault ${name} must be in [0,1], got ${p}`);
  }
  return { ...options };
}
