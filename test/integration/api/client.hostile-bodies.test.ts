/**
 * Answers that would hold the client forever or fill its memory: a body that never ends, one
 * announced far larger than the limit, one that drips or goes silent. The client ends each
 * within its size limit or its deadline, whatever the server does.
 */
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { IntegrationApiClient } from '../../../shared/api/client.js';
import { httpGet } from '../../../shared/api/http.js';
import { ApiError, ConfigError } from '../../../shared/errors.js';
import { listPage, reportData, verifyAnswer } from '../../unit/api/fixtures.js';
import { API, collect, harness } from './harness.js';
import type { Reply } from './server.js';

const MIB = 1024 * 1024;
const REPORT = `${API}/campaigns/1/jobs/2/report`;
/** Large enough that a body read whole would show, small enough to read in a blink. */
const LIMIT = 16 * MIB;
/** Far longer than any of these calls may take: ending before it proves the size limit ended it. */
const SLOW_DEADLINE_MS = 10_000;
const ONE_ATTEMPT = { retry: { maxAttempts: 1 } };

/** The bytes a server managed to hand to its socket before the client went away. */
interface Sent {
  bytes: number;
}

/**
 * A 200 whose body never ends (or ends after `announce` bytes, which it announces), written as
 * fast as the client takes it: `sent` counts what left the server.
 */
function firehose(sent: Sent, announce?: number, status = 200): Reply {
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  return {
    raw: (res: http.ServerResponse) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (announce !== undefined) headers['content-length'] = String(announce);
      res.writeHead(status, headers);
      res.write('{"data": "');
      const pump = () => {
        while (!res.destroyed) {
          sent.bytes += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
      };
      pump();
    },
  };
}

/** A 200 that announces `length` bytes and sends one every `everyMs`. */
function drip(length: number, everyMs: number): Reply {
  return {
    raw: (res: http.ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(length) });
      const timer = setInterval(() => res.write(' '), everyMs);
      res.on('close', () => clearInterval(timer));
    },
  };
}

/** `body` sent chunked (no Content-Length), so only counting can tell its size. */
function chunked(body: string): Reply {
  return {
    raw: (res: http.ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const half = Math.floor(body.length / 2);
      res.write(body.slice(0, half));
      res.end(body.slice(half));
    },
  };
}

/** A Get Report answer of exactly `bytes` bytes (ASCII), padded with a field the schema ignores. */
function reportOfSize(bytes: number): string {
  const bare = JSON.stringify({ data: reportData(2), padding: '' });
  const padding = 'x'.repeat(bytes - bare.length);
  const body = JSON.stringify({ data: reportData(2), padding });
  expect(Buffer.byteLength(body)).toBe(bytes);
  return body;
}

/** Runs `act`, sampling the process's RSS meanwhile: the peak growth over the start, and the time taken. */
async function measured<T>(act: () => Promise<T>): Promise<{ value: T; rssGrowth: number; ms: number }> {
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 5);
  const startedAt = performance.now();
  try {
    const value = await act();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { value, rssGrowth: peak - before, ms: performance.now() - startedAt };
  } finally {
    clearInterval(sampler);
  }
}

describe('IntegrationApiClient against hostile bodies', () => {
  it('abandons a 200 whose body never ends at the size limit: the report fails, not retried, memory bounded', async () => {
    const sent: Sent = { bytes: 0 };
    const { client, server, events } = await harness(() => firehose(sent), {
      maxBodyBytes: LIMIT,
      requestTimeoutMs: SLOW_DEADLINE_MS,
    });

    const { value: outcome, rssGrowth, ms } = await measured(() => client.getReport(1, 2));

    expect(outcome.kind).toBe('failed');
    if (outcome.kind !== 'failed') return;
    expect(outcome.retryable).toBe(false);
    expect(outcome.error).toBeInstanceOf(ApiError);
    expect(outcome.error.message).toBe(
      `GET ${REPORT}: answer larger than 16 MiB (the --max-body-mb limit; maxBodyMiB in AWS)`,
    );
    expect(outcome.error.status).toBe(200);
    expect(server.requests).toHaveLength(1);
    expect(events).toEqual([
      expect.objectContaining({ status: 200, attempt: 1, detail: expect.stringContaining('16 MiB') }),
    ]);
    expect(client.stats()).toEqual({ total: 1, retried: 0, byStatus: { '200': 1 } });
    expect(sent.bytes).toBeGreaterThan(LIMIT);
    expect(ms).toBeLessThan(SLOW_DEADLINE_MS / 4);
    expect(rssGrowth).toBeLessThan(200 * MIB);
  });

  it('stops reading at the first chunk past the limit', async () => {
    const sent: Sent = { bytes: 0 };
    const { server } = await harness(() => firehose(sent));

    const result = await httpGet(
      new URL(REPORT, server.url),
      {},
      { timeoutMs: SLOW_DEADLINE_MS, maxBodyBytes: LIMIT },
    );

    expect(result).toMatchObject({
      kind: 'too_large',
      status: 200,
      limitBytes: LIMIT,
      announcedBytes: undefined,
    });
    if (result.kind !== 'too_large') return;
    // A socket read brings at most 64 KiB: one chunk past the limit, not one more.
    expect(result.readBytes).toBeGreaterThan(LIMIT);
    expect(result.readBytes).toBeLessThanOrEqual(LIMIT + 64 * 1024);
  });

  it('abandons an answer whose Content-Length is over the limit before reading its body', async () => {
    const sent: Sent = { bytes: 0 };
    const { client, server } = await harness(() => firehose(sent, 1024 * MIB), {
      maxBodyBytes: LIMIT,
      requestTimeoutMs: SLOW_DEADLINE_MS,
    });

    const outcome = await client.getReport(1, 2);
    const result = await httpGet(
      new URL(REPORT, server.url),
      {},
      { timeoutMs: SLOW_DEADLINE_MS, maxBodyBytes: LIMIT },
    );

    expect(outcome).toMatchObject({ kind: 'failed', retryable: false });
    if (outcome.kind !== 'failed') return;
    expect(outcome.error.message).toBe(
      `GET ${REPORT}: answer of 1 GiB announced by Content-Length, larger than 16 MiB (the --max-body-mb limit; maxBodyMiB in AWS)`,
    );
    expect(server.requests).toHaveLength(2);
    // What the server wrote meanwhile sits in socket buffers; the client read none of it.
    expect(result).toMatchObject({
      kind: 'too_large',
      status: 200,
      announcedBytes: 1024 * MIB,
      readBytes: 0,
    });
  });

  for (const [framing, reply] of [
    ['with a Content-Length', (body: string): Reply => ({ body })],
    ['chunked', chunked],
  ] as const) {
    it(`reads a report of exactly the limit and refuses one byte more (${framing})`, async () => {
      const limit = 256 * 1024;
      const bodies = [reportOfSize(limit), reportOfSize(limit + 1)];
      const { client, server } = await harness((req) => reply(bodies[req.nth - 1] ?? ''), {
        maxBodyBytes: limit,
      });

      const atLimit = await client.getReport(1, 2);
      const over = await client.getReport(1, 2);

      expect(atLimit.kind).toBe('ok');
      expect(over).toMatchObject({ kind: 'failed', retryable: false });
      if (over.kind === 'failed') expect(over.error.message).toContain('larger than 256 KiB');
      expect(server.requests).toHaveLength(2);
    });
  }

  it('throws a non-retryable ApiError naming the path and the limit for a list page over the limit', async () => {
    const sent: Sent = { bytes: 0 };
    const { client, server, events } = await harness(
      (req) => (req.query.get('page') === '1' ? { body: listPage([{ id: 1 }], 1, 2, 101) } : firehose(sent)),
      { maxBodyBytes: LIMIT, requestTimeoutMs: SLOW_DEADLINE_MS },
    );

    const error = await collect(client.campaigns()).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      retryable: false,
      status: 200,
      path: `${API}/campaigns?page=2&per_page=100`,
      message: expect.stringContaining('larger than 16 MiB (the --max-body-mb limit'),
    });
    expect((error as Error).message).toContain(`GET ${API}/campaigns?page=2&per_page=100`);
    expect(server.requests).toHaveLength(2);
    expect(events.map((e) => e.status)).toEqual([200, 200]);
  });

  it('throws the same for verify, at the default limit of 64 MiB', async () => {
    const sent: Sent = { bytes: 0 };
    const { client, server } = await harness(() => firehose(sent, 64 * MIB + 1));

    const error = await client.verify().catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      retryable: false,
      message: `GET ${API}/verify: answer of 67108865 bytes announced by Content-Length, larger than 64 MiB (the --max-body-mb limit; maxBodyMiB in AWS)`,
    });
    expect(server.requests).toHaveLength(1);
  });

  it('refuses a size limit that is not a positive whole number', () => {
    for (const maxBodyBytes of [0, -1, 1.5, Number.POSITIVE_INFINITY])
      expect(
        () => new IntegrationApiClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k', maxBodyBytes }),
      ).toThrow(ConfigError);
  });

  it('still retries a 503 whose body never ends: the status decides, the body is dropped', async () => {
    const sent: Sent = { bytes: 0 };
    const { client, server, events } = await harness(
      (req) => (req.nth === 1 ? firehose(sent, undefined, 503) : { body: verifyAnswer() }),
      { maxBodyBytes: LIMIT, requestTimeoutMs: SLOW_DEADLINE_MS },
    );

    await expect(client.verify()).resolves.toEqual({ companyName: 'Acme Retail' });
    expect(server.requests).toHaveLength(2);
    expect(events[0]).toMatchObject({ status: 503, detail: 'HTTP 503' });
  });

  const DEADLINE_MS = 500;
  /** Scheduling slack over the deadline on a busy machine. */
  const SLACK_MS = 400;
  const hangs: [string, Reply][] = [
    ['drips one byte every 100 ms', drip(1_000, 100)],
    [
      'sends its headers and goes silent',
      {
        raw: (res) => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
          res.flushHeaders();
        },
      },
    ],
  ];
  for (const [name, reply] of hangs) {
    it(`ends a body that ${name} as a timeout at the deadline`, async () => {
      const { client, events } = await harness(() => reply, {
        requestTimeoutMs: DEADLINE_MS,
        ...ONE_ATTEMPT,
      });

      const { value: outcome, ms } = await measured(() => client.getReport(1, 2));

      expect(outcome).toMatchObject({ kind: 'failed', retryable: true });
      expect(events).toEqual([
        expect.objectContaining({
          status: 'error',
          detail: expect.stringMatching(/^timeout: no complete answer within 500 ms/),
        }),
      ]);
      expect(ms).toBeGreaterThanOrEqual(DEADLINE_MS - 5);
      expect(ms).toBeLessThan(DEADLINE_MS + SLACK_MS);
    });
  }
});
