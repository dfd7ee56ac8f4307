/**
 * The errors the client throws for refusals the user must act on (401, 403), each with the
 * API's error_code and a hint that says what to do, and the redaction that keeps the API key
 * out of every message.
 */
import { AccessDeniedError, ApiError, AuthError } from '../errors.js';
import { API_PATH_PREFIX } from './base-url.js';

/** The fields of an error answer the messages are built from. */
export interface RefusalFields {
  status: number;
  errorCode: string | undefined;
  apiMessage: string | undefined;
}

const REDACTED = '[redacted]';

/**
 * A function that replaces every key ever returned by `currentKey` (the key may rotate) with
 * `[redacted]`. Keys shorter than 4 characters are not searched for (they would mangle text).
 */
export function redactor(currentKey: () => string): (text: string) => string {
  const keys = new Set<string>();
  return (text) => {
    const key = currentKey();
    if (key.length >= 4) keys.add(key);
    let out = text;
    for (const k of keys) out = out.split(k).join(REDACTED);
    return out;
  };
}

/** 401 (or a verify answering verified=false): the key is missing, unknown or expired. */
export function authFailure(
  path: string,
  fields: RefusalFields,
  keySource: string,
  cause?: unknown,
): AuthError {
  const code = fields.errorCode;
  let what: string;
  let hint: string;
  switch (code) {
    case 'API_KEY_EXPIRED':
      what = 'API key expired';
      hint = `Ask your account manager for a new key and update ${keySource}`;
      break;
    case 'INVALID_API_KEY':
      what = 'API key not recognised';
      hint = `Check ${keySource}: it must hold the key your account manager issued (a revoked or rotated key must be replaced)`;
      break;
    case 'MISSING_API_KEY':
      what = 'API key missing';
      hint = `Set ${keySource}`;
      break;
    default:
      what =
        fields.status === 401 ? 'API key rejected' : 'API key not active (verify answered verified=false)';
      hint = `Check ${keySource}, or ask your account manager for a new key`;
  }
  const label = code === undefined ? `HTTP ${fields.status}` : code;
  return new AuthError(`${what} (${label})`, { ...fields, path, hint, cause });
}

/** 403: the key's restriction (IP, domain) or no access to the resource. */
export function accessDenied(path: string, fields: RefusalFields): AccessDeniedError {
  switch (fields.errorCode) {
    case 'IP_NOT_ALLOWED':
      return new AccessDeniedError('Request IP not allowed for this API key (IP_NOT_ALLOWED)', {
        ...fields,
        path,
        hint:
          'Ask your account manager to allow the IP address the exporter calls from, or run it from an ' +
          'allowed address (in AWS: a fixed egress IP, e.g. a NAT gateway with an Elastic IP)',
      });
    case 'DOMAIN_NOT_ALLOWED':
      return new AccessDeniedError(
        'Request domain/origin not allowed for this API key (DOMAIN_NOT_ALLOWED)',
        {
          ...fields,
          path,
          hint: 'Ask your account manager to allow this caller, or to issue a key without a domain restriction',
        },
      );
    default: {
      const label = fields.errorCode ?? 'HTTP 403';
      return new AccessDeniedError(`No access to ${path} (${label})`, {
        ...fields,
        path,
        hint: "The key's company has no access to this resource; ask your account manager if it should",
      });
    }
  }
}

/** IP and domain restrictions refuse every request: fatal wherever they come. */
export function isKeyRestriction(errorCode: string | undefined): boolean {
  return errorCode === 'IP_NOT_ALLOWED' || errorCode === 'DOMAIN_NOT_ALLOWED';
}

/**
 * 404 on verify: verify is the first request and exists on every API, so no such path means
 * the base URL leads somewhere else (most often a path missing before /integration/v1/client,
 * or one too many). Names the whole URL asked (it never holds the key: that goes in a header)
 * and the setting the base came from.
 */
export function verifyNotFound(
  url: string,
  base: string,
  fields: RefusalFields,
  baseUrlSource: string,
): ApiError {
  const code = fields.errorCode === undefined ? '' : ` (${fields.errorCode})`;
  // Its full stop dropped: the hint follows after one (describeError).
  const text = fields.apiMessage === undefined ? '' : `: ${fields.apiMessage.replace(/\.$/, '')}`;
  return new ApiError(`GET ${url} answered HTTP 404${code}${text}`, {
    ...fields,
    path: `${API_PATH_PREFIX}/verify`,
    hint:
      `no Integration API answers under ${base}: check that ${baseUrlSource} is the API's base URL, with the ` +
      `path the API lives under if it has one (the exporter appends ${API_PATH_PREFIX}/…)`,
  });
}
