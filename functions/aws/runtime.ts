/**
 * What a Lambda container keeps between invocations: configuration, AWS clients, logger,
 * metrics, the API key's cache, and one rate limiter shared by every request of the container.
 * Each handler is a function of a `HandlerRuntime` (what the container gives it) and its event;
 * the deployed handler binds it to `lambdaRuntime()`, built from process.env on first use and
 * wrapped with `lambdaHandler()`. Importing this module reads no configuration and builds no
 * client, so the simulation (test/sim/runtime.ts) calls the same handlers with its own runtime.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { ParameterNotFoundError } from '@aws-lambda-powertools/parameters/errors';
import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { normalizeBaseUrl } from '../../shared/api/base-url.js';
import { IntegrationApiClient } from '../../shared/api/client.js';
import { limiterUntil } from '../../shared/api/deadline-limiter.js';
import type { FetcherHold } from '../../shared/api/fetcher-slots.js';
import type { RateLimiter } from '../../shared/api/limiter.js';
import { ConfigError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { LAMBDA_API_RETRY } from '../../shared/export/run/time-budget.js';
import { WindowFactsKeeper } from '../../shared/export/state/api-windows.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { IcebergCatalog } from '../../shared/iceberg/catalog.js';
import type { Log } from '../../shared/log.js';
import { METRIC, type MetricDatum } from '../../shared/metrics.js';
import { bodyLimitBytes } from '../../shared/run-defaults.js';
import { S3Storage } from '../../shared/storage/s3.js';
import { eventBridgeAnnouncer } from './announce.js';
import { type Env, readEnv, required } from './env.js';
import { takeFetcherSlot } from './fetcher-slots.js';
import { containerLimiter } from './request-budget.js';

/**
 * What a handler gets from its container: configuration, the core's dependencies, SQS,
 * EventBridge, metrics, its fetcher slot, identities and the clock. The deployed handlers get
 * `lambdaRuntime()`; the simulation gives them its storage, queues, announcer and virtual clock.
 */
export interface HandlerRuntime {
  env: Env;
  /** The handler's log (the core's too). */
  log: Log;
  /** Keys added to every later log line of the invocation (the run id, once known). */
  logKeys(keys: Record<string, unknown>): void;
  /** The core's dependencies for a function that calls the API (reads the key first). */
  apiDeps(options?: { msUntilStop?: () => number }): Promise<ExportDeps>;
  /** The core's dependencies for a function that does not call the API. */
  exportDeps(): ExportDeps;
  /** `deps` with the Iceberg catalog when the deployment writes Iceberg tables. */
  withCatalog(deps: ExportDeps): Promise<ExportDeps>;
  /** What functions/aws/queue.ts sends: SendMessageBatch, ChangeMessageVisibility, GetQueueAttributes. */
  sqs: SQSClient;
  /** Puts a finished run's ExportRunFinished event (functions/aws/announce.ts). */
  announce(manifest: Manifest): Promise<void>;
  addMetric(name: string, unit: (typeof MetricUnit)[keyof typeof MetricUnit], value: number): void;
  /**
   * Keeps what the container's limiter learnt of the API's windows in the output's state, when
   * it differs from what the container read or last wrote (state/api-windows.ts): one small
   * write, none when nothing changed. Absent (the simulation): every container learns afresh.
   */
  keepWindowFacts?(): Promise<void>;
  /** export-reports' fetcher slot for `holder` (functions/aws/fetcher-slots.ts); none: every invocation fetches. */
  takeFetcherSlot(holder: string): Promise<FetcherHold | undefined>;
  /** A new random UUID (a fetcher slot's holder). */
  uuid(): string;
  /** A new random token of 16 hex digits (a scheduled start's claim). */
  token(): string;
  /** Epoch ms, on the clock `deps.now()` reads. */
  nowMs(): number;
  /** A uniform number in [0, 1) (backoff jitter). */
  random(): number;
  /**
   * The largest output start-run's recovery publishes itself (`recoveryLimits`); undefined:
   * RECOVERY_OUTPUT_BYTES, sized for start-run's memory.
   */
  recoveryOutputBytes?: number | undefined;
}

/** The Lambda environment, read and validated at the first invocation (not at import). */
export function lambdaEnv(): Env {
  envRead ??= readEnv();
  return envRead;
}
let envRead: Env | undefined;

export const logger = new Logger();
export const metrics = new Metrics();

/**
 * The container's AWS clients, each created on first use: constructing one resolves its whole
 * configuration, and a cold start need not wait for clients an invocation may never use.
 */
export const clients = {
  get s3(): S3Client {
    s3 ??= new S3Client({});
    return s3;
  },
  get sqs(): SQSClient {
    sqs ??= new SQSClient({});
    return sqs;
  },
};
let s3: S3Client | undefined;
let sqs: SQSClient | undefined;
let storage: S3Storage | undefined;

/** The container's limiter, on the deployment's shared request budget; made at the first API call. */
let limiter: RateLimiter | undefined;
/**
 * What the output's state holds of the API's windows, as this container knows it: read once,
 * before its limiter is made (which starts from it), and written when the limiter learnt more.
 */
let windows: WindowFactsKeeper | undefined;

function windowsKeeper(): WindowFactsKeeper {
  windows ??= new WindowFactsKeeper({
    storage: exportDeps().storage,
    baseUrl: normalizeBaseUrl(required(lambdaEnv(), 'API_BASE_URL'), 'API_BASE_URL'),
    log: coreLog,
    now: () => new Date(),
  });
  return windows;
}

/** See `HandlerRuntime.keepWindowFacts`. */
export async function keepWindowFacts(): Promise<void> {
  if (limiter && windows) await windows.keep(limiter.windowFacts?.());
}

/** The core's log, written through Powertools' structured logger. */
export const coreLog: Log = {
  debug: (message, fields) => logger.debug(message, fields ?? {}),
  info: (message, fields) => logger.info(message, fields ?? {}),
  warn: (message, fields) => logger.warn(message, fields ?? {}),
  error: (message, fields) => logger.error(message, fields ?? {}),
};

/**
 * Publishes the invocation's metrics when it put any, also when it failed. Powertools'
 * `logMetrics` warns "No application metrics to publish" on every quiet invocation.
 */
export const publishMetrics = (): MiddlewareObj => {
  const publish = async () => {
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  };
  return { after: publish, onError: publish };
};

/** A handler with the container's logging context and metrics. */
export function lambdaHandler<E, R>(handler: (event: E, context: Context) => Promise<R>) {
  return middy(handler)
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(publishMetrics());
}

/** The secret holds the key as plain text, or as JSON `{"apiKey": "..."}`. */
const SecretValueSchema = z.union([
  z
    .string()
    .trim()
    .min(1)
    .refine((text) => !text.startsWith('{')),
  z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not JSON' });
        return z.NEVER;
      }
    })
    .pipe(z.looseObject({ apiKey: z.string().trim().min(1) }))
    .transform((v) => v.apiKey),
]);

/** Created on first use: finish-run never reads the key. */
let secrets: SecretsProvider | undefined;

/** Says what to do when the secret has no usable key; counted as an auth failure (a person must act). */
function noKey(secretId: string, what: string, cause?: unknown): ConfigError {
  metrics.addMetric(METRIC.authFailures, MetricUnit.Count, 1);
  const fix = `put the key with \`aws secretsmanager put-secret-value --secret-id ${secretId} --secret-string file://key.txt\` (docs/deploy.md#put-the-api-key)`;
  return new ConfigError(`the secret ${secretId} ${what}: ${fix}`, {
    hint: 'the secret holds the key as plain text, or as JSON {"apiKey": "..."}',
    cause,
  });
}

/**
 * The API key from Secrets Manager, cached for SECRET_CACHE_TTL_SECONDS; `fresh` reads past the
 * cache (after a 401: the key may have been rotated) and caches what it read.
 */
export async function readApiKey(fresh = false): Promise<string> {
  const env = lambdaEnv();
  const secretId = required(env, 'API_KEY_SECRET_ID');
  secrets ??= new SecretsProvider();
  const provider = secrets;
  let value: string | Uint8Array | undefined;
  try {
    value = await provider.get(secretId, {
      maxAge: env.SECRET_CACHE_TTL_SECONDS,
      forceFetch: fresh,
      // A secret created without a value answers ResourceNotFoundException (no AWSCURRENT).
      throwOnMissing: true,
    });
  } catch (error) {
    if (error instanceof ParameterNotFoundError) throw noKey(secretId, 'has no value yet', error);
    throw error;
  }
  const text = typeof value === 'string' ? value : new TextDecoder().decode(value);
  const parsed = SecretValueSchema.safeParse(text);
  if (!parsed.success) {
    // Read again on the next invocation, not after the cache's TTL: the fix is a put away.
    provider.clearCache();
    // Never the value in the message: it may be a key in the wrong shape.
    throw noKey(secretId, 'holds no API key');
  }
  return parsed.data;
}

/**
 * The core's dependencies for one invocation of a function that calls the API: reads the key
 * first. `msUntilStop`: no request is sent once it is zero or less (the invocation's time for
 * requests is up: `limiterUntil`), and its callers get a retryable `not sent` outcome.
 */
export async function apiDeps(options: { msUntilStop?: () => number } = {}): Promise<ExportDeps> {
  const apiKey = await readApiKey();
  // Once per container (a read of one small object at its first invocation): the limiter is
  // made at the first request, and starts from the windows an earlier run or container learnt.
  await windowsKeeper().read();
  return exportDeps({ apiKey, ...options });
}

/** The core's dependencies, with the API key to use (none: the function does not call the API). */
export function exportDeps(key: { apiKey?: unknown; msUntilStop?: () => number } = {}): ExportDeps {
  const env = lambdaEnv();
  const apiKey = typeof key.apiKey === 'string' ? key.apiKey : undefined;
  const { msUntilStop } = key;
  return {
    api: () => {
      if (apiKey === undefined) throw new ConfigError('this function does not call the Integration API');
      limiter ??= containerLimiter(env, coreLog, windows?.facts);
      return new IntegrationApiClient({
        baseUrl: required(env, 'API_BASE_URL'),
        apiKey,
        refreshApiKey: () => readApiKey(true),
        keySource: `the secret ${env.API_KEY_SECRET_ID}`,
        // The container's limiter, for this invocation only until its time for requests is up.
        limiter: msUntilStop ? limiterUntil(limiter, msUntilStop) : limiter,
        maxBodyBytes: bodyLimitBytes(env.MAX_BODY_MIB),
        // A Lambda does not sleep through long waits: the message comes back later instead. The
        // steps' time bounds (time-budget.ts) rest on this policy.
        retry: LAMBDA_API_RETRY,
      });
    },
    get storage() {
      storage ??= new S3Storage({ bucket: env.DATA_BUCKET, prefix: env.DATA_PREFIX, client: clients.s3 });
      return storage;
    },
    log: coreLog,
    now: () => new Date(),
  };
}

let catalog: Promise<IcebergCatalog> | undefined;

/**
 * The Iceberg tables' Glue catalog (GLUE_DATABASE, over the data lake's storage), for the
 * functions that commit (start-run and finish-run close runs). Imported on first use: the Glue
 * client stays out of the cold start of functions and formats that never commit.
 */
export function icebergCatalog(): Promise<IcebergCatalog> {
  catalog ??= (async () => {
    const [{ GlueClient }, { GlueCatalog }] = await Promise.all([
      import('@aws-sdk/client-glue'),
      import('../../shared/iceberg/glue-catalog.js'),
    ]);
    return new GlueCatalog({
      client: new GlueClient({}),
      databaseName: required(lambdaEnv(), 'GLUE_DATABASE'),
      storage: exportDeps().storage,
    });
  })();
  // A failed setup (GLUE_DATABASE unset) is tried again by the next invocation.
  catalog.catch(() => {
    catalog = undefined;
  });
  return catalog;
}

/**
 * Dependencies of a function that closes runs (start-run, finish-run): with the Glue catalog
 * when the deployment writes Iceberg tables.
 */
export async function withCatalog(deps: ExportDeps): Promise<ExportDeps> {
  return lambdaEnv().TABLE_FORMAT === 'iceberg' ? { ...deps, catalog: await icebergCatalog() } : deps;
}

/** Counts a fatal 401/403 so the AuthFailures alarm tells a person. */
export function countFatal(
  runtime: Pick<HandlerRuntime, 'addMetric'>,
  fatal: { status?: number | undefined } | undefined,
): void {
  if (fatal?.status === 401 || fatal?.status === 403)
    runtime.addMetric(METRIC.authFailures, MetricUnit.Count, 1);
}

/** Puts metrics (counts) computed by the core. */
export function putMetrics(runtime: Pick<HandlerRuntime, 'addMetric'>, data: readonly MetricDatum[]): void {
  for (const { name, value } of data) runtime.addMetric(name, MetricUnit.Count, value);
}

/** The deployed container's runtime, made at the first invocation from process.env. */
export function lambdaRuntime(): HandlerRuntime {
  runtime ??= {
    env: lambdaEnv(),
    log: coreLog,
    logKeys: (keys) => logger.appendKeys(keys),
    apiDeps,
    exportDeps: () => exportDeps(),
    withCatalog,
    get sqs() {
      return clients.sqs;
    },
    announce: eventBridgeAnnouncer(lambdaEnv()),
    addMetric: (name, unit, value) => metrics.addMetric(name, unit, value),
    keepWindowFacts,
    takeFetcherSlot: (holder) => takeFetcherSlot(lambdaEnv(), holder, coreLog),
    uuid: () => randomUUID(),
    token: () => randomBytes(8).toString('hex'),
    nowMs: () => Date.now(),
    random: () => Math.random(),
  };
  return runtime;
}
let runtime: HandlerRuntime | undefined;
