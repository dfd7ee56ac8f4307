/**
 * The run settings that the CLI, the Lambda environment and the CDK context all carry: each
 * one's default, allowed range and why, in one place. The edges derive their defaults, bounds,
 * usage text and documentation from here; test/unit/docs/run-defaults.test.ts holds the tables
 * of docs/cli.md and docs/deploy.md to the same values.
 */

export interface RunDefault {
  readonly value: number;
  /** Smallest value accepted, inclusive. */
  readonly min: number;
  /** Largest value accepted, inclusive. */
  readonly max: number;
  /** Why this value, in one sentence. */
  readonly reason: string;
  /** The CLI flag that sets it, if any. */
  readonly flag?: string;
  /** The CDK context key that sets it, if any. */
  readonly context?: string;
  /** The Lambda environment variable that carries it, if any. */
  readonly env?: string;
}

const entries = {
  unitSize: {
    value: 100,
    min: 1,
    max: 500,
    reason:
      'A unit is fetched, staged and held in memory whole: 100 large reports peak at 300-337 MB in the 768 MB export-reports function (BENCHMARKS.md, unit-memory), and fewer, larger units make fewer S3 requests (100 gave $0.085 per 100,000 reports where 50 gave $0.126, measured before the request budget: BENCHMARKS.md, cost).',
    flag: '--unit-size',
    context: 'unitSize',
    env: 'UNIT_SIZE',
  },
  concurrency: {
    value: 128,
    min: 1,
    max: 256,
    reason:
      "A ceiling on API requests in flight, enough for 50 req/s at 2 s latency; the limiter keeps in flight what the rate times the latency needs (Little's law), so the ceiling binds only on a slow API.",
    flag: '--concurrency',
    context: 'reportConcurrency',
    env: 'REPORT_CONCURRENCY',
  },
  maxRate: {
    value: 50,
    min: 1,
    max: 1000,
    reason:
      "A polite ceiling for one process against an API whose limit is not published; the adaptive limiter finds the API's limit below it.",
    flag: '--max-rate',
  },
  maxBodyMiB: {
    value: 64,
    min: 1,
    max: 512,
    reason:
      'The largest answer read, in MiB: the biggest real reports are a few MB and a 50 MB one exports fine, while a body that never ends must not fill the memory (a 768 MB export-reports function holds a unit of reports besides).',
    flag: '--max-body-mb',
    context: 'maxBodyMiB',
    env: 'MAX_BODY_MIB',
  },
  lambdaRateCeiling: {
    value: 20,
    min: 1,
    max: 1000,
    reason:
      "The deployment's ceiling in req/s: every container that calls the API leases its requests from one shared token bucket (a DynamoDB item), whose rate also drops below the ceiling on 429s; 20 is conservative for an API whose limit is not published, so raise it to the API's limit when you know it.",
    context: 'rateCeiling',
    env: 'RATE_CEILING',
  },
  secretCacheTtlSeconds: {
    value: 300,
    min: 1,
    max: 86_400,
    reason:
      'A rotated key reaches every container within 5 minutes without a Secrets Manager call per invocation; a 401 re-reads the key at once anyway.',
    context: 'secretCacheTtlSeconds',
    env: 'SECRET_CACHE_TTL_SECONDS',
  },
  runDeadlineMinutes: {
    value: 360,
    min: 10,
    max: 10_080,
    reason:
      "Six hours leaves a large run time to drain at the rate ceilings, while a stuck run's lock (held until the deadline + 15 min) is free long before the next daily schedule.",
    context: 'runDeadlineMinutes',
    env: 'RUN_DEADLINE_MINUTES',
  },
  maxReceiveCount: {
    value: 5,
    min: 1,
    max: 1000,
    reason:
      'Five deliveries ride out a 429 storm or a short outage (each retry comes back later), yet a message that keeps failing reaches its dead-letter queue, or its jobs are counted failed, within the run.',
    context: 'maxReceiveCount',
    env: 'MAX_RECEIVE_COUNT',
  },
} as const satisfies Record<string, RunDefault>;

export type RunDefaultName = keyof typeof entries;

for (const entry of Object.values(entries)) Object.freeze(entry);

/** Every run default, frozen. */
export const RUN_DEFAULTS = Object.freeze(entries);

/** The allowed range in words, e.g. `1 to 500`. */
export function describeRange(entry: Pick<RunDefault, 'min' | 'max'>): string {
  return `${entry.min} to ${entry.max}`;
}

/**
 * Requests per second one export-reports fetcher keeps up with (shared/api/fetcher-slots.ts): a
 * unit of 100 reports costs 0.8-1.0 s of CPU on the bench machine, ~1.5 s at export-reports'
 * 0.58 vCPU (1,024 MB), i.e. ~65 reports/s of CPU while its requests wait on the API; 50 leaves
 * a quarter for S3 and the wrap-up.
 */
export const REQUESTS_PER_FETCHER = 50;

/** The fetchers (`reportFetchers`' default) a deployment needs at `rateCeiling` req/s. */
export const fetchersFor = (rateCeiling: number): number =>
  Math.max(1, Math.ceil(rateCeiling / REQUESTS_PER_FETCHER));

/** `maxBodyMiB` (and its flag, context key and variable) in bytes, as the client takes it. */
export const bodyLimitBytes = (mib: number): number => mib * 1024 * 1024;
