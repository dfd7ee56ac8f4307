import { describe, expect, it } from 'vitest';
import { IntegrationApiClient } from '../../../shared/api/client.js';
import {
  AccessDeniedError,
  ApiError,
  AuthError,
  ConfigError,
  describeError,
  RequestValidationError,
} from '../../../shared/errors.js';
import { listPage, verifyAnswer } from '../../unit/api/fixtures.js';
import { API, collect, harness, KEY } from './harness.js';
import { errorReply } from './server.js';

describe('IntegrationApiClient requests', () => {
  it('sends GET with the Accept, Content-Type and bearer headers, and returns the company name', async () => {
    const { client, server } = await harness(() => ({ body: verifyAnswer('Acme Retail') }));

    const result = await client.verify();

    expect(result).toEqual({ companyName: 'Acme Retail' });
    const [request] = server.requests;
    expect(request?.method).toBe('GET');
    expect(request?.path).toBe(`${API}/verify`);
    expect(request?.headers.accept).toBe('application/json');
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('keeps a path prefix of the base URL and ignores a trailing slash', async () => {
    const { server } = await harness(() => ({ body: verifyAnswer() }));
    const client = new IntegrationApiClient({ baseUrl: `${server.url}/gateway/`, apiKey: KEY });

    await client.verify();

    expect(server.requests[0]?.path).toBe(`/gateway${API}/verify`);
  });

  it('rejects a base URL that is not http(s) and ids that are not integers', async () => {
    expect(() => new IntegrationApiClient({ baseUrl: 'ftp://example.com', apiKey: KEY })).toThrow(
      ConfigError,
    );
    expect(() => new IntegrationApiClient({ baseUrl: 'not a url', apiKey: KEY })).toThrow(ConfigError);
    const { client } = await harness(() => ({ body: {} }));
    await expect(client.getReport(1.5, 2)).rejects.toThrow(ConfigError);
    await expect(collect(client.jobs(-1))).rejects.toThrow(ConfigError);
  });

  it('treats verified=false as an AuthError', async () => {
    const { client } = await harness(() => ({ body: { data: { verified: false, company: { name: 'X' } } } }));

    await expect(client.verify()).rejects.toBeInstanceOf(AuthError);
  });
});

describe('IntegrationApiClient refusals', () => {
  const cases = [
    ['API_KEY_EXPIRED', 'API key has expired.', /new key/],
    ['INVALID_API_KEY', 'Invalid API key.', /account manager/],
    ['MISSING_API_KEY', 'API key is required.', /Set the secret/],
  ] as const;
  for (const [code, message, hint] of cases) {
    it(`throws AuthError for 401 ${code} with the API message and a hint naming the key's source`, async () => {
      const { client } = await harness(() => errorReply(401, code, message), {
        keySource: 'the secret prod/api-key',
      });

      const error = await client.verify().catch((e: unknown) => e);

      expect(error).toBeInstanceOf(AuthError);
      const auth = error as AuthError;
      expect(auth.errorCode).toBe(code);
      expect(auth.apiMessage).toBe(message);
      expect(auth.status).toBe(401);
      expect(auth.retryable).toBe(false);
      expect(auth.message).toContain(`(${code})`);
      expect(auth.hint).toMatch(hint);
      expect(auth.hint).toContain('the secret prod/api-key');
    });
  }

  it('re-reads a rotated key once on 401 and retries with the new one', async () => {
    let refreshes = 0;
    const { client, server } = await harness(
      (req) =>
        req.headers.authorization === 'Bearer rotated-key-0001'
          ? { body: req.path.endsWith('/verify') ? verifyAnswer() : listPage([], 1, 1) }
          : errorReply(401, 'INVALID_API_KEY', 'Invalid API key.'),
      {
        refreshApiKey: async () => {
          refreshes += 1;
          return 'rotated-key-0001';
        },
      },
    );

    await expect(client.verify()).resolves.toEqual({ companyName: 'Acme Retail' });
    await collect(client.campaigns());

    expect(refreshes).toBe(1);
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([
      `Bearer ${KEY}`,
      'Bearer rotated-key-0001',
      'Bearer rotated-key-0001',
    ]);
    expect(client.stats()).toMatchObject({ total: 3, retried: 1, byStatus: { '401': 1, '200': 2 } });
  });

  it('throws AuthError when the re-read key is the same, after one re-read only', async () => {
    let refreshes = 0;
    const { client, server } = await harness(
      () => errorReply(401, 'API_KEY_EXPIRED', 'API key has expired.'),
      {
        refreshApiKey: async () => {
          refreshes += 1;
          return KEY;
        },
      },
    );

    await expect(client.verify()).rejects.toMatchObject({ name: 'AuthError', errorCode: 'API_KEY_EXPIRED' });
    expect(refreshes).toBe(1);
    expect(server.requests).toHaveLength(1);
  });

  it('throws AuthError when the new key is refused too, and when the re-read fails (as its cause)', async () => {
    const { client, server } = await harness(() => errorReply(401, 'INVALID_API_KEY', 'Invalid API key.'), {
      refreshApiKey: async () => 'another-key-0002',
    });
    await expect(client.verify()).rejects.toBeInstanceOf(AuthError);
    expect(server.requests).toHaveLength(2);

    const failure = new Error('secrets manager unavailable');
    const second = await harness(() => errorReply(401, 'INVALID_API_KEY', 'Invalid API key.'), {
      refreshApiKey: async () => {
        throw failure;
      },
    });
    const error = await second.client.verify().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthError);
    expect((error as AuthError).cause).toBe(failure);
  });

  for (const code of ['IP_NOT_ALLOWED', 'DOMAIN_NOT_ALLOWED'] as const) {
    it(`throws AccessDeniedError for 403 ${code} from verify, the lists and getReport`, async () => {
      const { client } = await harness(() => errorReply(403, code, 'Request IP is not allowed.'));

      for (const call of [
        () => client.verify(),
        () => collect(client.campaigns()),
        () => collect(client.jobs(1)),
        () => client.getReport(1, 2),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AccessDeniedError);
        expect((error as AccessDeniedError).errorCode).toBe(code);
        expect((error as AccessDeniedError).hint).toMatch(/account manager/);
      }
    });
  }

  it('throws AccessDeniedError for 403 FORBIDDEN on a list, but returns a failed outcome for one report', async () => {
    const { client } = await harness(() =>
      errorReply(403, 'FORBIDDEN', 'You do not have access to this resource.'),
    );

    await expect(collect(client.campaigns())).rejects.toMatchObject({
      name: 'AccessDeniedError',
      errorCode: 'FORBIDDEN',
    });
    await expect(collect(client.jobs(4))).rejects.toBeInstanceOf(AccessDeniedError);
    const outcome = await client.getReport(4, 5);
    expect(outcome.kind).toBe('failed');
    if (outcome.kind !== 'failed') return;
    expect(outcome.retryable).toBe(false);
    expect(outcome.error).toBeInstanceOf(AccessDeniedError);
    expect(outcome.error.errorCode).toBe('FORBIDDEN');
  });

  it('throws ApiError with status 404 when the campaign of jobs() is gone', async () => {
    const { client } = await harness(() => errorReply(404, 'NOT_FOUND', 'Resource not found.'));

    const error = await collect(client.jobs(77)).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 404, errorCode: 'NOT_FOUND', retryable: false });
    expect((error as ApiError).path).toBe(`${API}/campaigns/77/jobs?page=1&per_page=100`);
  });

  it('throws RequestValidationError carrying the errors object on 422', async () => {
    const errors = { per_page: ['The selected per page is invalid.'] };
    const { client } = await harness(() =>
      errorReply(422, 'VALIDATION_FAILED', 'The given data was invalid.', { errors }),
    );

    const error = await collect(client.campaigns()).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as RequestValidationError).errors).toEqual(errors);
    expect((error as RequestValidationError).message).toContain('per_page');
  });

  it('throws a non-retryable ApiError for a status the spec does not list', async () => {
    const { client, server } = await harness(() => ({ status: 418, body: 'teapot' }));

    await expect(client.verify()).rejects.toMatchObject({ name: 'ApiError', status: 418, retryable: false });
    expect(server.requests).toHaveLength(1);
  });

  it('never puts the API key in an error, an event or a log line, even when the API echoes it', async () => {
    const echo = `key ${KEY} is not valid`;
    const routes = [
      () => errorReply(401, 'INVALID_API_KEY', echo),
      () => errorReply(403, 'FORBIDDEN', echo),
      () => errorReply(422, 'VALIDATION_FAILED', echo, { errors: { [KEY]: [echo] } }),
      () => errorReply(404, 'NOT_FOUND', echo),
      () => ({ status: 409, body: { error_code: 'REPORT_NOT_READY', message: echo } }),
      () => ({ status: 500, body: `<html>${echo}</html>` }),
      () => ({ status: 400, body: { error_code: KEY, message: echo } }),
    ];
    const seen: string[] = [];
    for (const route of routes) {
      const { client, events } = await harness(route, { retry: { maxAttempts: 2, baseDelayMs: 1 } });
      for (const call of [
        () => client.verify(),
        () => collect(client.jobs(1)),
        () => client.getReport(1, 2),
      ]) {
        const result = await call().catch((e: unknown) => e);
        seen.push(describeError(result), JSON.stringify(result, Object.getOwnPropertyNames(result ?? {})));
        if (result instanceof Error) seen.push(result.stack ?? '', JSON.stringify(result));
        if (result && typeof result === 'object' && 'error' in result)
          seen.push(describeError(result.error), String((result.error as Error).stack));
      }
      seen.push(JSON.stringify(events), JSON.stringify(client.stats()));
    }

    expect(seen.join('\n')).not.toContain(KEY);
    expect(seen.join('\n')).toContain('[redacted]');
  });
});
