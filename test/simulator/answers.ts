/**
 * What the simulator answers, as plain values: status, body, headers. The error messages are
 * copied from spec section 7 on purpose (not imported from shared/), so a typo on either side
 * shows up in the tests instead of agreeing with itself.
 */

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string>;
}

export const ERROR_MESSAGES = {
  MISSING_API_KEY: 'API key is required.',
  INVALID_API_KEY: 'Invalid API key.',
  API_KEY_EXPIRED: 'API key has expired.',
  FORBIDDEN: 'You do not have access to this resource.',
  IP_NOT_ALLOWED: 'Request IP is not allowed.',
  DOMAIN_NOT_ALLOWED: 'Request domain/origin is not allowed.',
  NOT_FOUND: 'Resource not found.',
  VALIDATION_FAILED: 'The given data was invalid.',
  RATE_LIMIT_EXCEEDED: 'Too many requests.',
} as const;

export const NOT_READY_MESSAGES = {
  unpublished: 'The report is not available because the job has not been published yet.',
  try_later: 'The report is not available, try again later.',
  survey_missing: 'The report is not available because the survey for this job was not found.',
  no_sections: 'The report is not available because survey sections are not configured for this survey.',
} as const;

const JSON_TYPE = 'application/json';
const HTML_TYPE = 'text/html; charset=UTF-8';

const ERROR_STATUS: Record<keyof typeof ERROR_MESSAGES, number> = {
  MISSING_API_KEY: 401,
  INVALID_API_KEY: 401,
  API_KEY_EXPIRED: 401,
  FORBIDDEN: 403,
  IP_NOT_ALLOWED: 403,
  DOMAIN_NOT_ALLOWED: 403,
  NOT_FOUND: 404,
  VALIDATION_FAILED: 422,
  RATE_LIMIT_EXCEEDED: 429,
};

export function jsonAnswer(status: number, body: unknown, headers: Record<string, string> = {}): Answer {
  return { status, body: JSON.stringify(body), headers: { 'content-type': JSON_TYPE, ...headers } };
}

/** `{error_code, message}` with the spec's message for the code. */
export function errorAnswer(code: keyof typeof ERROR_MESSAGES, headers: Record<string, string> = {}): Answer {
  return jsonAnswer(ERROR_STATUS[code], { error_code: code, message: ERROR_MESSAGES[code] }, headers);
}

/** 422 with `errors`: field name → messages. */
export function validationAnswer(errors: Record<string, string[]>): Answer {
  return jsonAnswer(422, {
    error_code: 'VALIDATION_FAILED',
    message: ERROR_MESSAGES.VALIDATION_FAILED,
    errors,
  });
}

/** 409 REPORT_NOT_READY with the message of the reason. */
export function notReadyAnswer(reason: keyof typeof NOT_READY_MESSAGES): Answer {
  return jsonAnswer(409, { error_code: 'REPORT_NOT_READY', message: NOT_READY_MESSAGES[reason] });
}

/** 429 with Retry-After in whole seconds, plus any rate-limit `headers`. */
export function rateLimitedAnswer(retryAfterSeconds: number, headers: Record<string, string> = {}): Answer {
  return errorAnswer('RATE_LIMIT_EXCEEDED', { ...headers, 'retry-after': String(retryAfterSeconds) });
}

const REASONS: Record<number, string> = {
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** A 5xx as a proxy or a crashed framework sends it: HTML, not JSON. */
export function serverErrorAnswer(status: 500 | 502 | 503): Answer {
  const title = `${status} ${REASONS[status]}`;
  const body = `<!DOCTYPE html>\n<html><head><title>${title}</title></head><body><center><h1>${title}</h1></center><hr><center>nginx</center></body></html>\n`;
  return { status, body, headers: { 'content-type': HTML_TYPE } };
}

/** A 200 whose body is not JSON (a captive portal or a misrouted request). */
export function htmlOkAnswer(): Answer {
  return {
    status: 200,
    body: '<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><form>Please sign in</form></body></html>\n',
    headers: { 'content-type': HTML_TYPE },
  };
}

/** A 200 that claims JSON but does not parse. */
export function brokenJsonAnswer(): Answer {
  return {
    status: 200,
    body: '{"data": {"job": {"id": 1, "sections": [',
    headers: { 'content-type': JSON_TYPE },
  };
}

/** 405 for anything but GET: the API is read-only (spec 1). */
export function methodNotAllowedAnswer(): Answer {
  return jsonAnswer(
    405,
    { error_code: 'METHOD_NOT_ALLOWED', message: 'The method is not supported for this route.' },
    { allow: 'GET' },
  );
}
