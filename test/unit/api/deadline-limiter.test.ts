import { describe, expect, it, vi } from 'vitest';
import { DeadlineWaitError, limiterUntil } from '../../../shared/api/deadline-limiter.js';
import type { RateLimiter, Release } from '../../../shared/api/limiter.js';

/** A limiter whose grants the test hands out by hand, counting the slots given back. */
function manualLimiter() {
  const waiting: ((release: Release) => void)[] = [];
  let returned = 0;
  const limiter: RateLimiter = {
    acquire: () => new Promise<Release>((resolve) => waiting.push(resolve)),
    onSuccess: () => {},
    onThrottle: () => {},
    currentRate: () => 10,
  };
  const grant = () => {
    const release = Object.assign(() => void returned++, { sentAt: 0 });
    waiting.shift()?.(release);
  };
  return { limiter, grant, returned: () => returned, waiting: () => waiting.length };
}

describe('a limiter that stops granting at a deadline', () => {
  it('passes grants through before the deadline', async () => {
    const inner = manualLimiter();
    const limiter = limiterUntil(inner.limiter, () => 1_000);

    const slot = limiter.acquire(5_000);
    inner.grant();

    const release = await slot;
    release();
    expect(inner.returned()).toBe(1);
  });

  it('refuses at once, without asking for a slot, once the deadline has passed', async () => {
    const inner = manualLimiter();
    const limiter = limiterUntil(inner.limiter, () => 0);

    await expect(limiter.acquire(5_000)).rejects.toBeInstanceOf(DeadlineWaitError);
    expect(inner.waiting()).toBe(0);
  });

  it('refuses a caller still waiting when the deadline comes, and gives its slot back when it is granted', async () => {
    vi.useFakeTimers();
    try {
      const inner = manualLimiter();
      const limiter = limiterUntil(inner.limiter, () => 1_000);
      const slot = limiter.acquire(5_000);
      const refused = expect(slot).rejects.toBeInstanceOf(DeadlineWaitError);

      await vi.advanceTimersByTimeAsync(1_000);
      await refused;
      inner.grant();
      await Promise.resolve();

      expect(inner.returned()).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
