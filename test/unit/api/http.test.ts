import { describe, expect, it } from 'vitest';
import { classify, formatBytes, type HttpResult } from '../../../shared/api/http.js';
import { NOT_READY_REASONS } from '../../../shared/api/schemas.js';

const answer = (status: number, body: unknown, retryAfter?: string): HttpResult => ({
  kind: 'answer',
  status,
  body: typeof body === 'string' ? body : JSON.stringify(body),
  headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter },
});
const seconds = (value: string | undefined) => (value === undefined ? undefined : Number(value) * 1000);

describe('classify', () => {
  it('reads a 2xx JSON body', () => {
    expect(classify(answer(200, { data: 1 }), seconds)).toEqual({
      kind: 'json',
      status: 200,
      value: { data: 1 },
      body: '{"data":1}',
    });
  });

  it('makes a 2xx whose body is not JSON (cut short, HTML) transient', () => {
    expect(classify(answer(200, '{"data": [1, 2'), seconds)).toMatchObject({
      kind: 'transient',
      status: 200,
    });
    expect(classify(answer(200, ''), seconds)).toMatchObject({ kind: 'transient', status: 200 });
  });

  it('makes 5xx (HTML bodies too), 408 and network failures transient', () => {
    expect(classify(answer(503, '<html>down</html>'), seconds)).toEqual({
      kind: 'transient',
      status: 503,
      detail: 'HTTP 503',
    });
    expect(classify(answer(408, ''), seconds)).toMatchObject({ kind: 'transient', status: 408 });
    const failure: HttpResult = { kind: 'failure', failure: 'reset', detail: 'ECONNRESET', cause: undefined };
    expect(classify(failure, seconds)).toEqual({
      kind: 'transient',
      status: 'error',
      detail: 'reset: ECONNRESET',
    });
  });

  it('reads 429 with its Retry-After', () => {
    expect(classify(answer(429, '', '2'), seconds)).toEqual({
      kind: 'throttled',
      status: 429,
      retryAfterMs: 2_000,
    });
    expect(classify(answer(429, ''), seconds)).toEqual({
      kind: 'throttled',
      status: 429,
      retryAfterMs: undefined,
    });
  });

  it('maps a 409 message to its not-ready reason', () => {
    const body = { error_code: 'REPORT_NOT_READY', message: NOT_READY_REASONS.survey_missing };
    expect(classify(answer(409, body), seconds)).toEqual({
      kind: 'not_ready',
      status: 409,
      reason: 'survey_missing',
      message: NOT_READY_REASONS.survey_missing,
    });
    expect(classify(answer(409, 'oops'), seconds)).toMatchObject({ kind: 'not_ready', reason: 'unknown' });
  });

  it('keeps the error body fields of a refusal, and copes with a body that is not one', () => {
    const errors = { page: ['The page must be at least 1.'] };
    expect(
      classify(
        answer(422, { error_code: 'VALIDATION_FAILED', message: 'The given data was invalid.', errors }),
        seconds,
      ),
    ).toEqual({
      kind: 'refused',
      status: 422,
      errorCode: 'VALIDATION_FAILED',
      apiMessage: 'The given data was invalid.',
      errors,
    });
    expect(classify(answer(403, '<html>Forbidden</html>'), seconds)).toEqual({
      kind: 'refused',
      status: 403,
      errorCode: undefined,
      apiMessage: undefined,
      errors: undefined,
    });
  });
});

describe('classify, an answer abandoned for its size', () => {
  const tooLarge = (status: number, announcedBytes?: number, headers = {}): HttpResult => ({
    kind: 'too_large',
    status,
    headers,
    limitBytes: 64 * 2 ** 20,
    announcedBytes,
    readBytes: announcedBytes === undefined ? 64 * 2 ** 20 + 1 : 0,
  });

  it('makes a 2xx too_large, naming the size, the limit and where to set it', () => {
    expect(classify(tooLarge(200), seconds)).toEqual({
      kind: 'too_large',
      status: 200,
      detail: 'answer larger than 64 MiB (the --max-body-mb limit; maxBodyMiB in AWS)',
    });
    expect(classify(tooLarge(200, 3 * 2 ** 30), seconds)).toMatchObject({
      detail:
        'answer of 3 GiB announced by Content-Length, larger than 64 MiB (the --max-body-mb limit; maxBodyMiB in AWS)',
    });
  });

  it('lets the status decide for any other answer, as if its body were empty', () => {
    expect(classify(tooLarge(503), seconds)).toEqual({ kind: 'transient', status: 503, detail: 'HTTP 503' });
    expect(classify(tooLarge(429, undefined, { 'retry-after': '2' }), seconds)).toEqual({
      kind: 'throttled',
      status: 429,
      retryAfterMs: 2_000,
    });
    expect(classify(tooLarge(404, 2 ** 31), seconds)).toMatchObject({ kind: 'refused', status: 404 });
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 bytes'],
    [1023, '1023 bytes'],
    [1024, '1 KiB'],
    [256 * 1024 + 1, '256 KiB'],
    [1.5 * 2 ** 20, '1.5 MiB'],
    [64 * 2 ** 20, '64 MiB'],
    [2 ** 30, '1 GiB'],
  ])('%i bytes are %s', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});
