/**
 * Builds a run's dependencies for the CLI and the demo: one rate limiter for the process,
 * a client per step sharing it, the storage named by --out, and a console log.
 */
import { IntegrationApiClient } from '../../shared/api/client.js';
import { AdaptiveRateLimiter, type AdaptiveRateLimiterOptions } from '../../shared/api/limiter.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { Log } from '../../shared/log.js';
import { openStorage } from '../../shared/storage/open.js';

export interface CliDepsOptions {
  baseUrl: string;
  apiKey: string;
  out: string;
  concurrency: number;
  maxRate: number;
  s3Region?: string | undefined;
  s3Endpoint?: string | undefined;
  log: Log;
}

/** The process's limiter: --max-rate its ceiling in requests per second, --concurrency its ceiling of requests in flight. */
export function limiterOptionsOf(
  options: Pick<CliDepsOptions, 'maxRate' | 'concurrency'>,
): AdaptiveRateLimiterOptions {
  return { maxRate: options.maxRate, concurrency: options.concurrency };
}

export function cliDeps(options: CliDepsOptions): ExportDeps {
  const limiter = new AdaptiveRateLimiter(limiterOptionsOf(options));
  const storage = openStorage(options.out, {
    ...(options.s3Region ? { region: options.s3Region } : {}),
    ...(options.s3Endpoint ? { endpoint: options.s3Endpoint, forcePathStyle: true } : {}),
  });
  return {
    api: () => new IntegrationApiClient({ baseUrl: options.baseUrl, apiKey: options.apiKey, limiter }),
    storage,
    log: options.log,
    now: () => new Date(),
  };
}

/** Warnings and errors to stderr as single lines; info and debug only when asked. */
export function consoleLog(verbose: boolean): Log {
  const line = (level: string, message: string, fields?: Record<string, unknown>) =>
    process.stderr.write(`${level} ${message}${fields ? ` ${JSON.stringify(fields)}` : ''}\n`);
  return {
    debug: (m, f) => verbose && line('debug', m, f),
    info: (m, f) => verbose && line('info', m, f),
    warn: (m, f) => line('warn', m, f),
    error: (m, f) => line('error', m, f),
  };
}
