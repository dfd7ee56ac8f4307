/**
 * A fixed window recognised from Retry-After alone. Many APIs send no rate-limit fields, only a
 * `Retry-After` on a 429: the whole seconds left until the window turns, rounded up. Taken for
 * congestion, every window's end cost a burst of 429s and a slow-down, and the limiter met the
 * next window late and slow (0.88-0.92 of the limit at 200 per 5 s, every other window 75-95%
 * used). A window shows itself by its count: the requests it lets through between two turns are
 * the same every time, its limit. The recogniser then speaks for the API: it gives every answer
 * the fields an API with headers would have sent (Laravel's shape: `Limit` and `Remaining` on
 * every answer, a reset only on a 429), and the limiter's window machinery (window-quota.ts,
 * window-turn.ts) holds requests at a spent window and learns where the next one turns. The
 * reset a 429 names is the earliest the window can turn (earliestTurnInMs), never later.
 *
 * A count is first put on trial: the next window is held at it, and a window refuses exactly the
 * request after it (one probe instead of a burst), which confirms it. A success past the count,
 * or a 429 before it, drops it. A token bucket's 429s also come in bursts, but the successes
 * between them follow the rate the client happened to keep; a count is tried only after the API
 * said it would refuse for a while (a Retry-After of more than a second, or a refusal of a
 * request sent once the first refusal was heard: a bucket, slowed down, lets the next through)
 * over at least half a second, and seen once in the first windows or twice later. A recognised
 * count that fails later (the API changed it) is dropped and learnt again, never trusted.
 *
 * Answers are placed by when their request was sent: a success sent after the first request
 * the spent window refused is of the next window (the old one let nothing through after that),
 * one sent before is of the old window, however late its answer; a refusal of a request sent
 * before the window's first answer came may have met the old window, and says nothing.
 */
import type { RateLimitInfo } from './rate-limit-headers.js';

/** Counts of the last windows seen whole that a count seen again is looked for in. */
const COUNTS_KEPT = 4;
/**
 * Counts put on trial in a run. The first is often the sum of two windows (slow start does not
 * spend the first), so a second is allowed; a token bucket fails each at the cost of one stall.
 */
const MAX_TRIALS = 2;
/** A count on trial that many windows in a row turn with no 429 past is dropped. */
const MAX_UNREFUSED_TRIAL_WINDOWS = 2;
/** A window seen whole lasts at least this long, from its first request to the next window's (ms). */
const MIN_WINDOW_MS = 500;
/** A window must admit at least this many for its count to mean anything (a bucket's burst is smaller). */
const MIN_LIMIT = 5;

/** Retry-After is rounded up to whole seconds. */
const ROUNDING_MS = 1_000;

/** What the recogniser says of an answer: the fields to hand the limiter's window machinery, or none. */
export type WindowVerdict =
  /** Not recognised (yet): a 429 is congestion, as before. */
  | { kind: 'unknown' }
  /**
   * A window of `info.limit`: pass `info` on as if the API had sent it. `confirmed` once a window
   * held at that count was refused exactly there; before, the count is on trial.
   */
  | { kind: 'window'; info: RateLimitInfo; confirmed: boolean }
  /** The count the window was taken to have failed: what was recognised is dropped, learnt afresh. */
  | { kind: 'forgotten' };

/**
 * The earliest the window can turn, ms from `now`. Retry-After is the whole seconds left, rounded
 * up, when the request arrived (at or after `sentAt`): the turn is less than a second before
 * `arrival + Retry-After`. Named as the reset, that bound is what Laravel on Redis names (a turn
 * up to a second after it, 0 once passed), and the window machinery scans from it and learns the
 * turn; the rounded-up Retry-After itself would be met a fraction of a second late every window
 * (half the limit of 1 s windows, whose Retry-After is always 1).
 */
export function earliestTurnInMs(sentAt: number, now: number, retryAfterMs: number): number {
  return Math.max(0, sentAt + retryAfterMs - ROUNDING_MS - now);
}

export class RetryAfterWindow {
  /** The limit recognised, or on trial. */
  private limit: number | undefined;
  /** Whether a window held at `limit` was refused exactly there (else `limit` is on trial). */
  private confirmed = false;
  /** Windows the count on trial turned with no 429. */
  private unrefused = 0;
  /** Counts put on trial so far, not counting those seen twice. */
  private trials = 0;
  /** Counts of the last windows seen whole (a 429 closed each), latest last. */
  private readonly counts: number[] = [];
  /** Successes of the current window. */
  private admitted = 0;
  /** Send of the current window's first request let through, if one was. */
  private openedBy: number | undefined;
  /**
   * When the first answer let through into the current window came: a request sent after it
   * reached the API after the window opened (one sent before may have met the old window).
   */
  private openedAnsweredAt: number | undefined;
  /**
   * When the answer to the first request the current window refused came (sent after the window
   * opened): a request sent after it reached the API once the window was spent.
   */
  private spentAnsweredAt: number | undefined;
  /**
   * The earliest send the current window refused: a success sent after it is taken as the next
   * window's (the spent one let nothing through after that, but for a request overtaking it on
   * the way, which the count then shows).
   */
  private spentBy: number | undefined;
  /**
   * Whether the current window said it was spent for a while: its first refusal's Retry-After
   * was more than a second (a token bucket at a request a second or more never says so much),
   * or it refused a request sent once that refusal was heard.
   */
  private spentForLong = false;
  /**
   * Whether the current window's count is whole: it started at a turn seen, or with the run
   * (the client's first request opened it, unless another process shares the key: then its
   * count is short and simply fails to match).
   */
  private whole = true;

  /** `trialLimit`: a count an earlier run recognised (window-facts.ts), on trial from the first window. */
  constructor(trialLimit?: number) {
    this.limit = trialLimit;
  }

  /** The limit recognised, if any (for logs and tests). */
  get recognisedLimit(): number | undefined {
    return this.confirmed ? this.limit : undefined;
  }

  /** The limit recognised or on trial: the fields given to the limiter are the recogniser's. */
  get limitHeld(): number | undefined {
    return this.limit;
  }

  /** A success, answered at `now`, for the request sent at `sentAt`. */
  success(sentAt: number, now: number): WindowVerdict {
    // Sent once the window was spent: let through by the next.
    const spent = this.spentBy !== undefined && sentAt > this.spentBy;
    // With the count reached and nothing refused, a request more can only be of a new window. A
    // count on trial that the API never refuses at (a token bucket's requests between two 429s,
    // held to by the limiter) is dropped after a few such windows.
    const beyond = !spent && this.limit !== undefined && this.admitted >= this.limit;
    if (beyond && !this.confirmed) this.unrefused += 1;
    const failed = spent || beyond ? this.turn(sentAt, now) : false;
    if (!(spent || beyond)) {
      this.openedBy = Math.min(this.openedBy ?? sentAt, sentAt);
      this.openedAnsweredAt ??= now;
    }
    this.admitted += 1;
    if (failed || this.unrefused > MAX_UNREFUSED_TRIAL_WINDOWS) return this.forget();
    return this.verdict(Math.max(0, (this.limit ?? 0) - this.admitted));
  }

  /**
   * A 429 for the request sent at `sentAt`, answered at `now`, with its Retry-After
   * (`retryAfterMs`, undefined if none).
   */
  refused(sentAt: number, now: number, retryAfterMs: number | undefined): WindowVerdict {
    // Without a Retry-After nothing says a window turns: not this kind of API.
    if (retryAfterMs === undefined) return this.forget();
    // Sent before the current window was seen open, it may have met the old one: it says nothing.
    const ofWindow = this.openedAnsweredAt !== undefined && sentAt >= this.openedAnsweredAt;
    // Refused again though sent once the first refusal was heard: the window holds (a bucket,
    // slowed down, lets the next request through, mostly).
    if (this.spentAnsweredAt !== undefined && sentAt >= this.spentAnsweredAt) this.spentForLong = true;
    if (ofWindow) this.spentBy = Math.min(this.spentBy ?? sentAt, sentAt);
    if (ofWindow && this.spentAnsweredAt === undefined) {
      this.spentAnsweredAt = now;
      this.spentForLong ||= retryAfterMs > ROUNDING_MS;
      // Refused before the count: no window of that limit (the limiter holds a window at its
      // limit and lets one probe out once every answer is in). Now, not at the turn: this 429
      // is congestion, and the limiter slows down for it.
      if (this.limit !== undefined && this.admitted < this.limit) return this.forget();
    }
    return this.verdict(0, earliestTurnInMs(sentAt, now, retryAfterMs));
  }

  /**
   * A new window, opened by the success sent at `sentAt` and answered at `now`: the old one's
   * count is recorded. True when that count fails the limit (on trial, or recognised: the API
   * changed it).
   */
  private turn(sentAt: number, now: number): boolean {
    // Retry-After counts whole seconds: a window is at least about one long. A bucket's 429s come
    // every few requests at times (a long round trip), and small counts repeat by chance.
    const span = sentAt - (this.openedBy ?? sentAt);
    const whole = this.spentAnsweredAt !== undefined && this.whole;
    const count = this.admitted;
    const long = this.spentForLong;
    this.whole = this.spentAnsweredAt !== undefined;
    this.spentForLong = false;
    this.admitted = 0;
    this.openedBy = sentAt;
    this.openedAnsweredAt = now;
    this.spentAnsweredAt = undefined;
    this.spentBy = undefined;
    if (!whole) return false;
    if (this.limit !== undefined) {
      if (count !== this.limit) return true;
      this.confirmed = true;
      this.unrefused = 0;
    } else if (
      count >= MIN_LIMIT &&
      span >= MIN_WINDOW_MS &&
      long &&
      (this.counts.includes(count) || this.trials < MAX_TRIALS)
    ) {
      // On trial: the next window is held at this count. A window refuses the request after it
      // (the limiter's single probe, not a burst); anything else drops it. A count seen once is
      // tried only after a Retry-After of more than a second: a token bucket at a request a
      // second or more never says so much, and a trial costs it a stall per count.
      if (!this.counts.includes(count)) this.trials += 1;
      this.limit = count;
    }
    // A window the client did not spend turns unseen, and its count runs on into the next:
    // such a sum matches nothing, and the two windows that agree need not be neighbours.
    this.counts.push(count);
    if (this.counts.length > COUNTS_KEPT) this.counts.shift();
    return false;
  }

  /** The count failed: the limit changed, or this is no window. Counted again from the next turn. */
  private forget(): WindowVerdict {
    const known = this.limit !== undefined;
    this.limit = undefined;
    this.confirmed = false;
    this.unrefused = 0;
    this.counts.length = 0;
    return known ? { kind: 'forgotten' } : { kind: 'unknown' };
  }

  private verdict(remaining: number, resetInMs?: number): WindowVerdict {
    if (this.limit === undefined) return { kind: 'unknown' };
    const info: RateLimitInfo = { limit: this.limit, remaining };
    if (resetInMs !== undefined) info.resetInMs = resetInMs;
    return { kind: 'window', info, confirmed: this.confirmed };
  }
}
