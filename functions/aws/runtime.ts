/**
 * What a Lambda container keeps between invocations: configuration, AWS clients, logger,
 * metrics, and one rate limiter shared by every request of the container. Handlers call
 * `exportDeps(context)` to get the core's dependencies for one invocation.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import secretsManager from '@middy/secrets-manager';
import * as z from 'zod';
import { IntegrationApiClient } from '../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../shared/api/limiter.js';
import { ConfigError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { Log } from '../../shared/log.js';
import { METRIC } from '../../shared/metrics.js';
import { S3Storage } from '../../shared/storage/s3.js';
import { type Env, readEnv, required } from './env.js';

export const env: Env = readEnv();
export const logger = new Logger();
export const metrics = new Metrics();
export const s3 = new S3Client({});
export const sqs = new SQSClient({});
const secrets = new SecretsManagerClient({});
const storage = new S3Storage({ bucket: env.DATA_BUCKET, prefix: env.DATA_PREFIX, client: s3 });
const limiter = new AdaptiveRateLimiter({ maxRate: env.RATE_CEILING, concurrency: env.REPORT_CONCURRENCY });

/** The core's log, written through Powertools' structured logger. */
export const coreLog: Log = {
  debug: (message, fields) => logger.debug(message, fields ?? {}),
  info: (message, fields) => logger.info(message, fields ?? {}),
  warn: (message, fields) => logger.warn(message, fields ?? {}),
  error: (message, fields) => logger.error(message, fields ?? {}),
};

/** middy's cache key for the API key secret. */
const SECRET_CACHE_KEY = 'api-key-secret';

/** The secret holds the key as plain text, or as JSON `{"apiKey": "..."}`. */
const SecretValueSchema = z.union([
  z.string().min(1),
  z.looseObject({ apiKey: z.string().min(1) }).transform((v) => v.apiKey),
]);

function keyFrom(value: unknown): string {
  const parsed = SecretValueSchema.safeParse(value);
  if (!parsed.success) {
    throw new ConfigError(`the secret ${env.API_KEY_SECRET_ID} holds no API key`, {
      hint: 'put the key as the secret string, or as JSON {"apiKey": "..."} (README: "Put the API key")',
    });
  }
  return parsed.data;
}

/** middy middleware that loads the API key secret into `context.apiKey`, cached for the configured TTL. */
export const apiKeySecret = () =>
  secretsManager({
    fetchData: { apiKey: required(env, 'API_KEY_SECRET_ID') },
    setToContext: true,
    cacheKey: SECRET_CACHE_KEY,
    cacheExpiry: env.SECRET_CACHE_TTL_SECONDS * 1000,
    AwsClient: SecretsManagerClient,
  });

/**
 * The key re-read after a 401 and the cached key it replaces. middy's cache serves the old key
 * until its TTL ends, and cannot be cleared from here: @middy/secrets-manager 6 keeps it in its
 * own @middy/util 6, not the @middy/util 7 of @middy/core. So the container remembers the rotation.
 */
let rotation: { stale: string; fresh: string } | undefined;

/** Re-reads the secret past the cache: the key may have been rotated (called once on a 401). */
async function refreshApiKey(stale: string): Promise<string> {
  const answer = await secrets.send(
    new GetSecretValueCommand({ SecretId: required(env, 'API_KEY_SECRET_ID') }),
  );
  const text = answer.SecretString ?? '';
  let value: unknown = text;
  // JSON only when it looks like an object, as middy reads it: a key of digits stays text.
  if (text.trimStart().startsWith('{')) {
    try {
      value = JSON.parse(text);
    } catch {
      // Not JSON after all: keep the text.
    }
  }
  const fresh = keyFrom(value);
  rotation = { stale, fresh };
  return fresh;
}

/** The core's dependencies for one invocation; `context.apiKey` is set by `apiKeySecret()`. */
export function exportDeps(context: { apiKey?: unknown }, withApi = true): ExportDeps {
  const cached = withApi ? keyFrom(context.apiKey) : '';
  const apiKey = rotation?.stale === cached ? rotation.fresh : cached;
  return {
    api: () => {
      if (!withApi) throw new ConfigError('this function does not call the Integration API');
      return new IntegrationApiClient({
        baseUrl: required(env, 'API_BASE_URL'),
        apiKey,
        refreshApiKey: () => refreshApiKey(cached),
        limiter,
        maxBodyBytes: env.MAX_BODY_MIB * 1024 * 1024,
        // A Lambda does not sleep through long waits: the message comes back later instead.
        retry: { maxRetryAfterMs: 5_000, maxElapsedMs: 30_000 },
      });
    },
    storage,
    log: coreLog,
    now: () => new Date(),
  };
}

/** Counts a fatal 401/403 so the AuthFailures alarm tells a person. */
export function countFatal(fatal: { status?: number | undefined } | undefined): void {
  if (fatal?.status === 401 || fatal?.status === 403)
    metrics.addMetric(METRIC.authFailures, MetricUnit.Count, 1);
}

/** Puts a finished run's metrics (the alarms and the dashboard watch them). */
export function putRunMetrics(manifest: Manifest): void {
  const c = manifest.counts;
  const status = {
    succeeded: METRIC.runsSucceeded,
    partial: METRIC.runsPartial,
    failed: METRIC.runsFailed,
  } as const;
  metrics.addMetric(status[manifest.status], MetricUnit.Count, 1);
  metrics.addMetric(METRIC.reportsExported, MetricUnit.Count, c.reports_exported);
  metrics.addMetric(METRIC.reportsUnchanged, MetricUnit.Count, c.reports_unchanged);
  metrics.addMetric(METRIC.reportsNotReady, MetricUnit.Count, c.reports_not_ready);
  metrics.addMetric(METRIC.reportsNotFound, MetricUnit.Count, c.reports_not_found);
  metrics.addMetric(METRIC.reportsInvalid, MetricUnit.Count, c.reports_invalid);
  metrics.addMetric(METRIC.reportsFailed, MetricUnit.Count, c.reports_failed);
  metrics.addMetric(METRIC.apiRequests, MetricUnit.Count, manifest.requests.total);
  metrics.addMetric(METRIC.apiThrottled, MetricUnit.Count, manifest.requests.by_status['429'] ?? 0);
  metrics.addMetric(METRIC.apiRetried, MetricUnit.Count, manifest.requests.retried);
}
