/**
 * Where a fixed window turns, learnt from the turns seen (window-quota.ts). Laravel's `throttle`
 * names the reset of a spent window only on a 429 and in whole seconds: its `availableAt`, the
 * second the window opened in plus its length. The window itself lasts as long as its cache key:
 * to that second with the file, array and database stores (the named reset is exact), to the
 * millisecond with Redis, where it turns up to a second after the reset named. There a client
 * that goes at the named reset meets 429s until the turn, and one that probes a second apart
 * loses most of a second per window.
 *
 * Such a window is counted from the request that opened it, so its turn comes a fixed time after
 * that request was sent (its length, give or take the spread of the latency). The learner finds
 * that offset from what the API shows:
 * 1. The first turn after a named reset is scanned from the reset, a request every 100 ms. If
 *    the first was let through, the named resets are exact (see the end). Otherwise the latest
 *    request refused and the first let through bracket the offset to within 100 ms.
 * 2. The next turn is scanned across that bracket in eighths (12.5 ms): the first request let
 *    through gives the offset to within a step.
 * 3. From then on the window's first request goes at that offset after the previous window's
 *    first request, with the rest behind it and no probe. The offset keeps some room above the
 *    one latency sample it came from: as much again as the sample was off, at most 0.2% of the
 *    window. A request refused there moves the offset past the first one let through the same
 *    way (the latency's spread, learnt at the cost of a 429). One refused more than 100 ms
 *    later, a first request sent more than 100 ms later than planned, or a new limit: the
 *    windows are not where they were, learnt afresh.
 * Whole-second windows (the named resets proved exact) take their offset from two exact turns
 * in a row, and are met the same way.
 *
 * A window counted from its first request usually lasts whole seconds, and the reset a 429 names
 * is then that turn rounded to a whole second: up (express-rate-limit's default store: the turn
 * comes up to a second *before* the reset named, and a first request at the named second always
 * gets through, as if the reset were exact) or down (Laravel on Redis: after it). So before
 * scanning, the turn is tried where such a window would turn: a whole number of seconds after
 * the window's first request, just before the named reset and just after it (window-quota.ts),
 * with the named second between them. The first of those let through is the offset, learnt in
 * one turn: at no 429 for a reset rounded up, one for a whole-second window (its named reset is
 * exact), two for Redis. A turn found by neither guess is scanned as in 1-2, and the guesses are
 * not tried again.
 */

/** The first turn after a named reset is scanned a request this often. */
export const COARSE_STEP_MS = 100;
/** The next scans the bracket the first gave in this many steps... */
const FINE_DIVISIONS = 8;
/** ...of at least this long (timers are not more precise). */
const MIN_STEP_MS = 4;
/** The room left above a learnt turn is at most this share of the window. */
const MARGIN_SHARE = 0.002;
/** A guess's guard above this share of the window is scanned away rather than kept (1 s windows). */
const GUARD_SHARE = 0.01;
/** A request refused this much after the learnt turn means the window changed. */
export const RELEARN_MS = 100;

/** How to meet the next turn: from `from` ms after the window's first request, a request each `step` ms (0: all). */
export interface TurnPlan {
  from: number;
  step: number;
}

/**
 * One turn, as offsets from the send of the previous window's first request: the latest request
 * that met the old window (refused, or let through into what it had left), if any, and the first
 * let through into the new one.
 */
export interface TurnSeen {
  early: number | undefined;
  admitted: number;
}

/** Where a window turns, once learnt: on the named second, or a fixed time after its first request (window-facts.ts). */
export type TurnKind = 'named' | 'first-request';

export class TurnLearner {
  /** Whether the resets the API names are where its windows turn; undefined until a turn tells. */
  private exact: boolean | undefined;
  /** How the offset was learnt. */
  private kind: TurnKind | undefined;
  /** Whether a turn came where no whole-second guess put it: the guesses are not tried again. */
  private guessesMissed = false;
  /** The bracket of the first turn scanned (offsets). */
  private bracket: { lo: number; hi: number } | undefined;
  /** The offset at which the next window's first request goes, once learnt. */
  private offset: number | undefined;
  private step = COARSE_STEP_MS;

  /** Whether the resets the API names are exact (undefined: no turn after one seen yet). */
  get namedResetsExact(): boolean | undefined {
    return this.exact;
  }

  /** Whether the next named reset is to be tried at the whole-second guesses around it. */
  get guessWholeSeconds(): boolean {
    return !this.guessesMissed && this.exact !== true && this.offset === undefined;
  }

  /** What was learnt, to keep for the next run: where windows turn and the offset (undefined: nothing yet). */
  learnt(): { turn: TurnKind; offsetMs: number } | undefined {
    if (this.offset === undefined || this.kind === undefined) return undefined;
    return { turn: this.kind, offsetMs: this.offset };
  }

  /**
   * Starts from what an earlier run learnt. A window counted from its first request is met at
   * the offset from the start; a whole-second one only at named resets, proved exact (its offset
   * depends on where in its second the window's first request went).
   */
  restore(learnt: { turn: TurnKind; offsetMs: number }): void {
    this.forget();
    this.exact = learnt.turn === 'named';
    if (learnt.turn === 'first-request') {
      this.kind = learnt.turn;
      this.offset = learnt.offsetMs;
      this.step = Math.max(MIN_STEP_MS, learnt.offsetMs * MARGIN_SHARE);
    }
  }

  /** How to meet the next turn; undefined while named resets are followed (or nothing is learnt). */
  plan(): TurnPlan | undefined {
    if (this.offset !== undefined) return { from: this.offset, step: 0 };
    if (this.exact !== false || this.bracket === undefined) return undefined;
    return { from: this.bracket.lo + this.step, step: this.step };
  }

  /** The step to scan at when a learnt turn's first request was refused. */
  get fineStepMs(): number {
    return this.step;
  }

  /** Whether a request sent `offset` ms after the window's first one and refused says the learnt turn is wrong. */
  refusedTooLate(offset: number): boolean {
    const plan = this.plan();
    if (plan === undefined) return false;
    const latest = this.offset ?? this.bracket?.hi ?? Number.POSITIVE_INFINITY;
    return offset > latest + RELEARN_MS;
  }

  /**
   * A turn met at a reset a 429 named: exact if nothing sent from that reset on met the old
   * window. Two exact ones in a row (the window before the second opened at a named reset too)
   * give the offset: the window's length.
   */
  afterNamedReset(seen: TurnSeen, exact: boolean): void {
    if (exact && this.exact === true) {
      this.offset = seen.admitted;
      this.kind = 'named';
    }
    this.exact = exact;
    if (exact || seen.early === undefined) return;
    this.bracket = { lo: seen.early, hi: seen.admitted };
    this.step = Math.max(MIN_STEP_MS, (seen.admitted - seen.early) / FINE_DIVISIONS);
  }

  /**
   * A turn met at a whole-second guess (a window counted from its first request): the guess,
   * which keeps `guardMs` of room above the turn it stands for, is the offset. A request refused
   * there later is scanned past in quarters of that room.
   */
  afterGuess(seen: TurnSeen, guardMs: number): void {
    this.exact = false;
    if (guardMs > GUARD_SHARE * seen.admitted) {
      // The guard would idle too much of each window: its span is scanned in the next turn, as in 2.
      this.bracket = { lo: seen.admitted - guardMs, hi: seen.admitted };
      this.step = Math.max(MIN_STEP_MS, guardMs / FINE_DIVISIONS);
      return;
    }
    this.bracket = undefined;
    this.offset = seen.admitted;
    this.kind = 'first-request';
    this.step = Math.max(MIN_STEP_MS, guardMs / 4);
  }

  /** A turn the guesses around a named reset did not meet: windows not of whole seconds, not guessed again. */
  guessesMissedTurn(): void {
    this.guessesMissed = true;
  }

  /**
   * A turn met as planned. A first request far later than planned (nothing was waiting, say)
   * puts the windows where the plan did not: learnt afresh.
   */
  afterPlanned(seen: TurnSeen): void {
    if (this.offset === undefined) {
      this.offset = seen.admitted + this.margin(this.step, seen.admitted);
      this.kind = 'first-request';
      return;
    }
    if (seen.admitted > this.offset + RELEARN_MS) this.forget();
    else if (seen.early === undefined) return;
    else if (this.refusedTooLate(seen.early)) this.forget();
    else if (seen.admitted > this.offset) {
      this.offset = seen.admitted + this.margin(seen.admitted - this.offset, seen.admitted);
    }
  }

  /**
   * Room left above a turn found by one sample of the latency: as much again as the sample was
   * off (`by`), at most a small share of the window's length (about the offset).
   */
  private margin(by: number, offset: number): number {
    return Math.min(by, MARGIN_SHARE * offset);
  }

  /** The API changed its limit: learnt afresh from the next named reset. */
  forget(): void {
    this.exact = undefined;
    this.kind = undefined;
    this.guessesMissed = false;
    this.bracket = undefined;
    this.offset = undefined;
    this.step = COARSE_STEP_MS;
  }
}
