import { describe, expect, it } from 'vitest';
import { WindowQuota } from '../../../shared/api/window-quota.js';

const OPEN = Number.NEGATIVE_INFINITY;

/** Sends `n` requests at `now` (spending the window). */
function send(quota: WindowQuota, now: number, n: number): void {
  for (let i = 0; i < n; i += 1) quota.spend(now);
}

describe('WindowQuota', () => {
  it('holds nothing back before an answer says anything', () => {
    const quota = new WindowQuota();
    send(quota, 0, 1000);
    expect(quota.heldUntil(0, 0)).toBe(OPEN);
  });

  it('holds requests back from the moment the window is spent until its reset', () => {
    const quota = new WindowQuota();
    quota.spend(0);
    quota.observe({ limit: 5, remaining: 4, resetInMs: 10_000 }, 100, 0);
    send(quota, 200, 3);
    expect(quota.heldUntil(200, 3)).toBe(OPEN);
    quota.spend(300); // the fifth: the window is spent
    expect(quota.heldUntil(300, 4)).toBe(10_100);
    // At the reset the whole limit is there again, before any answer says so.
    expect(quota.heldUntil(10_100, 0)).toBe(OPEN);
    send(quota, 10_100, 5);
    expect(quota.heldUntil(10_100, 5)).toBeGreaterThan(10_100);
  });

  it('takes the requests still in flight off what an answer says is left', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 10, remaining: 3, resetInMs: 5_000 }, 0, 3);
    // 3 left, but 3 others are out and may not be counted yet: nothing more may go.
    expect(quota.heldUntil(0, 3)).toBe(5_000);
  });

  it('keeps the tightest reset of rounded-up delays and ignores answers that overtook others', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 100, remaining: 50, resetInMs: 3_000 }, 0, 0); // at most 3.0 s
    quota.observe({ limit: 100, remaining: 49, resetInMs: 3_000 }, 400, 0); // at most 3.4 s: not tighter
    quota.observe({ limit: 100, remaining: 52, resetInMs: 2_000 }, 900, 0); // an earlier request's answer, late
    send(quota, 900, 49);
    expect(quota.heldUntil(900, 0)).toBe(2_900);
  });

  it('with the window spent and no reset said (Laravel on a 200), lets one probe out at a time', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 3, remaining: 0 }, 0, 0);
    expect(quota.heldUntil(0, 1)).toBe(Number.POSITIVE_INFINITY); // one is out: wait for its answer
    expect(quota.heldUntil(0, 0)).toBeLessThan(1); // none out: the probe may go (now)
    quota.spend(1);
    // Its 429 names no reset: the next probe a second later.
    quota.refused({ limit: 3, remaining: 0 }, 10, undefined, 1);
    expect(quota.heldUntil(10, 0)).toBe(1_001);
    quota.spend(1_001);
    // That probe's 429 names the reset: everybody waits for it.
    quota.refused({ limit: 3, remaining: 0, resetInMs: 7_000 }, 1_050, undefined, 1_001);
    expect(quota.heldUntil(1_060, 0)).toBe(8_050);
  });

  it("a probe's 429 whose reset has passed (Laravel on Redis) scans for the turn every 100 ms, not a second apart", () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 3, remaining: 0 }, 0, 0);
    expect(quota.heldUntil(0, 0)).toBeLessThan(1);
    quota.spend(1);
    // The named second has come (Reset in the past, Retry-After 0) and the window runs on.
    quota.refused({ limit: 3, remaining: 0, resetInMs: 0 }, 50, undefined, 1);
    expect(quota.heldUntil(50, 0)).toBe(50);
    quota.spend(50);
    expect(quota.heldUntil(60, 1)).toBe(150); // the next of the scan, its first still out
    quota.refused({ limit: 3, remaining: 0, resetInMs: 0 }, 100, undefined, 50);
    expect(quota.heldUntil(100, 0)).toBe(150); // a refusal of the scan does not start it again
    quota.spend(150);
    quota.observe({ limit: 3, remaining: 2 }, 200, 0, 150); // let through: the new window
    expect(quota.heldUntil(200, 0)).toBe(Number.NEGATIVE_INFINITY);
  });

  it('after a reset the answers named, a late answer of the window before does not spend the new one', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 10, remaining: 0, resetInMs: 1_000 }, 0, 1, 0);
    expect(quota.heldUntil(0, 1)).toBe(1_000);
    expect(quota.heldUntil(1_000, 1)).toBe(OPEN); // the whole limit again
    // The request still out was sent at 0: its answer speaks of the window before.
    quota.spend(1_000);
    quota.observe({ limit: 10, remaining: 0 }, 1_050, 1, 0);
    expect(quota.heldUntil(1_050, 1)).toBe(OPEN);
    quota.observe({ limit: 10, remaining: 9 }, 1_100, 0, 1_000);
    send(quota, 1_100, 8);
    expect(quota.heldUntil(1_100, 0)).toBe(OPEN);
  });

  it('a probe answered 200 opens a new window', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 60, remaining: 0 }, 0, 0);
    quota.spend(0);
    quota.observe({ limit: 60, remaining: 59 }, 100, 0);
    expect(quota.heldUntil(100, 0)).toBe(OPEN);
    send(quota, 100, 58);
    expect(quota.heldUntil(100, 0)).toBe(OPEN);
    quota.spend(100);
    expect(quota.heldUntil(100, 1)).toBe(Number.POSITIVE_INFINITY);
  });

  it('believes a 429 over a Remaining that says there is room, and a reset in the past means none known', () => {
    const quota = new WindowQuota();
    quota.observe({ limit: 100, remaining: 80, resetInMs: 0 }, 0, 0);
    quota.refused({ limit: 100, remaining: 0 }, 0, 4_000);
    expect(quota.heldUntil(0, 0)).toBe(4_000);
    const past = new WindowQuota();
    past.observe({ limit: 100, remaining: 0, resetInMs: 0 }, 0, 0);
    expect(past.heldUntil(0, 0)).toBeLessThan(1); // a probe, not a wait for a reset that is gone
  });
});

describe("WindowQuota: a reset a 429 names, tried at whole seconds from the window's first request", () => {
  /** A window of 3 opened by the request sent at 200 (answered Remaining 2 at 260), spent, and a probe's 429 naming 5,000. */
  function spentAndNamed(): WindowQuota {
    const quota = new WindowQuota();
    quota.spend(200);
    quota.observe({ limit: 3, remaining: 2 }, 260, 0, 200); // the opener: a 60 ms round trip
    send(quota, 300, 2);
    quota.observe({ limit: 3, remaining: 0 }, 360, 0, 300);
    quota.spend(1_000);
    quota.refused({ limit: 3, remaining: 0, resetInMs: 3_940 }, 1_060, undefined, 1_000); // names 5,000
    return quota;
  }

  it('tries just before the named reset first (a reset rounded up), then the reset, then just after it (Redis)', () => {
    const quota = spentAndNamed();
    // 4 whole seconds after the opener, with half a round trip of room (the average trip is 60 ms).
    expect(quota.heldUntil(1_100, 0)).toBe(4_230);
    quota.spend(4_230);
    expect(quota.heldUntil(4_240, 1)).toBe(5_000);
    // Refused: it names the same reset again, and the turn goes on to its next point.
    quota.refused({ limit: 3, remaining: 0, resetInMs: 710 }, 4_290, undefined, 4_230);
    expect(quota.heldUntil(4_300, 0)).toBe(5_000);
    quota.spend(5_000);
    quota.refused({ limit: 3, remaining: 0, resetInMs: 0 }, 5_060, undefined, 5_000);
    expect(quota.heldUntil(5_070, 0)).toBe(5_230); // 5 whole seconds after the opener
  });

  it("a guess before the reset let through is learnt: the next window's first request goes at that offset", () => {
    const quota = spentAndNamed();
    quota.spend(4_230);
    quota.observe({ limit: 3, remaining: 2 }, 4_290, 0, 4_230); // let through: the window turned before 5,000
    send(quota, 4_300, 2);
    quota.observe({ limit: 3, remaining: 0 }, 4_400, 0, 4_300);
    // No probe, no named reset: 4,030 ms after the window's first request, as learnt.
    expect(quota.heldUntil(4_400, 0)).toBe(4_230 + 4_030);
    expect(quota.facts()).toEqual({ limit: 3, turn: 'first-request', offsetMs: 4_030, source: 'headers' });
  });

  it('starts from facts an earlier run learnt, once the first answer shows its request opened the window', () => {
    const facts = { limit: 3, turn: 'first-request', offsetMs: 4_030, source: 'headers' } as const;
    const quota = new WindowQuota(facts);
    quota.spend(100);
    quota.observe({ limit: 3, remaining: 2 }, 160, 0, 100);
    send(quota, 200, 2);
    quota.observe({ limit: 3, remaining: 0 }, 300, 0, 200);
    expect(quota.heldUntil(300, 0)).toBe(4_130);

    // A window another client opened (Remaining below Limit - 1): its turn is not known, probed as usual.
    const joined = new WindowQuota(facts);
    joined.spend(100);
    joined.observe({ limit: 3, remaining: 1 }, 160, 0, 100);
    joined.spend(200);
    joined.observe({ limit: 3, remaining: 0 }, 260, 0, 200);
    expect(joined.heldUntil(300, 0)).toBeLessThan(301);

    // Another limit: the facts are dropped.
    const changed = new WindowQuota(facts);
    changed.observe({ limit: 10, remaining: 9 }, 60, 0, 0);
    expect(changed.facts()).toBeUndefined();
  });
});

describe('WindowQuota: a window opened before its planned turn', () => {
  it('a request sent into what the old window had left, reaching the API after it ended, is the new window', () => {
    const facts = { limit: 3, turn: 'first-request', offsetMs: 1_000, source: 'headers' } as const;
    const quota = new WindowQuota(facts);
    quota.spend(0);
    quota.observe({ limit: 3, remaining: 2 }, 60, 0, 0); // the opener at 0: turn planned at 1,000
    quota.spend(100);
    quota.observe({ limit: 3, remaining: 1 }, 160, 0, 100);
    quota.spend(970); // the last the window has, sent just before the planned turn...
    expect(quota.heldUntil(970, 1)).toBe(1_000);
    send(quota, 1_000, 2); // (the turn planned goes)
    // ...reaches the API after the window ended: it opened the next one.
    quota.observe({ limit: 3, remaining: 2 }, 1_040, 2, 970);
    quota.observe({ limit: 3, remaining: 1 }, 1_045, 1, 1_000);
    quota.observe({ limit: 3, remaining: 0 }, 1_050, 0, 1_000);
    // The next turn is planned from that request, not from the one planned.
    expect(quota.heldUntil(1_060, 0)).toBe(1_970);
  });
});
