/**
 * The deployment's configuration: typed and validated at synth with zod. The app reads it from
 * the stage's settings file and CDK context (infra/settings.ts); every error names the key,
 * where it was read, and says what is allowed.
 */
import * as z from 'zod';
import { DEFAULT_SCHEMA_CONTRACT, SCHEMA_CONTRACTS } from '../shared/export/tables.js';
import { DEFAULT_TABLE_FORMAT, TABLE_FORMATS } from '../shared/layout.js';
import { fetchersFor, RUN_DEFAULTS, type RunDefault } from '../shared/run-defaults.js';
import {
  FUNCTION_SIZES,
  LAMBDA_MAX_TIMEOUT_SECONDS,
  LAMBDA_MEMORY_MB,
  MIN_TIMEOUT_SECONDS,
} from './function-sizes.js';
import { DEFAULT_STAGE, STAGE_PATTERN } from './naming.js';

/** Bad deployment configuration: the message names the context key(s) to fix. */
export class InfraConfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InfraConfigError';
  }
}

/** Log retention periods CloudWatch Logs accepts, in days. */
export const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

/** The Powertools / Lambda application log levels the handlers accept. */
export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const;

/** Context values given with `-c key=value` arrive as strings; cdk.json gives JSON types. */
const fromText = (value: unknown): unknown => (typeof value === 'string' ? value.trim() : value);
const emptyToUndefined = (value: unknown): unknown => {
  const v = fromText(value);
  return v === '' || v === null ? undefined : v;
};

const integer = (min: number, max: number, fallback: number) => {
  const error = `expected an integer from ${min} to ${max} (default ${fallback})`;
  return z
    .preprocess((v) => {
      const t = emptyToUndefined(v);
      return typeof t === 'string' && /^-?\d+$/.test(t) ? Number(t) : t;
    }, z.number({ error }).int({ error }).min(min, { error }).max(max, { error }).optional())
    .transform((v) => v ?? fallback);
};

/** A whole number from `min` to `max`, or unset (`undefined`: the feature is off). */
const optionalInteger = (min: number, max: number) => {
  const error = `expected an integer from ${min} to ${max}, or nothing (the default: none)`;
  return z.preprocess((v) => {
    const t = emptyToUndefined(v);
    return typeof t === 'string' && /^-?\d+$/.test(t) ? Number(t) : t;
  }, z.number({ error }).int({ error }).min(min, { error }).max(max, { error }).optional());
};

/** A context key whose default and range are a run default's (shared/run-defaults.ts). */
const runDefault = (entry: RunDefault) => integer(entry.min, entry.max, entry.value);

/** A function's memory in MB: Lambda's range, its default from infra/function-sizes.ts. */
const memoryOf = (name: keyof typeof FUNCTION_SIZES) =>
  integer(LAMBDA_MEMORY_MB.min, LAMBDA_MEMORY_MB.max, FUNCTION_SIZES[name].memoryMb);

/** A function's timeout in seconds: at least MIN_TIMEOUT_SECONDS, at most Lambda's 900. */
const timeoutOf = (name: keyof typeof FUNCTION_SIZES) =>
  integer(MIN_TIMEOUT_SECONDS, LAMBDA_MAX_TIMEOUT_SECONDS, FUNCTION_SIZES[name].timeoutSeconds);

const decimal = (min: number, max: number, fallback: number) => {
  const error = `expected a number greater than ${min} and less than ${max} (default ${fallback})`;
  return z
    .preprocess((v) => {
      const t = emptyToUndefined(v);
      return typeof t === 'string' && t !== '' && !Number.isNaN(Number(t)) ? Number(t) : t;
    }, z.number({ error }).gt(min, { error }).lt(max, { error }).optional())
    .transform((v) => v ?? fallback);
};

const bool = (fallback: boolean) =>
  z
    .preprocess((v) => {
      const t = emptyToUndefined(v);
      if (t === 'true') return true;
      if (t === 'false') return false;
      return t;
    }, z.boolean({ error: `expected true or false (default ${fallback})` }).optional())
    .transform((v) => v ?? fallback);

const optionalText = <T extends z.ZodType<string>>(schema: T) =>
  z.preprocess(emptyToUndefined, schema.optional());

/**
 * An EventBridge Scheduler cron expression: six fields (minutes hours day-of-month month
 * day-of-week year), one of day-of-month / day-of-week being `?`. `cron(...)` around it is optional.
 */
const cronFields = z
  .string()
  .transform((s) =>
    s
      .trim()
      .replace(/^cron\((.*)\)$/s, '$1')
      .trim()
      .replace(/\s+/g, ' '),
  )
  .refine((s) => s.split(' ').length === 6, {
    message: 'expected 6 fields "minutes hours day-of-month month day-of-week year", e.g. "0 2 * * ? *"',
    abort: true,
  })
  .refine(
    (s) => {
      const f = s.split(' ');
      return (f[2] === '?') !== (f[4] === '?');
    },
    { message: 'exactly one of day-of-month (3rd field) and day-of-week (5th field) must be "?"' },
  );

const timeZone = z.string().refine(
  (tz) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: tz });
      return true;
    } catch {
      // Intl throws RangeError for an unknown zone: that is the answer, not a failure.
      return false;
    }
  },
  { message: 'expected an IANA time zone such as "UTC" or "Europe/Berlin"' },
);

const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, { message: 'expected a date YYYY-MM-DD' })
  .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(d).toISOString().startsWith(d), {
    message: 'not a calendar date',
  });

/** `''` or `segment/segment/` (S3-safe segments, no leading slash, trailing slash added). */
const dataPrefix = z
  .string()
  .regex(/^([A-Za-z0-9._-]+\/)*[A-Za-z0-9._-]*\/?$/, {
    message:
      'expected "" or path segments of letters, digits, ".", "_", "-" joined by "/", e.g. "exports/acme"',
  })
  .refine((p) => !p.split('/').some((s) => s === '.' || s === '..'), {
    message: '"." and ".." segments are not allowed',
  })
  .transform((p) => (p === '' || p.endsWith('/') ? p : `${p}/`));

const secretArn = z
  .string()
  .regex(/^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$/, {
    message:
      'expected a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>)',
  });

const secretName = z.string().regex(/^[A-Za-z0-9/_+=.@-]{1,512}$/, {
  message: 'expected a secret name (letters, digits and /_+=.@-)',
});

const kmsKeyArn = z.string().regex(/^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/, {
  message: 'expected a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias',
});

const eipAllocationId = z.string().regex(/^eipalloc-[0-9a-f]+$/, {
  message: 'expected an Elastic IP allocation id, e.g. eipalloc-0123456789abcdef0',
});

const stage = z.string().regex(STAGE_PATTERN, {
  message: 'expected lowercase letters, digits and "-", starting with a letter, at most 20 characters',
});

const glueName = z.string().regex(/^[a-z0-9_]{1,255}$/, {
  message: 'expected lowercase letters, digits and "_" (a Glue database name Athena can query)',
});

/**
 * The storage classes `raw/` may move to: those Athena reads (`raw_reports`) without a restore.
 * Glacier Flexible Retrieval and Deep Archive objects are skipped by Athena, so they are not offered.
 */
export const RAW_STORAGE_CLASSES = ['GLACIER_IR', 'STANDARD_IA'] as const;
export type RawStorageClass = (typeof RAW_STORAGE_CLASSES)[number];
/**
 * When `raw/` moves, unless the deployment says otherwise: Glacier Instant Retrieval costs about
 * a sixth of Standard per GB-month and is read in milliseconds, by Athena too; reading it costs
 * more per GB than Standard-IA, and raw/ is seldom read (nothing in the exporter reads it back).
 */
export const RAW_TRANSITION = { days: 90, storageClass: 'GLACIER_IR' } as const satisfies {
  days: number;
  storageClass: RawStorageClass;
};
/** S3 moves an object to Standard-IA only after 30 days in Standard (lifecycle rule minimum). */
export const IA_MIN_TRANSITION_DAYS = 30;

/**
 * The docs' example base URL: a configuration may hold it (benchmarks, loopback tests), a stack
 * may not — synth fails with it, as it does without a URL (the app ships none in cdk.json).
 */
export const EXAMPLE_API_BASE_URL = 'https://api.example.com';

export const ExporterConfigSchema = z
  .object({
    /** The deployment's stage: every physical name derives from it (infra/naming.ts). */
    stage: z.preprocess((v) => emptyToUndefined(v) ?? DEFAULT_STAGE, stage),
    /** {base_url} of the Integration API (HTTPS: the key travels as a bearer token). */
    apiBaseUrl: z.preprocess(
      (v) => emptyToUndefined(v) ?? '',
      z
        .string()
        .min(1, {
          message: 'required: the Integration API base URL, e.g. https://api.acme.com',
        })
        .pipe(
          z
            .url({ protocol: /^https$/, message: 'expected an https:// URL' })
            .transform((u) => u.replace(/\/+$/, '')),
        ),
    ),
    scheduleCron: z.preprocess((v) => emptyToUndefined(v) ?? '0 2 * * ? *', cronFields),
    scheduleTimeZone: z.preprocess((v) => emptyToUndefined(v) ?? 'UTC', timeZone),
    fullRefreshCron: optionalText(cronFields),
    existingSecretName: optionalText(secretName),
    existingSecretArn: optionalText(secretArn),
    /** The customer managed key an imported secret is encrypted with (the functions need kms:Decrypt). */
    existingSecretKmsKeyArn: optionalText(kmsKeyArn),
    alarmEmail: optionalText(z.email({ message: 'expected an e-mail address' })),
    fixedEgressIp: bool(false),
    /** An Elastic IP the NAT gateway uses instead of one the stack allocates (the allowlisted address). */
    egressEipAllocationId: optionalText(eipAllocationId),
    reportBatchSize: integer(1, 10, 2),
    reportMaxConcurrency: integer(2, 1000, 2),
    /**
     * export-reports invocations that send requests at once (fetcher slots); unset: one per
     * REQUESTS_PER_FETCHER req/s of rateCeiling (`reportFetchersOf`).
     */
    reportFetchers: optionalInteger(1, 1000),
    planMaxConcurrency: integer(2, 1000, 2),
    unitSize: runDefault(RUN_DEFAULTS.unitSize),
    reportConcurrency: runDefault(RUN_DEFAULTS.concurrency),
    rateCeiling: runDefault(RUN_DEFAULTS.lambdaRateCeiling),
    secretCacheTtlSeconds: runDefault(RUN_DEFAULTS.secretCacheTtlSeconds),
    maxBodyMiB: runDefault(RUN_DEFAULTS.maxBodyMiB),
    runDeadlineMinutes: runDefault(RUN_DEFAULTS.runDeadlineMinutes),
    /**
     * Days after which `raw/` expires; unset (the default), it is kept: the API keeps no
     * history, so raw/ is the only lossless copy of what it answered.
     */
    rawRetentionDays: optionalInteger(1, 36_500),
    /** Days after which `raw/` moves to `rawStorageClass` (a cheaper class Athena still reads). */
    rawTransitionDays: integer(0, 36_500, RAW_TRANSITION.days),
    rawStorageClass: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toUpperCase() : v) || RAW_TRANSITION.storageClass,
      z.enum(RAW_STORAGE_CLASSES, { message: `expected one of ${RAW_STORAGE_CLASSES.join(', ')}` }),
    ),
    athenaResultsRetentionDays: integer(1, 3650, 7),
    /**
     * Days a quarantined body is kept: a report that stays invalid is quarantined again by every
     * run, so without an end `quarantine/` grows by a copy a day.
     */
    quarantineRetentionDays: integer(1, 36_500, 90),
    logRetentionDays: z
      .preprocess(
        (v) => {
          const t = emptyToUndefined(v);
          return typeof t === 'string' && /^\d+$/.test(t) ? Number(t) : t;
        },
        z
          .number()
          .refine((n) => (LOG_RETENTION_DAYS as readonly number[]).includes(n), {
            message: `expected one of ${LOG_RETENTION_DAYS.join(', ')}`,
          })
          .optional(),
      )
      .transform((v) => v ?? 90),
    logLevel: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toUpperCase() : v) || 'INFO',
      z.enum(LOG_LEVELS, { message: `expected one of ${LOG_LEVELS.join(', ')}` }),
    ),
    bytesScannedCutoffMb: integer(10, 7_000_000_000, 10_240),
    maxReceiveCount: runDefault(RUN_DEFAULTS.maxReceiveCount),
    /** Memory of each function, in MB, and the timeouts a user may need to raise (infra/function-sizes.ts). */
    startRunMemoryMb: memoryOf('start-run'),
    planCampaignMemoryMb: memoryOf('plan-campaign'),
    planCampaignTimeoutSeconds: timeoutOf('plan-campaign'),
    exportReportsMemoryMb: memoryOf('export-reports'),
    exportReportsTimeoutSeconds: timeoutOf('export-reports'),
    finishRunMemoryMb: memoryOf('finish-run'),
    finishRunTimeoutSeconds: timeoutOf('finish-run'),
    projectionStartDate: z.preprocess((v) => emptyToUndefined(v) ?? '2025-01-01', isoDate),
    dataPrefix: z.preprocess((v) => emptyToUndefined(v) ?? '', dataPrefix),
    /** Unset: derived from the stage (infra/naming.ts). */
    databaseName: optionalText(glueName),
    /**
     * How the contract tables are stored: `hive` (Parquet under `parquet/`, partition projection,
     * `*_latest` views) or `iceberg` (Apache Iceberg v2 tables under `iceberg/`, and the
     * `<report table>_current` tables). Hive by default: an existing deployment keeps its tables.
     */
    tableFormat: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toLowerCase() : v) || DEFAULT_TABLE_FORMAT,
      z.enum(TABLE_FORMATS, { message: `expected one of ${TABLE_FORMATS.join(', ')}` }),
    ),
    /**
     * What a run does with a report that differs from the API spec: `evolve` lands it (what does
     * not fit its column in `_rescued`) and reports the drift; `freeze` quarantines it whole, as
     * every release before the option did. Evolve by default: a deployment that updates without
     * the key lands such reports from then on.
     */
    schemaContract: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toLowerCase() : v) || DEFAULT_SCHEMA_CONTRACT,
      z.enum(SCHEMA_CONTRACTS, { message: `expected one of ${SCHEMA_CONTRACTS.join(', ')}` }),
    ),
    throttleShareThreshold: decimal(0, 1, 0.05),
    missedRunAlarmHours: integer(2, 168, 26),
  })
  .superRefine((c, ctx) => {
    if (c.existingSecretName !== undefined && c.existingSecretArn !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['existingSecretArn'],
        message: 'give existingSecretName or existingSecretArn, not both',
      });
    }
    if (
      c.existingSecretKmsKeyArn !== undefined &&
      c.existingSecretName === undefined &&
      c.existingSecretArn === undefined
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['existingSecretKmsKeyArn'],
        message: 'only for an imported secret: give existingSecretName or existingSecretArn too',
      });
    }
    if (c.rawStorageClass === 'STANDARD_IA' && c.rawTransitionDays < IA_MIN_TRANSITION_DAYS) {
      ctx.addIssue({
        code: 'custom',
        path: ['rawTransitionDays'],
        message: `S3 moves objects to STANDARD_IA after ${IA_MIN_TRANSITION_DAYS} days at the earliest: give at least ${IA_MIN_TRANSITION_DAYS}`,
      });
    }
    if (c.rawRetentionDays !== undefined && c.rawRetentionDays <= c.rawTransitionDays) {
      ctx.addIssue({
        code: 'custom',
        path: ['rawRetentionDays'],
        message: `expires raw/ before it moves to ${c.rawStorageClass} after "rawTransitionDays" ${c.rawTransitionDays}: give more days, or lower rawTransitionDays`,
      });
    }
    if (c.reportFetchers !== undefined && c.reportFetchers > c.reportMaxConcurrency) {
      ctx.addIssue({
        code: 'custom',
        path: ['reportFetchers'],
        message: `more fetchers than the ${c.reportMaxConcurrency} invocations "reportMaxConcurrency" runs: give at most ${c.reportMaxConcurrency}, or raise reportMaxConcurrency`,
      });
    }
    if (c.egressEipAllocationId !== undefined && !c.fixedEgressIp) {
      ctx.addIssue({
        code: 'custom',
        path: ['egressEipAllocationId'],
        message: 'only with a fixed egress IP: set fixedEgressIp=true too',
      });
    }
  });

/** The validated configuration (defaults applied, prefix normalised to `''` or `a/b/`). */
export type ExporterConfig = z.infer<typeof ExporterConfigSchema>;
/** What a caller may pass (every key optional but apiBaseUrl; strings accepted as from `-c`). */
export type ExporterConfigInput = z.input<typeof ExporterConfigSchema>;

/**
 * export-reports invocations that fetch at once: `reportFetchers`, or one per
 * REQUESTS_PER_FETCHER req/s of `rateCeiling` (shared/run-defaults.ts), at most
 * `reportMaxConcurrency`.
 */
export function reportFetchersOf(
  config: Pick<ExporterConfig, 'reportFetchers' | 'rateCeiling' | 'reportMaxConcurrency'>,
): number {
  return config.reportFetchers ?? Math.min(fetchersFor(config.rateCeiling), config.reportMaxConcurrency);
}

/** Every context key the app reads, in documentation order. */
export const CONTEXT_KEYS = Object.keys(ExporterConfigSchema.shape) as readonly (keyof ExporterConfig)[];

/**
 * Validates raw configuration values, applying defaults. `source` words the message: `context`
 * for the app (cdk.json / -c), `props` for {@link CampaignReportExporter} in another app.
 * @throws InfraConfigError naming every bad key, e.g. `context "reportBatchSize": ...`.
 */
export function parseConfig(
  raw: Readonly<Record<string, unknown>>,
  source: 'context' | 'props' = 'context',
  fromFile: { readonly file: string; readonly keys: ReadonlySet<string> } | undefined = undefined,
): ExporterConfig {
  const result = ExporterConfigSchema.safeParse(raw);
  if (result.success) return result.data;
  const labelOf = (key: string) =>
    source === 'props' ? 'prop' : fromFile?.keys.has(key) ? fromFile.file : 'context';
  const lines = result.error.issues.map((issue) => {
    const key = String(issue.path[0] ?? '(config)');
    const given = raw[key];
    const shown = given === undefined ? '' : ` (got ${JSON.stringify(given)})`;
    return `  ${labelOf(key)} "${key}": ${issue.message}${shown}`;
  });
  const where =
    source === 'context'
      ? `fix these settings (${fromFile?.file ?? 'deploy/<stage>.json'}, cdk.json "context" or -c key=value)`
      : 'fix these props of CampaignReportExporter';
  throw new InfraConfigError(`Invalid configuration; ${where}:\n${lines.join('\n')}`, {
    cause: result.error,
  });
}
