/**
 * What an endpoint makes of one classified answer (a "step" of the client's request loop), and
 * the answers every endpoint treats alike: the rows of the answer → action table of
 * ARCHITECTURE.md that do not depend on the endpoint.
 */
import { ApiError, RequestValidationError, type TransientApiError } from '../errors.js';
import { accessDenied, type RefusalFields } from './failures.js';
import type { Classified } from './http.js';

export type Step<T> =
  | { kind: 'done'; value: T }
  | { kind: 'throw'; error: Error }
  /** Transient: retry within the budget; afterwards `giveUp` gives the result (default: throw). */
  | {
      kind: 'retry';
      detail: string;
      retryAfterMs?: number | undefined;
      /** The network error behind it, for the final error's `cause`. */
      cause?: unknown;
      giveUp?: (error: TransientApiError) => T;
    }
  /** 401: re-read the key once, then throw an AuthError. */
  | { kind: 'unauthorized'; fields: RefusalFields };

export type Refused = Extract<Classified, { kind: 'refused' }>;
export type TooLarge = Extract<Classified, { kind: 'too_large' }>;

export function done<T>(value: T): Step<T> {
  return { kind: 'done', value };
}

/**
 * 429, 5xx and the like are retried; 401 re-reads the key; 403 is AccessDeniedError; 422 is
 * RequestValidationError with the API's `errors`; a body over the size limit and anything else
 * is an ApiError. The answer's texts must already be redacted.
 */
export function commonStep<T>(answer: Classified, path: string): Step<T> {
  switch (answer.kind) {
    case 'throttled':
      return { kind: 'retry', detail: answer.detail ?? 'HTTP 429', retryAfterMs: answer.retryAfterMs };
    case 'transient':
      return { kind: 'retry', detail: answer.detail, cause: answer.cause };
    case 'json':
      return {
        kind: 'throw',
        error: new ApiError(`GET ${path}: unexpected HTTP ${answer.status}`, { status: answer.status, path }),
      };
    case 'not_ready':
      return {
        kind: 'throw',
        error: new ApiError(`GET ${path}: unexpected HTTP 409: ${answer.message}`, {
          status: 409,
          errorCode: 'REPORT_NOT_READY',
          apiMessage: answer.message,
          path,
        }),
      };
    case 'refused':
      return refusalStep(answer, path);
    case 'too_large':
      return { kind: 'throw', error: tooLarge(answer, path) };
  }
}

/**
 * A body over the size limit, as an error: not retryable, the same answer would come again. A
 * list page's is a ListingError (`as`): the listing ends, the run goes on without it.
 */
export function tooLarge(answer: TooLarge, path: string, as: typeof ApiError = ApiError): ApiError {
  return new as(`GET ${path}: ${answer.detail}`, {
    status: answer.status,
    path,
    retryable: false,
    hint: 'If answers this large are expected, raise the limit; otherwise the API sent a body that does not end',
  });
}

function refusalStep<T>(answer: Refused, path: string): Step<T> {
  const fields = refusalFields(answer);
  switch (answer.status) {
    case 401:
      return { kind: 'unauthorized', fields };
    case 403:
      return { kind: 'throw', error: accessDenied(path, fields) };
    case 422: {
      const errors = answer.errors ?? {};
      const message = `the API rejected GET ${path} (${fields.errorCode ?? 'HTTP 422'}): ${JSON.stringify(errors)}`;
      return { kind: 'throw', error: new RequestValidationError(message, { ...fields, path, errors }) };
    }
    default: {
      const code = fields.errorCode === undefined ? '' : ` (${fields.errorCode})`;
      const text = fields.apiMessage === undefined ? '' : `: ${fields.apiMessage}`;
      const message = `GET ${path} answered HTTP ${answer.status}${code}${text}`;
      return { kind: 'throw', error: new ApiError(message, { ...fields, path }) };
    }
  }
}

export function refusalFields(answer: Refused): RefusalFields {
  return { status: answer.status, errorCode: answer.errorCode, apiMessage: answer.apiMessage };
}

/** The answer with `redact` applied to every text that came from the API or the network. */
export function redactAnswer(answer: Classified, redact: (text: string) => string): Classified {
  switch (answer.kind) {
    case 'transient':
      return { ...answer, detail: redact(answer.detail) };
    case 'not_ready':
      return { ...answer, message: redact(answer.message) };
    case 'refused': {
      const errors =
        answer.errors === undefined
          ? undefined
          : Object.fromEntries(Object.entries(answer.errors).map(([k, v]) => [redact(k), v.map(redact)]));
      const apiMessage = answer.apiMessage === undefined ? undefined : redact(answer.apiMessage);
      const errorCode = answer.errorCode === undefined ? undefined : redact(answer.errorCode);
      return { ...answer, errorCode, apiMessage, errors };
    }
    default:
      return answer;
  }
}
