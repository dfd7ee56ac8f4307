/**
 * The Lambda functions' configuration, read from the environment once per container and
 * validated. The stack sets them through infra/constructs/exporter-function.ts, whose
 * variable names are typed by this schema's keys.
 */
import * as z from 'zod';
import { ConfigError } from '../../shared/errors.js';
import { DtSchema } from '../../shared/export/state/records.js';
import { DEFAULT_SCHEMA_CONTRACT, SCHEMA_CONTRACTS } from '../../shared/export/tables.js';
import { DEFAULT_TABLE_FORMAT, TABLE_FORMATS } from '../../shared/layout.js';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../shared/run-defaults.js';

/** A whole number bounded and defaulted as its run default says. */
const bounded = (entry: RunDefault) => {
  const error = `expected a whole number from ${describeRange(entry)}`;
  return z.coerce
    .number({ error })
    .int({ error })
    .min(entry.min, { error })
    .max(entry.max, { error })
    .default(entry.value);
};

export const EnvSchema = z.object({
  DATA_BUCKET: z.string().min(1),
  DATA_PREFIX: z.string().default(''),
  API_BASE_URL: z.url().optional(),
  API_KEY_SECRET_ID: z.string().min(1).optional(),
  SECRET_CACHE_TTL_SECONDS: bounded(RUN_DEFAULTS.secretCacheTtlSeconds),
  MAX_BODY_MIB: bounded(RUN_DEFAULTS.maxBodyMiB),
  PLAN_QUEUE_URL: z.string().optional(),
  REPORT_QUEUE_URL: z.string().optional(),
  UNIT_SIZE: bounded(RUN_DEFAULTS.unitSize),
  REPORT_CONCURRENCY: bounded(RUN_DEFAULTS.concurrency),
  RATE_CEILING: bounded(RUN_DEFAULTS.lambdaRateCeiling),
  EVENT_BUS_NAME: z.string().default('default'),
  RUN_DEADLINE_MINUTES: bounded(RUN_DEFAULTS.runDeadlineMinutes),
  MAX_RECEIVE_COUNT: bounded(RUN_DEFAULTS.maxReceiveCount),
  /** The deployment's stage (`prod`, `staging`, ...): named in the ExportRunFinished event. */
  STAGE: z.string().min(1).default('prod'),
  /** DynamoDB table holding the deployment's shared request budget (RATE_CEILING req/s in all). */
  REQUEST_BUDGET_TABLE: z.string().min(1).optional(),
  /**
   * The most containers that call the API at once (start-run, plan-campaign and export-reports
   * at their concurrency limits): a container whose budget table fails keeps to its share of the
   * headroom the leasers leave (`fallbackRate`), so the deployment stays under RATE_CEILING.
   */
  API_CONTAINERS: z.coerce.number().int().min(1).default(5),
  /**
   * export-reports invocations that fetch at once (fetcher slots in REQUEST_BUDGET_TABLE,
   * shared/api/fetcher-slots.ts); unset: every invocation fetches.
   */
  REPORT_FETCHERS: z.coerce.number().int().min(1).optional(),
  /** How the contract tables are stored (the `tableFormat` context key): `hive` or `iceberg`. */
  TABLE_FORMAT: z.enum(TABLE_FORMATS).default(DEFAULT_TABLE_FORMAT),
  /**
   * What a run does with a report that differs from the spec (the `schemaContract` context key):
   * `evolve` or `freeze`. Set on start-run only: the run record carries it to every later step.
   */
  SCHEMA_CONTRACT: z.enum(SCHEMA_CONTRACTS).default(DEFAULT_SCHEMA_CONTRACT),
  /**
   * The Glue database of the Iceberg tables, for the functions that commit them (set with
   * `tableFormat` iceberg only); their bucket and root are DATA_BUCKET and DATA_PREFIX.
   */
  GLUE_DATABASE: z.string().min(1).optional(),
  /**
   * The first `dt` of the Glue tables' partition projection (the `projectionStartDate` context
   * key): start-run refuses a backfill dated before it, which Athena would not see. Unset: no check.
   */
  PROJECTION_START_DATE: DtSchema.optional(),
});
export type Env = z.infer<typeof EnvSchema>;

/** Validated environment; throws a ConfigError naming each bad variable. */
export function readEnv(env: NodeJS.ProcessEnv = process.env): Env {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const names = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`bad Lambda environment (${names})`);
  }
  return parsed.data;
}

/** A variable a given function needs; a clear error when the stack did not set it. */
export function required<K extends keyof Env>(env: Env, name: K): NonNullable<Env[K]> {
  const value = env[name];
  if (value === undefined || value === '') throw new ConfigError(`environment variable ${name} is not set`);
  return value as NonNullable<Env[K]>;
}
