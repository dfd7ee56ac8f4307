/** The API base URL: what a user pastes is checked, and a base that already holds the API path is accepted. */
import { describe, expect, it } from 'vitest';
import { API_PATH_PREFIX, normalizeBaseUrl } from '../../../shared/api/base-url.js';
import { ConfigError } from '../../../shared/errors.js';

const NAME = 'INTEGRATION_API_BASE_URL';

const errorOf = (raw: string | undefined): ConfigError => {
  try {
    normalizeBaseUrl(raw, NAME);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`accepted ${raw}`);
};

describe('normalizeBaseUrl', () => {
  it.each([
    ['https://api.acme.example', 'https://api.acme.example'],
    ['https://api.acme.example/', 'https://api.acme.example'],
    ['  https://api.acme.example  \n', 'https://api.acme.example'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['https://gw.acme.example/gateway/', 'https://gw.acme.example/gateway'],
    ['HTTPS://API.ACME.EXAMPLE', 'https://api.acme.example'],
  ])('keeps %j as %j', (raw, expected) => {
    expect(normalizeBaseUrl(raw, NAME)).toBe(expected);
  });

  it.each([
    `https://api.acme.example${API_PATH_PREFIX}`,
    `https://api.acme.example${API_PATH_PREFIX}/`,
    `https://api.acme.example${API_PATH_PREFIX}//`,
    `https://api.acme.example${API_PATH_PREFIX.toUpperCase()}`,
  ])('strips the API path the client appends itself from %j', (raw) => {
    expect(normalizeBaseUrl(raw, NAME)).toBe('https://api.acme.example');
  });

  it('strips the API path only at the end, keeping a gateway prefix before it', () => {
    expect(normalizeBaseUrl(`https://gw.example/acme${API_PATH_PREFIX}`, NAME)).toBe(
      'https://gw.example/acme',
    );
    expect(normalizeBaseUrl(`https://gw.example${API_PATH_PREFIX}/extra`, NAME)).toBe(
      `https://gw.example${API_PATH_PREFIX}/extra`,
    );
  });

  it.each([undefined, '', '   '])('says %j is not set, naming the variable', (raw) => {
    expect(errorOf(raw).message).toBe(`${NAME} is not set`);
  });

  it('says a host without a scheme needs one, shows what it got and how to write it', () => {
    const error = errorOf('api.example.com');
    expect(error.message).toBe(`${NAME} must start with https:// or http://, got "api.example.com"`);
    expect(error.hint).toBe('write it as https://api.example.com');
  });

  it.each(['ftp://api.example.com', 'file:///etc/passwd', 'mailto://x'])(
    'refuses the scheme of %j',
    (raw) => {
      expect(errorOf(raw).message).toBe(
        `${NAME} must start with https:// or http://, got ${JSON.stringify(raw)}`,
      );
    },
  );

  it('refuses credentials in the URL and never repeats them', () => {
    const error = errorOf('https://alice:s3cret-pass@api.example.com');
    expect(error.message).toContain(NAME);
    expect(error.message).toContain('must not hold credentials');
    expect(`${error.message} ${error.hint}`).not.toMatch(/alice|s3cret/);
    expect(errorOf('alice:s3cret-pass@api.example.com').message).not.toMatch(/alice|s3cret/);
  });

  it.each(['https://api.example.com/?tenant=1', 'https://api.example.com/#top'])(
    'refuses a query or fragment in %j',
    (raw) => {
      expect(errorOf(raw).message).toBe(`${NAME} must have no query or fragment, got ${JSON.stringify(raw)}`);
    },
  );

  it('refuses what is no URL at all', () => {
    expect(errorOf('https://exa mple.com').message).toBe(`${NAME} is not a URL, got "https://exa mple.com"`);
  });
});
