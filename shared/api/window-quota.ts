/**
 * The API's own account of its rate limit, when its answers carry one (rate-limit-headers.ts):
 * how many requests the current window has left and when it turns. The limiter sends no
 * request the API has said it will refuse: with the window spent, it waits for the turn.
 *
 * Every window after the first opens with a turn: the requests that go once the old window is
 * spent. A reset the answers name (GitHub, the IETF draft) is followed as said. Laravel's
 * `throttle` says `Remaining` on every answer but when the window resets only on a 429: a spent
 * window whose reset is unknown lets one probe out at a time, and its 429 names the reset (a
 * second apart when a 429 names none). That reset is in whole seconds, up to a second before
 * the turn (Laravel on Redis; a 429 may even say it has passed, with the window running on) or
 * after it (a reset rounded up), so the turn is tried at whole seconds from the window's first
 * request around the named reset, scanned if none of those meets it, and learnt
 * (window-turn.ts): once learnt, the next window's first request goes just after the turn, with
 * no probe. What was learnt can start the next run (`facts`, window-facts.ts).
 *
 * Answers are placed by when their request was sent: one sent before a turn says nothing of the
 * window after it (it overtook nothing, it is late), and a 429 for a request sent during a turn
 * only says the turn had not come yet.
 */
import type { RateLimitInfo } from './rate-limit-headers.js';
import type { WindowFacts } from './window-facts.js';
import { COARSE_STEP_MS, TurnLearner } from './window-turn.js';

/** A spent window with no known reset lets one probe out this often. */
const PROBE_INTERVAL_MS = 1_000;
/** A rise of `Remaining` by more than this (requests, or share of the limit) is a new window. */
const REORDER_SLACK = 8;
const REORDER_SHARE = 0.1;
/** Less than any two grants apart. */
const SAME_INSTANT_MS = 0.001;
/** A scan from a named reset that meets only 429s this long stops: the reset was not near the turn. */
const NAMED_SCAN_MAX_MS = 2_000;
/** ...and one from a reset that had passed, this long (the turn was due within a second). */
const LATE_SCAN_MAX_MS = 1_200;
/** Whole seconds, the unit of a named reset and of the windows guessed around it. */
const SECOND_MS = 1_000;
/**
 * A whole-second guess goes this share of a round trip after the turn it stands for: the
 * window's first request reached the API up to a round trip after it was sent, the guess may
 * reach it sooner.
 */
const GUESS_GUARD_TRIPS = 0.5;
/** The guard before a round trip is known. */
const DEFAULT_GUARD_MS = 50;
/** Round-trip samples weigh this much in the average. */
const TRIP_WEIGHT = 0.2;

/** How a turn was planned. */
type TurnKind =
  /** Probes a second apart, no reset known. */
  | 'probe'
  /** At a reset the answers named. */
  | 'answers'
  /** From a reset a 429 named. */
  | 'named'
  /** From what the learner learnt. */
  | 'learnt';

/** A window's turn: the requests that go from `from`, one each `step` ms (0: all that wait). */
interface Turn {
  kind: TurnKind;
  from: number;
  step: number;
  /** Send of the previous window's first request (the learner's offsets start there). */
  after: number | undefined;
  /** The latest send of the turn. */
  lastSentAt: number;
  /** The latest send of the turn refused. */
  refused?: number;
  /** The latest send of the turn that met the old window (refused, or let through into it). */
  early?: number;
  /** The first send let through into the new window. */
  admitted?: number;
  /** When an answer showed the new window: the turn is over (later answers may still move `admitted`). */
  seenAt?: number;
  /** A turn with step 0 let all go (the window is taken as open). */
  opened?: boolean;
  /** A named turn scanned from when a 429 said its reset had passed: it cannot prove the reset exact. */
  late?: boolean;
  /** A named turn: the reset named. */
  named?: number;
  /** Seen before it began: a request sent earlier opened the new window. */
  beforePlan?: boolean;
  /** A named turn: where it is tried before its scan, ascending (the whole-second guesses and the named reset). */
  points?: number[];
}

export class WindowQuota {
  /** Requests a window allows, once an answer said. */
  private limit: number | undefined;
  /** Requests the client may still send in this window; undefined: nothing said (no constraint). */
  private left: number | undefined;
  /** The lowest `Remaining` an answer of this window carried: a rise well above it means a new window. */
  private lastRemaining: number | undefined;
  /** When the window resets (the limiter's clock); undefined: not said. */
  private resetAt: number | undefined;
  /** Whether `resetAt` was named by a 429 (Laravel) rather than by answers that let the request through. */
  private resetNamedByRefusal = false;
  /** Whether the reset a 429 named had passed already (`resetAt` is then when the 429 came). */
  private namedResetPassed = false;
  /** Whether a 429 whose reset has passed means a turn within the second (not once such a scan found none). */
  private passedResetsHelp = true;
  /** Send of the current window's first request. */
  private openedAt: number | undefined;
  /** Whether `openedAt` is known to be the request that opened the window (not just the first answered). */
  private openerKnown = false;
  /** Where a turn from the reset a 429 named is tried first (the whole-second guesses, the reset). */
  private namedPoints: number[] | undefined;
  /** The average time from a request's send to its answer, ms. */
  private roundTripMs: number | undefined;
  /** The limit the facts this quota started from were learnt under: another one drops them. */
  private factsLimit: number | undefined;
  /** The turn that opened the current window, or the one under way. */
  private turn: Turn | undefined;
  private readonly learner = new TurnLearner();

  /** `facts`: what an earlier run learnt of the API's windows (window-facts.ts), a hint until an answer agrees. */
  constructor(facts?: WindowFacts) {
    if (facts === undefined) return;
    this.factsLimit = facts.limit;
    this.learner.restore(facts);
  }

  /** What was learnt of the API's windows (undefined until a turn is learnt), to start the next run from. */
  facts(): WindowFacts | undefined {
    const learnt = this.learner.learnt();
    const limit = this.limit ?? this.factsLimit;
    if (learnt === undefined || limit === undefined) return undefined;
    return { limit, ...learnt, source: 'headers' };
  }

  /**
   * An answer's fields, read at `now`, for the request sent at `sentAt`, when `othersInFlight`
   * other requests were out: they may not be counted in its `Remaining` yet, so they are taken
   * off it.
   */
  observe(info: RateLimitInfo, now: number, othersInFlight: number, sentAt = now): void {
    this.roll(now);
    this.tripTook(now - sentAt);
    this.limitSaid(info.limit);
    if (info.resetInMs !== undefined && info.resetInMs > 0) {
      // Delays are whole seconds, rounded up by most servers: the earliest bound is the tightest.
      const at = now + info.resetInMs;
      this.resetAt = this.resetAt === undefined ? at : Math.min(this.resetAt, at);
      this.resetNamedByRefusal = false;
    }
    if (info.remaining === undefined) return;
    const turn = this.turn;
    const ofTurn = turn !== undefined && sentAt >= turn.from;
    // The window before the turn's, once the turn is seen or has let all go at a named reset.
    if (turn !== undefined && !ofTurn && (turn.seenAt !== undefined || this.lastRemaining === undefined))
      return;
    const newWindow = this.isNewWindow(
      info.remaining,
      now,
      othersInFlight,
      ofTurn && turn.kind === 'probe',
      sentAt,
    );
    const opener = newWindow && this.answersOpener(info.remaining);
    if (opener && (turn === undefined || turn.seenAt !== undefined)) {
      this.openedAt = sentAt;
      this.openerKnown = true;
    } else if (turn === undefined) this.openedAt = Math.min(this.openedAt ?? sentAt, sentAt);
    else if (!ofTurn) {
      // The window the turn is waited for from: counted as usual. Unless it is a new one: a
      // request sent before the turn (into what the old window had left) reached the API after
      // the old one ended and opened it. The turn is over, and says nothing of where it was.
      if (newWindow && turn.seenAt === undefined) {
        turn.seenAt = now;
        turn.admitted = sentAt;
        turn.beforePlan = true;
        this.openedAt = sentAt;
        this.openerKnown = opener;
      }
    } else if (turn.seenAt === undefined && !newWindow) {
      // Let through into the old window, which had some left: the turn had not come.
      turn.early = Math.max(turn.early ?? sentAt, sentAt);
      return;
    } else if (turn.seenAt === undefined || sentAt < (turn.admitted ?? sentAt)) {
      turn.seenAt ??= now;
      turn.admitted = sentAt;
      this.openedAt = sentAt;
      this.openerKnown = true;
    }
    const lastRemaining = newWindow ? info.remaining : Math.min(this.lastRemaining ?? 0, info.remaining);
    this.lastRemaining = lastRemaining;
    const left = info.remaining - othersInFlight;
    // With nothing else out, the lowest Remaining of the window is what it has left (answers
    // overtake one another, but each request was counted once before its answer went).
    if (othersInFlight === 0) this.left = lastRemaining;
    else this.left = newWindow || this.left === undefined ? left : Math.min(this.left, left);
  }

  /**
   * Whether `remaining` belongs to a window after the one seen so far. Never before a reset the
   * API named. Otherwise `Remaining` only rises at a reset, but answers overtake one another:
   * except for a probe's answer, or the answer to a window's first request (Limit - 1, sent
   * after the current window's first), only a rise more than reordering explains counts.
   */
  private isNewWindow(
    remaining: number,
    now: number,
    othersInFlight: number,
    probe: boolean,
    sentAt: number,
  ): boolean {
    if (this.lastRemaining === undefined) return true;
    if (this.resetAt !== undefined && now < this.resetAt) return false;
    if (this.answersOpener(remaining) && sentAt > (this.openedAt ?? Number.NEGATIVE_INFINITY)) return true;
    // A probe goes alone, once every answer is in: nothing overtakes its answer.
    const limit = this.limit ?? 0;
    const slack = probe ? 0 : Math.min(Math.max(REORDER_SLACK, REORDER_SHARE * limit), limit / 2);
    return remaining > this.lastRemaining + othersInFlight + slack;
  }

  /** Whether `remaining` is the answer to a window's first request: only it is answered Limit - 1. */
  private answersOpener(remaining: number): boolean {
    return this.limit !== undefined && this.limit > 1 && remaining === this.limit - 1;
  }

  /**
   * A 429 that carried rate-limit fields, for the request sent at `sentAt`: the window is spent
   * until the reset it names (`info.resetInMs`, else `retryInMs` if said).
   */
  refused(info: RateLimitInfo, now: number, retryInMs: number | undefined, sentAt = now): void {
    this.roll(now);
    this.tripTook(now - sentAt);
    this.limitSaid(info.limit);
    const turn = this.turn;
    if (turn !== undefined && sentAt < (turn.seenAt ?? Number.POSITIVE_INFINITY)) {
      if (sentAt >= turn.from) this.refusedInTurn(turn, sentAt);
      // Sent before the new window was known: it says nothing of that window.
      if (turn.seenAt !== undefined) return;
    }
    this.left = 0;
    this.lastRemaining = 0;
    // Once the turn is learnt, a whole-second reset named by a 429 is no better than what was learnt.
    if (this.learner.plan() !== undefined) return;
    const resetInMs = info.resetInMs ?? retryInMs;
    // A guess before the reset a named turn was started from, refused: the turn goes on to its
    // next point (the reset named again is that one).
    const named = turn?.kind === 'named' && turn === this.turn ? turn.named : undefined;
    if (named !== undefined && sentAt >= (turn?.from ?? 0) && now + (resetInMs ?? 0) <= named + SECOND_MS)
      return;
    if (resetInMs !== undefined && resetInMs > 0) {
      this.resetAt = Math.max(this.resetAt ?? 0, now + resetInMs);
      this.resetNamedByRefusal = true;
      this.namedResetPassed = false;
      this.namedPoints = this.guessesAround(this.resetAt);
    } else if (resetInMs !== undefined && this.passedResetsHelp && this.probing()) {
      // The reset it names has come and the window runs on (Laravel on Redis): the turn comes
      // within a second of that whole second. Scanned from now.
      this.resetAt = now;
      this.resetNamedByRefusal = true;
      this.namedResetPassed = true;
      this.namedPoints = undefined;
    }
  }

  /**
   * Where to try the turn of the reset `reset` a 429 named, before scanning from it: a window
   * counted from its first request and lasting whole seconds turns a whole number of seconds
   * after that request reached the API, so just before the named reset if the API rounds it up,
   * just after if it rounds it down (window-turn.ts). Each guess keeps a guard above the turn it
   * stands for. Only the named reset, when the window's first request is not known or the
   * guesses are not to be tried (they missed a turn; named resets proved exact).
   */
  private guessesAround(reset: number): number[] | undefined {
    const anchor = this.openedAt;
    if (anchor === undefined || !this.openerKnown || !this.learner.guessWholeSeconds) return undefined;
    const seconds = (reset - anchor) / SECOND_MS;
    if (seconds < 1) return undefined;
    const guard = this.guardMs();
    // (The most whole seconds below the named reset, and the fewest at or above it.)
    const before = anchor + (Math.ceil(seconds) - 1) * SECOND_MS + guard;
    const after = anchor + Math.ceil(seconds) * SECOND_MS + guard;
    return [...(before < reset ? [before] : []), reset, ...(after > reset ? [after] : [])];
  }

  /** Room a guess keeps above the turn it stands for. */
  private guardMs(): number {
    return this.roundTripMs === undefined ? DEFAULT_GUARD_MS : GUESS_GUARD_TRIPS * this.roundTripMs;
  }

  private tripTook(ms: number): void {
    if (!(ms > 0)) return;
    this.roundTripMs =
      this.roundTripMs === undefined ? ms : this.roundTripMs + TRIP_WEIGHT * (ms - this.roundTripMs);
  }

  /** Whether the window is spent and probed for its reset (no reset known, no scan under way). */
  private probing(): boolean {
    const turn = this.turn;
    return (
      this.resetAt === undefined && (turn === undefined || turn.seenAt !== undefined || turn.kind === 'probe')
    );
  }

  /** A request of a turn under way was refused: the turn had not come when it arrived. */
  private refusedInTurn(turn: Turn, sentAt: number): void {
    turn.refused = Math.max(turn.refused ?? sentAt, sentAt);
    turn.early = Math.max(turn.early ?? sentAt, sentAt);
    const offset = turn.after === undefined ? undefined : sentAt - turn.after;
    if (turn.kind === 'learnt' && offset !== undefined && this.learner.refusedTooLate(offset)) {
      // Far past the learnt turn: the window changed. Learnt afresh from the next named reset.
      this.learner.forget();
      this.turn = undefined;
    } else if (
      turn.kind === 'named' &&
      sentAt - (turn.named ?? turn.from) > (turn.late ? LATE_SCAN_MAX_MS : NAMED_SCAN_MAX_MS)
    ) {
      // Probes, as when nothing is known.
      this.turn = undefined;
      if (turn.late) this.passedResetsHelp = false;
    } else if (turn.step === 0) {
      // All went too early: scan from here rather than send the rest into more 429s.
      turn.step = turn.kind === 'learnt' ? this.learner.fineStepMs : COARSE_STEP_MS;
    }
  }

  /** A request went out. */
  spend(now: number): void {
    this.roll(now);
    if (this.left !== undefined) this.left -= 1;
    const turn = this.turn;
    if (turn !== undefined && turn.seenAt === undefined && now >= turn.from) turn.lastSentAt = now;
  }

  /**
   * Until when requests are held back: -Infinity while the window has requests left; with it
   * spent, its reset, or the next request of its turn (+Infinity while a probe is out).
   */
  heldUntil(now: number, inFlight: number): number {
    this.roll(now);
    if (this.left === undefined || this.left > 0) return Number.NEGATIVE_INFINITY;
    if (this.resetAt !== undefined) return this.namedPoints?.[0] ?? this.resetAt;
    const under = (this.turn?.seenAt === undefined ? this.turn : undefined) ?? this.beginTurn(now);
    if (under.kind === 'probe') {
      // One at a time, to meet a 429 that names the reset; a second after one that named none.
      if (inFlight > 0) return Number.POSITIVE_INFINITY;
      return Math.max(under.from, (under.refused ?? Number.NEGATIVE_INFINITY) + under.step);
    }
    if (under.step > 0) {
      const point = under.points?.find((at) => at > under.lastSentAt);
      return point ?? Math.max(under.from, under.lastSentAt + under.step);
    }
    if (!under.opened) return under.from;
    // All went and none of their answers showed a new window yet: wait for them, then probe.
    return inFlight > 0 ? Number.POSITIVE_INFINITY : under.lastSentAt + PROBE_INTERVAL_MS;
  }

  /** The window is spent and no turn is under way: plan the next (the learner is told the last). */
  private beginTurn(now: number): Turn {
    this.learnFrom(this.turn);
    const plan = this.openedAt === undefined || !this.openerKnown ? undefined : this.learner.plan();
    if (plan !== undefined && this.openedAt !== undefined) {
      return this.startTurn('learnt', this.openedAt + plan.from, plan.step);
    }
    // (From just after now: a request granted now, before this, was of the window spent.)
    return this.startTurn('probe', now + SAME_INSTANT_MS, PROBE_INTERVAL_MS);
  }

  private startTurn(kind: TurnKind, from: number, step: number): Turn {
    const turn: Turn = { kind, from, step, after: this.openedAt, lastSentAt: Number.NEGATIVE_INFINITY };
    this.turn = turn;
    return turn;
  }

  /** A turn seen whole (the next window is spent): what it says of where windows turn. */
  private learnFrom(turn: Turn | undefined): void {
    if (turn?.admitted === undefined || turn.after === undefined || turn.beforePlan) return;
    const seen = {
      early: turn.early === undefined ? undefined : turn.early - turn.after,
      admitted: turn.admitted - turn.after,
    };
    if (turn.kind === 'named') this.learnFromNamed(turn, seen);
    else if (turn.kind === 'learnt') this.learner.afterPlanned(seen);
  }

  /**
   * A named turn: met at a whole-second guess (the first one let through was sent at a guess,
   * before the named reset or after it with the reset refused), at the reset (exact: nothing
   * sent from it on met the old window), or by the scan after them.
   */
  private learnFromNamed(turn: Turn, seen: { early: number | undefined; admitted: number }): void {
    const named = turn.named ?? turn.from;
    const admitted = turn.admitted ?? named;
    const early = turn.early ?? Number.NEGATIVE_INFINITY;
    const exact = !turn.late && admitted >= named && early < named;
    const guesses = turn.points?.filter((at) => at !== named) ?? [];
    const atGuess = guesses.some((at) => admitted >= at && admitted < at + COARSE_STEP_MS && early < at);
    if (atGuess && !exact) this.learner.afterGuess(seen, this.guardMs());
    else {
      if (guesses.length > 0 && !exact) this.learner.guessesMissedTurn();
      this.learner.afterNamedReset(seen, exact);
    }
  }

  /** A limit other than the one known: the API changed it, and what was learnt of its windows goes. */
  private limitSaid(limit: number | undefined): void {
    if (limit === undefined) return;
    const known = this.limit ?? this.factsLimit;
    this.factsLimit = undefined;
    if (known !== undefined && limit !== known) {
      this.learner.forget();
      // The turn planned or seen under the old limit, and where its window opened, teach nothing now.
      this.turn = undefined;
      this.openedAt = undefined;
      this.openerKnown = false;
      this.namedPoints = undefined;
      this.passedResetsHelp = true;
    }
    this.limit = limit;
  }

  /**
   * Past the reset, or past a learnt turn that lets all go: a new window with the whole limit
   * (or unknown until an answer says). A reset a 429 named is scanned from, unless such resets
   * have proved exact.
   */
  private roll(now: number): void {
    const turn = this.turn;
    if (
      turn !== undefined &&
      turn.seenAt === undefined &&
      turn.step === 0 &&
      !turn.opened &&
      now >= turn.from
    ) {
      // All may go; an answer that shows the new window is still needed to see it (the old one
      // may have had some left, and the first requests may meet it).
      turn.opened = true;
      this.left = this.limit;
    }
    const points = this.resetNamedByRefusal ? this.namedPoints : undefined;
    if (this.resetAt === undefined || now < (points?.[0] ?? this.resetAt)) return;
    const at = this.resetAt;
    this.resetAt = undefined;
    this.namedPoints = undefined;
    if (!this.resetNamedByRefusal) {
      this.startTurn('answers', at, 0).opened = true;
      this.open();
      return;
    }
    this.learnFrom(turn?.seenAt === undefined ? undefined : turn);
    const exact = this.learner.namedResetsExact === true && !this.namedResetPassed;
    const named = this.startTurn('named', points?.[0] ?? at, exact ? 0 : COARSE_STEP_MS);
    named.late = this.namedResetPassed;
    named.named = at;
    if (points !== undefined) named.points = points;
    if (exact) {
      named.opened = true;
      this.open();
    }
  }

  private open(): void {
    this.left = this.limit;
    this.lastRemaining = undefined;
  }
}
