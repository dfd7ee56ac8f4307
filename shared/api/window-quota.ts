/**
 * The API's own account of its rate limit, when its answers carry one (rate-limit-headers.ts):
 * how many requests the current window has left and when it resets. The limiter sends no
 * request the API has said it will refuse: with the window spent, it waits for the reset.
 *
 * Laravel's `throttle` says `Remaining` on every answer but when the window resets only on a
 * 429. A spent window whose reset is unknown lets one request out at a time (a probe, a second
 * apart): its 429 names the reset, so such an API refuses one request per window, not a burst.
 */
import type { RateLimitInfo } from './rate-limit-headers.js';

/** A spent window with no known reset lets one probe out this often. */
const PROBE_INTERVAL_MS = 1_000;
/** A rise of `Remaining` by more than this (requests, or share of the limit) is a new window. */
const REORDER_SLACK = 8;
const REORDER_SHARE = 0.1;

export class WindowQuota {
  /** Requests a window allows, once an answer said. */
  private limit: number | undefined;
  /** Requests the client may still send in this window; undefined: nothing said (no constraint). */
  private left: number | undefined;
  /** The highest `Remaining` an answer of this window carried: a higher one means a new window. */
  private lastRemaining: number | undefined;
  /** When the window resets (the limiter's clock); undefined: not said. */
  private resetAt: number | undefined;
  private nextProbeAt = Number.NEGATIVE_INFINITY;

  /**
   * An answer's fields, read at `now`, when `othersInFlight` other requests were out: they may
   * not be counted in its `Remaining` yet, so they are taken off it.
   */
  observe(info: RateLimitInfo, now: number, othersInFlight: number): void {
    this.roll(now);
    if (info.limit !== undefined) this.limit = info.limit;
    if (info.resetInMs !== undefined && info.resetInMs > 0) {
      // Delays are whole seconds, rounded up by most servers: the earliest bound is the tightest.
      const at = now + info.resetInMs;
      this.resetAt = this.resetAt === undefined ? at : Math.min(this.resetAt, at);
    }
    if (info.remaining === undefined) return;
    const newWindow = this.isNewWindow(info.remaining, now, othersInFlight);
    const left = info.remaining - othersInFlight;
    this.left = newWindow || this.left === undefined ? left : Math.min(this.left, left);
    this.lastRemaining = newWindow ? info.remaining : Math.min(this.lastRemaining ?? 0, info.remaining);
  }

  /**
   * Whether `remaining` belongs to a window after the one seen so far. Never before a reset the
   * API named. Otherwise `Remaining` only rises at a reset, but answers overtake one another:
   * while the window has requests left, only a rise more than reordering explains counts.
   */
  private isNewWindow(remaining: number, now: number, othersInFlight: number): boolean {
    if (this.lastRemaining === undefined) return true;
    if (this.resetAt !== undefined && now < this.resetAt) return false;
    const slack = (this.left ?? 0) > 0 ? Math.max(REORDER_SLACK, REORDER_SHARE * (this.limit ?? 0)) : 0;
    return remaining > this.lastRemaining + othersInFlight + slack;
  }

  /** A 429 that carried rate-limit fields: the window is spent until `retryInMs` (if said). */
  refused(now: number, retryInMs: number | undefined): void {
    this.left = 0;
    this.lastRemaining = 0;
    if (retryInMs !== undefined && retryInMs > 0) this.resetAt = Math.max(this.resetAt ?? 0, now + retryInMs);
  }

  /** A request went out. */
  spend(now: number): void {
    this.roll(now);
    if (this.left !== undefined) this.left -= 1;
    if (this.left !== undefined && this.left < 0) this.nextProbeAt = now + PROBE_INTERVAL_MS;
  }

  /**
   * Until when requests are held back: -Infinity while the window has requests left, its reset
   * when spent, the next probe when spent with no reset said (+Infinity while one is out).
   */
  heldUntil(now: number, inFlight: number): number {
    this.roll(now);
    if (this.left === undefined || this.left > 0) return Number.NEGATIVE_INFINITY;
    if (this.resetAt !== undefined) return this.resetAt;
    if (inFlight > 0) return Number.POSITIVE_INFINITY;
    return this.nextProbeAt;
  }

  /** Past the reset: a new window with the whole limit (or unknown until an answer says). */
  private roll(now: number): void {
    if (this.resetAt === undefined || now < this.resetAt) return;
    this.resetAt = undefined;
    this.left = this.limit;
    this.lastRemaining = undefined;
  }
}
