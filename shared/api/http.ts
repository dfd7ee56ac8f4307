/**
 * One HTTP request to the Integration API and the classification of its answer. node:http is
 * used rather than fetch: measured here, it serves ~2x the small requests per second of
 * undici's fetch, and it reports a body cut short (Content-Length not reached) as such.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { RUN_DEFAULTS } from '../run-defaults.js';
import { ErrorBodySchema, type NotReadyReason, notReadyReason } from './schemas.js';

// Shared by every client of the process (the CLI makes one client per step): keep-alive
// connections are reused across them. Idle sockets do not keep the process alive.
const AGENT_OPTIONS = { keepAlive: true, maxSockets: 64 };
const httpAgent = new http.Agent(AGENT_OPTIONS);
const httpsAgent = new https.Agent(AGENT_OPTIONS);

/** What a request came back with: an HTTP answer whose body was read in full, or nothing usable. */
export type HttpResult =
  | {
      kind: 'answer';
      status: number;
      body: string;
      /** Every header: Retry-After, and the rate-limit fields (rate-limit-headers.ts). */
      headers: IncomingHttpHeaders;
    }
  /** An answer whose body was longer than `maxBodyBytes`: abandoned, its body dropped. */
  | {
      kind: 'too_large';
      status: number;
      headers: IncomingHttpHeaders;
      limitBytes: number;
      /** The Content-Length, when it alone gave the answer away (nothing of the body was read then). */
      announcedBytes: number | undefined;
      /** Bytes of the body read before it was abandoned. */
      readBytes: number;
    }
  | { kind: 'failure'; failure: NetworkFailureKind; detail: string; cause: unknown };

/**
 * timeout: our deadline; reset: the connection dropped; truncated: the body ended early;
 * network: no connection; aborted: the caller's signal ended it.
 */
export type NetworkFailureKind = 'timeout' | 'reset' | 'truncated' | 'network' | 'aborted';

/** The bounds of one exchange. */
export interface HttpLimits {
  /** The deadline of the whole exchange, body included. */
  timeoutMs: number;
  /** The longest body read, in bytes; a longer one is abandoned at the byte that passes it. */
  maxBodyBytes: number;
}

/**
 * GET `url` with `headers`; never rejects. Nothing in the answer can make it wait longer than
 * the deadline or hold more than `maxBodyBytes` of body: a body that never ends would otherwise
 * fill the memory (measured: 2.5 GB after 1 s).
 */
export function httpGet(
  url: URL,
  headers: Record<string, string>,
  limits: HttpLimits,
  signal?: AbortSignal,
): Promise<HttpResult> {
  const { timeoutMs, maxBodyBytes } = limits;
  return new Promise((resolve) => {
    let settled = false;
    const settle = (result: HttpResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const fail = (failure: NetworkFailureKind, detail: string, cause?: unknown) =>
      settle({ kind: 'failure', failure, detail, cause });

    const secure = url.protocol === 'https:';
    const request = (secure ? https : http).request(
      url,
      { method: 'GET', headers, agent: secure ? httpsAgent : httpAgent },
      (response) => {
        let chunks: Buffer[] = [];
        let readBytes = 0;
        // The socket is destroyed, not returned to the pool: the rest of the body is still on it.
        const abandon = (announcedBytes: number | undefined) => {
          chunks = [];
          const status = response.statusCode ?? 0;
          settle({
            kind: 'too_large',
            status,
            headers: response.headers,
            limitBytes: maxBodyBytes,
            announcedBytes,
            readBytes,
          });
          request.destroy();
        };
        const announced = Number(response.headers['content-length']);
        if (announced > maxBodyBytes) {
          abandon(announced);
          return;
        }
        response.on('data', (chunk: Buffer) => {
          if (settled) return;
          readBytes += chunk.length;
          if (readBytes > maxBodyBytes) abandon(undefined);
          else chunks.push(chunk);
        });
        response.on('error', (error) => fail(failureKind(error, true), describe(error), error));
        response.on('close', () => {
          if (!response.complete) {
            fail('truncated', `connection closed after ${readBytes} bytes of the body`);
            return;
          }
          settle({
            kind: 'answer',
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: response.headers,
          });
        });
      },
    );
    const timer = setTimeout(() => {
      fail('timeout', `no complete answer within ${timeoutMs} ms`);
      request.destroy();
    }, timeoutMs);
    request.on('error', (error) => fail(failureKind(error, false), describe(error), error));
    // Ended by the caller (Ctrl-C): the connection is closed at once, the answer not waited for.
    const onAbort = () => {
      fail('aborted', 'request ended: the run was interrupted', signal?.reason);
      request.destroy();
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    request.end();
  });
}

const NO_CONNECTION = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

function failureKind(error: unknown, duringBody: boolean): NetworkFailureKind {
  if (duringBody) return 'truncated';
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && NO_CONNECTION.has(code) ? 'network' : 'reset';
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
}

/** What an answer means to the client, before the endpoint decides what to do with it. */
export type Classified =
  /** 2xx with a JSON body. */
  | { kind: 'json'; status: number; value: unknown; body: string }
  /** 429: slow down. `detail` when the limiter answered for the API (nothing was sent). */
  | { kind: 'throttled'; status: 429; retryAfterMs: number | undefined; detail?: string }
  /** 5xx, 408, no answer, or a 2xx whose body is not JSON (truncated): worth retrying. */
  | { kind: 'transient'; status: number | 'error'; detail: string; cause?: unknown }
  /** 409 REPORT_NOT_READY (or any 409) with its reason. */
  | { kind: 'not_ready'; status: 409; reason: NotReadyReason; message: string }
  /** A 2xx whose body passed the size limit: not retried, the same answer would come again. */
  | { kind: 'too_large'; status: number; detail: string }
  /** Any other answer (401, 403, 404, 422, ...), with the error body's fields when it has them. */
  | {
      kind: 'refused';
      status: number;
      errorCode: string | undefined;
      apiMessage: string | undefined;
      errors: Record<string, string[]> | undefined;
    };

/** Classifies one result; `parseRetryAfter` turns the header into milliseconds. */
export function classify(
  result: HttpResult,
  parseRetryAfter: (value: string | undefined) => number | undefined,
): Classified {
  if (result.kind === 'failure')
    return {
      kind: 'transient',
      status: 'error',
      detail: `${result.failure}: ${result.detail}`,
      cause: result.cause,
    };
  if (result.kind === 'too_large') {
    const { status, headers } = result;
    // Only a 2xx needs its body: any other answer means what its status says (a 503 with an
    // endless page is still retried, a 429 still waits its Retry-After).
    if (status < 200 || status >= 300)
      return classify({ kind: 'answer', status, body: '', headers }, parseRetryAfter);
    return { kind: 'too_large', status, detail: tooLargeDetail(result) };
  }
  const { status, body } = result;
  if (status >= 200 && status < 300) {
    const parsed = parseJson(body);
    if (parsed.ok) return { kind: 'json', status, value: parsed.value, body };
    return {
      kind: 'transient',
      status,
      detail: `HTTP ${status} with a body that is not JSON (${body.length} chars)`,
    };
  }
  if (status === 429)
    return { kind: 'throttled', status, retryAfterMs: parseRetryAfter(result.headers['retry-after']) };
  if (status >= 500 || status === 408) return { kind: 'transient', status, detail: `HTTP ${status}` };
  const parsed = parseJson(body);
  const error = parsed.ok ? ErrorBodySchema.safeParse(parsed.value) : undefined;
  const fields = error?.success ? error.data : undefined;
  if (status === 409) {
    const message = fields?.message ?? '';
    return { kind: 'not_ready', status, reason: notReadyReason(message), message };
  }
  return {
    kind: 'refused',
    status,
    errorCode: fields?.error_code,
    apiMessage: fields?.message,
    errors: fields?.errors,
  };
}

/** Where the user sets the limit, named where it is met (shared/run-defaults.ts has both names). */
const LIMIT_NAMES = `the ${RUN_DEFAULTS.maxBodyMiB.flag} limit; ${RUN_DEFAULTS.maxBodyMiB.context} in AWS`;

function tooLargeDetail(result: Extract<HttpResult, { kind: 'too_large' }>): string {
  const limitText = formatBytes(result.limitBytes);
  const limit = `${limitText} (${LIMIT_NAMES})`;
  const announced = result.announcedBytes;
  if (announced === undefined) return `answer larger than ${limit}`;
  // Rounded, a size just over the limit would read as the limit itself.
  const size = formatBytes(announced) === limitText ? `${announced} bytes` : formatBytes(announced);
  return `answer of ${size} announced by Content-Length, larger than ${limit}`;
}

const BINARY_UNITS = [
  ['GiB', 2 ** 30],
  ['MiB', 2 ** 20],
  ['KiB', 2 ** 10],
] as const;

/** A byte count for people: `64 MiB`, `1.5 KiB`, `100 bytes` (one decimal at most). */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of BINARY_UNITS)
    if (bytes >= size) return `${Number((bytes / size).toFixed(1))} ${unit}`;
  return `${bytes} bytes`;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    // Not JSON: the caller says what that means for this status.
    return { ok: false };
  }
}
