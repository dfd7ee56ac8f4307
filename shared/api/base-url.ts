/**
 * The Integration API's `{base_url}`, checked and normalized once: the CLI's configuration and
 * the client's constructor both take it through {@link normalizeBaseUrl}.
 */
import { ConfigError } from '../errors.js';

/** The path every endpoint lives under (spec section 4); the client appends it to the base. */
export const API_PATH_PREFIX = '/integration/v1/client';

const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
/** `user:password@` right after the scheme (or at the start, when there is none). */
const USERINFO = /^((?:[a-z][a-z0-9+.-]*:)?\/\/)?[^/@?#]*@/i;

/** The value as it may be shown: whatever stands before an `@` in the authority is masked. */
const shown = (raw: string): string => JSON.stringify(raw.replace(USERINFO, '$1***@'));

/**
 * The base URL without a trailing `/`, ready for `base + '/integration/v1/client/...'`.
 * Accepts a base that already ends in `/integration/v1/client` (copied from the API's docs) and
 * strips that part, since the client appends it. Throws `ConfigError` naming `name` and the
 * value (credentials masked) when it is missing, has no http(s) scheme, holds credentials, a
 * query or a fragment.
 *
 * @param name what the value is called where the user set it, e.g. `INTEGRATION_API_BASE_URL`.
 * @example
 * normalizeBaseUrl('https://api.acme.example/integration/v1/client/') // 'https://api.acme.example'
 * normalizeBaseUrl('api.acme.example') // throws: ... must start with https:// or http://, got "api.acme.example"
 */
export function normalizeBaseUrl(raw: string | undefined, name = 'the API base URL'): string {
  const value = raw?.trim() ?? '';
  if (value === '') {
    throw new ConfigError(`${name} is not set`, {
      hint: 'set it to the API base URL, e.g. https://api.example.com',
    });
  }
  if (!SCHEME.test(value)) {
    throw new ConfigError(`${name} must start with https:// or http://, got ${shown(value)}`, {
      hint: `write it as https://${value.replace(USERINFO, '')}`,
    });
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new ConfigError(`${name} is not a URL, got ${shown(value)}`, { cause });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`${name} must start with https:// or http://, got ${shown(value)}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new ConfigError(`${name} must not hold credentials (user:password@), got ${shown(value)}`, {
      hint: 'the API takes the key as a bearer token: set INTEGRATION_API_KEY (or the key secret) instead',
    });
  }
  if (url.search !== '' || url.hash !== '') {
    throw new ConfigError(`${name} must have no query or fragment, got ${shown(value)}`);
  }
  let path = url.pathname.replace(/\/+$/, '');
  if (path.toLowerCase().endsWith(API_PATH_PREFIX)) path = path.slice(0, -API_PATH_PREFIX.length);
  return `${url.origin}${path}`;
}
