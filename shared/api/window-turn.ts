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
 */

/** The first turn after a named reset is scanned a request this often. */
export const COARSE_STEP_MS = 100;
/** The next scans the bracket the first gave in this many steps... */
const FINE_DIVISIONS = 8;
/** ...of at least this long (timers are not more precise). */
const MIN_STEP_MS = 4;
/** The room left above a learnt turn is at most this share of the window. */
const MARGIN_SHARE = 0.002;
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

export class TurnLearner {
  /** Whether the resets the API names are where its windows turn; undefined until a turn tells. */
  private exact: boolean | undefined;
  /** The bracket of the first turn scanned (offsets). */
  private bracket: { lo: number; hi: number } | undefined;
  /** The offset at which the next window's first request goes, once learnt. */
  private offset: number | undefined;
  private step = COARSE_STEP_MS;

  /** Whether the resets the API names are exact (undefined: no turn after one seen yet). */
  get namedResetsExact(): boolean | undefined {
    return this.exact;
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
    if (exact && this.exact === true) this.offset = seen.admitted;
    this.exact = exact;
    if (exact || seen.early === undefined) return;
    this.bracket = { lo: seen.early, hi: seen.admitted };
    this.step = Math.max(MIN_STEP_MS, (seen.admitted - seen.early) / FINE_DIVISIONS);
  }

  /**
   * A turn met as planned. A first request far later than planned (nothing was waiting, say)
   * puts the windows where the plan did not: learnt afresh.
   */
  afterPlanned(seen: TurnSeen): void {
    if (this.offset === undefined) {
      this.offset = seen.admitted + this.margin(this.step, seen.admitted);
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
    this.bracket = undefined;
    this.offset = undefined;
    this.step = COARSE_STEP_MS;
  }
}
