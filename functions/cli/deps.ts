/**
 * Builds a run's dependencies for the CLI and the demo: one rate limiter for the process,
 * a client per step sharing it, the storage named by --out, and a console log.
 */

import { normalizeBaseUrl } from '../../shared/api/base-url.js';
import { IntegrationApiClient, type RequestEvent } from '../../shared/api/client.js';
import {
  AdaptiveRateLimiter,
  type AdaptiveRateLimiterOptions,
  type RateLimiter,
} from '../../shared/api/limiter.js';
import type { WindowFacts } from '../../shared/api/window-facts.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { Log } from '../../shared/log.js';
import { bodyLimitBytes } from '../../shared/run-defaults.js';
import { openStorage } from '../../shared/storage/open.js';
import type { Storage } from '../../shared/storage/storage.js';

export interface CliDepsOptions {
  baseUrl: string;
  apiKey: string;
  out: string;
  concurrency: number;
  maxRate: number;
  /** The largest answer body read (--max-body-mb); default: the client's own (RUN_DEFAULTS.maxBodyMiB). */
  maxBodyMiB?: number;
  s3Region?: string | undefined;
  s3Endpoint?: string | undefined;
  log: Log;
  /** Called after every API request (--verbose logs each one). */
  onRequest?: (event: RequestEvent) => void;
  /** Ends every client's requests (Ctrl-C). */
  signal?: AbortSignal;
}

/** The process's limiter: --max-rate its ceiling in requests per second, --concurrency its ceiling of requests in flight. */
export function limiterOptionsOf(
  options: Pick<CliDepsOptions, 'maxRate' | 'concurrency'>,
): AdaptiveRateLimiterOptions {
  return { maxRate: options.maxRate, concurrency: options.concurrency };
}

/** The storage --out names, with --s3-region and --s3-endpoint (path-style, as local servers need). */
export function openOut(options: Pick<CliDepsOptions, 'out' | 's3Region' | 's3Endpoint'>): Storage {
  return openStorage(options.out, {
    ...(options.s3Region ? { region: options.s3Region } : {}),
    ...(options.s3Endpoint ? { endpoint: options.s3Endpoint, forcePathStyle: true } : {}),
  });
}

export function cliDeps(options: CliDepsOptions): ExportDeps {
  // Made at the first request, so that it starts from the windows an earlier run learnt
  // (runExport reads them from --out first: ExportDeps.windows).
  let startFacts: WindowFacts | undefined;
  let made: RateLimiter | undefined;
  const limiter = (): RateLimiter => {
    made ??= new AdaptiveRateLimiter({
      ...limiterOptionsOf(options),
      ...(startFacts && { windowFacts: startFacts }),
    });
    return made;
  };
  const storage = openOut(options);
  return {
    api: () =>
      new IntegrationApiClient({
        baseUrl: options.baseUrl,
        apiKey: options.apiKey,
        keySource: 'INTEGRATION_API_KEY',
        baseUrlSource: 'INTEGRATION_API_BASE_URL',
        limiter: limiter(),
        ...(options.maxBodyMiB !== undefined && { maxBodyBytes: bodyLimitBytes(options.maxBodyMiB) }),
        ...(options.onRequest && { onEvent: options.onRequest }),
        ...(options.signal && { signal: options.signal }),
      }),
    storage,
    log: options.log,
    now: () => new Date(),
    windows: {
      baseUrl: normalizeBaseUrl(options.baseUrl, 'INTEGRATION_API_BASE_URL'),
      startFrom: (facts) => {
        startFacts = facts;
      },
      learnt: () => made?.windowFacts?.(),
    },
  };
}

/** How much the console log shows: `quiet` and `normal` show warnings and errors, `verbose` info and debug too. */
export type Verbosity = 'quiet' | 'normal' | 'verbose';

/** Where the console log writes: stderr, or a test's stream. */
export interface LineSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** Back to the start of the line and clear it: a line logged on a terminal replaces the progress bar, which redraws after it. */
const CLEAR_LINE = '\r\x1b[K';

/** A console log whose error lines wait for the end of the run (see {@link ConsoleLog.settle}). */
export interface ConsoleLog extends Log {
  /**
   * Ends the run's logging. An error the core logged is the reason of a failed run, which the
   * command prints once as its own error line: for a failed run they are dropped; for one that
   * finished, they did not stop it and are printed now.
   */
  settle(runFailed: boolean): void;
}

/** `campaign_id=12, error="HTTP 503"`: strings with spaces, quotes or `=` quoted as JSON. */
export function formatFields(fields: Record<string, unknown>): string {
  return Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => {
      const text =
        typeof value === 'string'
          ? /^[^\s"=,()]+$/.test(value)
            ? value
            : JSON.stringify(value)
          : typeof value === 'object' && value !== null
            ? JSON.stringify(value)
            : String(value);
      return `${key}=${text}`;
    })
    .join(', ');
}

/** `warn: could not list the jobs of a campaign (campaign_id=12, error="...")`: one line a person reads. */
export function formatLogLine(level: string, message: string, fields?: Record<string, unknown>): string {
  const detail = fields && Object.keys(fields).length > 0 ? formatFields(fields) : '';
  return `${level}: ${message}${detail ? ` (${detail})` : ''}\n`;
}

/** `GET /integration/v1/client/campaigns?page=1&per_page=100 -> 200 in 35 ms (attempt 2; retry in 1000 ms: HTTP 503)`. */
export function formatRequestEvent(event: RequestEvent): string {
  const notes = [
    ...(event.attempt > 1 ? [`attempt ${event.attempt}`] : []),
    ...(event.retryInMs !== undefined ? [`retry in ${event.retryInMs} ms`] : []),
  ].join('; ');
  const why = event.detail ? `${notes ? ': ' : ''}${event.detail}` : '';
  const tail = notes || why ? ` (${notes}${why})` : '';
  return `${event.method} ${event.path} -> ${event.status} in ${event.durationMs} ms${tail}`;
}

/**
 * Log lines on stderr, one per line, for a person: `warn: <message> (field=value, ...)`.
 * Warnings always; info and debug with `verbose`; errors when the run ends ({@link ConsoleLog.settle}).
 */
export function consoleLog(verbosity: Verbosity | boolean, sink: LineSink = process.stderr): ConsoleLog {
  const level: Verbosity = verbosity === true ? 'verbose' : verbosity === false ? 'normal' : verbosity;
  const verbose = level === 'verbose';
  const held: string[] = [];
  let settled = false;
  const clear = sink.isTTY ? CLEAR_LINE : '';
  const line = (name: string) => (message: string, fields?: Record<string, unknown>) => {
    sink.write(clear + formatLogLine(name, message, fields));
  };
  return {
    debug: (m, f) => verbose && line('debug')(m, f),
    info: (m, f) => verbose && line('info')(m, f),
    warn: line('warn'),
    error: (m, f) => {
      const text = clear + formatLogLine('error', m, f);
      if (settled) sink.write(text);
      else held.push(text);
    },
    settle(runFailed) {
      settled = true;
      if (!runFailed) for (const text of held) sink.write(text);
      held.length = 0;
    },
  };
}
