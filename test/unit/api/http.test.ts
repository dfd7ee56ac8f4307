import { describe, expect, it } from 'vitest';
import { classify, type HttpResult } from '../../../shared/api/http.js';
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
