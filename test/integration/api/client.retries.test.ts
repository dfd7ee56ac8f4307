import { describe, expect, it } from 'vitest';
import { TransientApiError } from '../../../shared/errors.js';
import { listPage, reportData, verifyAnswer } from '../../unit/api/fixtures.js';
import { API, collect, harness } from './harness.js';
import { errorReply, type Reply } from './server.js';

const REPORT = `${API}/campaigns/1/jobs/2/report`;
const ok: Reply = { body: { data: reportData(2) } };

/** Answers `faults` in order, then `then`. */
function scripted(faults: Reply[], then: Reply = ok) {
  return (req: { nth: number }) => faults[req.nth - 1] ?? then;
}

describe('IntegrationApiClient retries', () => {
  const faults: [string, Reply][] = [
    ['a 500 with an HTML body', { status: 500, body: '<html><body>Internal Server Error</body></html>' }],
    ['a 502', { status: 502, body: '<html>Bad Gateway</html>' }],
    ['a 503', { status: 503, body: '' }],
    ['a connection reset', { reset: true }],
    ['a body cut short', { truncate: true, body: { data: reportData(2) } }],
    ['a 200 that is not JSON', { status: 200, body: '<html>maintenance</html>' }],
    ['a 429 without Retry-After', errorReply(429, 'RATE_LIMIT_EXCEEDED', 'Too many requests.')],
  ];
  for (const [name, fault] of faults) {
    it(`retries ${name} and then returns the report`, async () => {
      const { client, server, events } = await harness(scripted([fault, fault]));

      const outcome = await client.getReport(1, 2);

      expect(outcome.kind).toBe('ok');
      expect(server.requests).toHaveLength(3);
      expect(events.map((e) => e.attempt)).toEqual([1, 2, 3]);
      expect(events[0]?.retryInMs).toBeGreaterThanOrEqual(0);
      expect(events[2]).toMatchObject({ status: 200, path: REPORT });
      expect(client.stats()).toMatchObject({ total: 3, retried: 2 });
    });
  }

  it('retries a request that outlives its deadline', async () => {
    const { client, events } = await harness(scripted([{ ...ok, delayMs: 1_000 }]), {
      requestTimeoutMs: 100,
    });

    const outcome = await client.getReport(1, 2);

    expect(outcome.kind).toBe('ok');
    expect(events[0]).toMatchObject({ status: 'error', attempt: 1 });
    expect(events[0]?.detail).toMatch(/timeout/);
    expect(client.stats().byStatus).toEqual({ error: 1, '200': 1 });
  });

  it('waits the Retry-After seconds of a 429 before retrying', async () => {
    const throttled = {
      ...errorReply(429, 'RATE_LIMIT_EXCEEDED', 'Too many requests.'),
      headers: { 'retry-after': '3' },
    };
    const { client, clock, events } = await harness(scripted([throttled]));

    await client.verify().catch(() => undefined);

    expect(clock.sleeps[0]).toBe(3_000);
    expect(events[0]).toMatchObject({ status: 429, retryInMs: 3_000 });
  });

  it('waits until the HTTP-date of a Retry-After', async () => {
    const { client, clock } = await harness((req) =>
      req.nth === 1
        ? {
            status: 429,
            body: '',
            headers: { 'retry-after': new Date(clock.wallNow() + 10_000).toUTCString() },
          }
        : { body: verifyAnswer() },
    );

    await client.verify();

    // toUTCString drops the milliseconds: the wait is within one second of 10 s.
    expect(clock.sleeps[0]).toBeGreaterThan(8_900);
    expect(clock.sleeps[0]).toBeLessThanOrEqual(10_000);
  });

  it('backs off exponentially with full jitter when no Retry-After is sent', async () => {
    const fault: Reply = { status: 503, body: '' };
    const { client, clock } = await harness(scripted([fault, fault, fault, fault]), {
      random: () => 0.999,
      retry: { baseDelayMs: 100, maxDelayMs: 500 },
    });

    await client.getReport(1, 2);

    expect(clock.sleeps).toEqual([99, 199, 399, 499]);
  });

  it('ends the call as a retryable failure when Retry-After exceeds maxRetryAfterMs', async () => {
    const throttled = { status: 429, body: '', headers: { 'retry-after': '30' } };
    const { client, server } = await harness(() => throttled, { retry: { maxRetryAfterMs: 5_000 } });

    const outcome = await client.getReport(1, 2);
    const listing = await collect(client.campaigns()).catch((e: unknown) => e);

    expect(outcome).toMatchObject({ kind: 'failed', retryable: true });
    if (outcome.kind === 'failed')
      expect(outcome.error).toMatchObject({ name: 'TransientApiError', retryAfterMs: 30_000, status: 429 });
    expect(listing).toBeInstanceOf(TransientApiError);
    // The listing is not sent: a Retry-After of more than a second holds every request (a fixed
    // window, not a token bucket), longer than the caller waits, so it fails at once.
    expect(server.requests).toHaveLength(1);
  });

  it('gives up after maxAttempts: lists and verify throw TransientApiError, getReport returns failed', async () => {
    const { client, server } = await harness(() => ({ status: 502, body: '<html>Bad Gateway</html>' }), {
      retry: { maxAttempts: 3 },
    });

    const verify = await client.verify().catch((e: unknown) => e);
    const list = await collect(client.jobs(1)).catch((e: unknown) => e);
    const outcome = await client.getReport(1, 2);

    expect(verify).toBeInstanceOf(TransientApiError);
    expect(verify).toMatchObject({ status: 502, retryable: true });
    expect((verify as Error).message).toMatch(/HTTP 502.*3 attempts/);
    expect(list).toBeInstanceOf(TransientApiError);
    expect(outcome).toMatchObject({ kind: 'failed', retryable: true });
    expect(server.requests).toHaveLength(9);
    expect(client.stats()).toEqual({ total: 9, retried: 6, byStatus: { '502': 9 } });
  });

  it('gives up when the next backoff would end after maxElapsedMs', async () => {
    const { client, server } = await harness(() => ({ status: 503, body: '' }), {
      random: () => 0.999,
      retry: { baseDelayMs: 1_000, maxElapsedMs: 2_500, maxAttempts: 20 },
    });

    const error = await client.verify().catch((e: unknown) => e);

    // Sleeps of 999 and 1999 ms: the second would end past 2.5 s, so only two requests go.
    expect(error).toBeInstanceOf(TransientApiError);
    expect(server.requests).toHaveLength(2);
  });

  it('counts no-answer requests as "error" and reports it to onEvent', async () => {
    const { client, events } = await harness(
      scripted([{ reset: true }, { status: 500, body: '' }], { body: verifyAnswer() }),
    );

    await client.verify();

    expect(client.stats()).toEqual({ total: 3, retried: 2, byStatus: { error: 1, '500': 1, '200': 1 } });
    expect(events.map((e) => e.status)).toEqual(['error', 500, 200]);
    expect(events.every((e) => e.method === 'GET' && typeof e.durationMs === 'number')).toBe(true);
  });

  it('retries a list page whose envelope is invalid, then throws a clear error', async () => {
    const broken: Reply = { body: { data: [{ id: 1 }] } };
    const healed = await harness(scripted([broken], { body: listPage([{ id: 1 }], 1, 1) }));
    await expect(collect(healed.client.campaigns())).resolves.toHaveLength(1);
    expect(healed.server.requests).toHaveLength(2);

    const { client } = await harness(() => broken, { retry: { maxAttempts: 2 } });
    const error = await collect(client.campaigns()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientApiError);
    expect((error as Error).message).toMatch(/invalid list page: meta/);
  });
});
