/**
 * The exporter's error hierarchy. Every error carries a `name`, a `retryable` flag and, where
 * the user can act, a `hint` that says what to do. Messages never contain the API key.
 */

export interface ExporterErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  hint?: string;
}

/** Base of every error the exporter throws on purpose. */
export class ExporterError extends Error {
  readonly retryable: boolean;
  readonly hint: string | undefined;

  constructor(message: string, options: ExporterErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'ExporterError';
    this.retryable = options.retryable ?? false;
    this.hint = options.hint;
  }
}

/** Bad configuration (CLI flags, environment, CDK props): fix it and run again. */
export class ConfigError extends ExporterError {
  constructor(message: string, options: ExporterErrorOptions = {}) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

export interface ApiErrorFields extends ExporterErrorOptions {
  status: number | undefined;
  errorCode?: string | undefined;
  apiMessage?: string | undefined;
  /** The request path (never the query's secrets; the API takes none). */
  path?: string | undefined;
}

/** An answer of the Integration API the exporter cannot use as data. */
export class ApiError extends ExporterError {
  readonly status: number | undefined;
  readonly errorCode: string | undefined;
  readonly apiMessage: string | undefined;
  readonly path: string | undefined;

  constructor(message: string, fields: ApiErrorFields) {
    super(message, fields);
    this.name = 'ApiError';
    this.status = fields.status;
    this.errorCode = fields.errorCode;
    this.apiMessage = fields.apiMessage;
    this.path = fields.path;
  }
}

/** 401: the key is missing, unknown or expired. Fatal for a run. */
export class AuthError extends ApiError {
  constructor(message: string, fields: ApiErrorFields) {
    super(message, { ...fields, retryable: false });
    this.name = 'AuthError';
  }
}

/** 403: the key is restricted (IP, domain) or has no access to the resource. */
export class AccessDeniedError extends ApiError {
  constructor(message: string, fields: ApiErrorFields) {
    super(message, { ...fields, retryable: false });
    this.name = 'AccessDeniedError';
  }
}

/** 422: the exporter sent a request the API rejects. A bug: fail loudly with the details. */
export class RequestValidationError extends ApiError {
  readonly errors: Record<string, string[]>;

  constructor(message: string, fields: ApiErrorFields & { errors?: Record<string, string[]> }) {
    super(message, { ...fields, retryable: false });
    this.name = 'RequestValidationError';
    this.errors = fields.errors ?? {};
  }
}

/** 429, 5xx, reset, timeout or truncated body, after the retry budget is spent. */
export class TransientApiError extends ApiError {
  /** Delay the API asked for (Retry-After), in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, fields: ApiErrorFields & { retryAfterMs?: number | undefined }) {
    super(message, { ...fields, retryable: true });
    this.name = 'TransientApiError';
    this.retryAfterMs = fields.retryAfterMs;
  }
}

/**
 * A list the API answers inconsistently (pages that do not advance, a `meta` that contradicts
 * itself or the items, a list that grows faster than it is read): the listing stops. A
 * campaign's jobs: the campaign is unlisted (the run is partial); the campaigns: the run fails.
 */
export class ListingError extends ApiError {
  constructor(message: string, fields: ApiErrorFields) {
    super(message, { ...fields, retryable: false });
    this.name = 'ListingError';
  }
}

/** A storage adapter failed to read or write an object. */
export class StorageError extends ExporterError {
  readonly key: string;

  constructor(message: string, key: string, options: ExporterErrorOptions = {}) {
    super(message, options);
    this.name = 'StorageError';
    this.key = key;
  }
}

/** A conditional write lost a race (the object changed since it was read). */
export class PreconditionFailedError extends StorageError {
  constructor(key: string, options: ExporterErrorOptions = {}) {
    super(`object ${key} changed since it was read`, key, { ...options, retryable: true });
    this.name = 'PreconditionFailedError';
  }
}

/** Another run holds the output (CLI: exit 1, at once, before any API request). */
export class OutputLockedError extends ExporterError {
  constructor(message: string, options: ExporterErrorOptions = {}) {
    super(message, options);
    this.name = 'OutputLockedError';
  }
}

/**
 * The run was told to stop (Ctrl-C, SIGTERM): its API requests are ended and it stops before
 * it publishes, leaving what a crashed run leaves. Not an `ApiError`: the steps record API
 * failures as the run's outcome, while this one passes through them as a crash would.
 */
export class InterruptedError extends ExporterError {
  constructor(message = 'the run was interrupted', options: ExporterErrorOptions = {}) {
    super(message, options);
    this.name = 'InterruptedError';
  }
}

/** One line for a person: the message, the API's error_code, and what to do. */
export function describeError(error: unknown): string {
  if (error instanceof ExporterError) {
    return error.hint ? `${error.message}. ${error.hint}` : error.message;
  }
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
