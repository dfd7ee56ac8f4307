/**
 * The CLI's configuration: flags and environment, read once here at the edge and validated.
 * Every error names the flag or variable and what it takes.
 */
import { isAbsolute, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import * as z from 'zod';
import { normalizeBaseUrl } from '../../shared/api/base-url.js';
import { ConfigError, describeError } from '../../shared/errors.js';
import type { LocalRunOptions } from '../../shared/export/run/local-run.js';
import { DtSchema } from '../../shared/export/state/records.js';
import { DEFAULT_SCHEMA_CONTRACT, SCHEMA_CONTRACTS } from '../../shared/export/tables.js';
import { TABLE_FORMATS } from '../../shared/layout.js';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../shared/run-defaults.js';
import { isS3Out } from '../../shared/storage/open.js';

/** The bucket's region when neither --s3-region nor AWS_REGION says (S3's own default). */
export const DEFAULT_S3_REGION = 'us-east-1';
/** --wait-lock's ceiling: a day; a run that holds --out longer is stuck, not busy. */
const MAX_WAIT_LOCK_SECONDS = 86_400;

/** Exit codes of the export command (USAGE and docs/cli.md say the same). */
export const EXIT = {
  /** The run finished: succeeded, or partial without --fail-on-partial. */
  ok: 0,
  /** The run failed, or could not start (--out not writable, another run holds it). */
  failed: 1,
  /** A flag or environment variable is missing or wrong; nothing was sent. */
  usage: 2,
  /** The run finished partial and --fail-on-partial was given. */
  partial: 3,
  /** Stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports a process the signal killed. */
  interrupted: 130,
  /** Stopped by SIGTERM: 128 + 15. */
  terminated: 143,
} as const;

/** `default 64, 1 to 256` for the usage text. */
const defaultAndRange = (entry: RunDefault): string => `default ${entry.value}, ${describeRange(entry)}`;

export const USAGE = `Usage: campaign-report-exporter export --out <DIR | s3://bucket/prefix> [options]
       npm run --silent export -- --out <DIR | s3://bucket/prefix> [options]   (in a checkout)

Copies campaigns, jobs and job reports from the Integration API into dated JSON Lines and
Parquet under --out (docs/ingest.md#output-layout).

Options:
  --out <DIR|s3://bucket/prefix>  where to write (required); a relative DIR is taken from the
                                  folder you ran the command in. Checked before any request:
                                  a folder is created if missing and must take a file; a bucket
                                  must take (and let delete) a small object under the prefix
  --date <YYYY-MM-DD>             the dt= partition (default: today, UTC)
  --full                          fetch every report again (default: incremental); says
                                  first on stderr how long that takes at --max-rate
  --table-format <hive|iceberg>   how the tables are written: hive, Parquet under parquet/;
                                  iceberg, Apache Iceberg v2 tables under iceberg/. Default:
                                  the format the output records (state/table-format.json),
                                  hive for a new one. An output keeps the format of its first
                                  run; to switch, run once with --full and the new format
  --schema-contract <evolve|freeze>
                                  a report that differs from the API spec: evolve (default)
                                  lands it, what does not fit its column in _rescued, and
                                  reports the drift; freeze quarantines it whole (the
                                  behaviour before this option, files byte for byte)
  --concurrency <n>               ceiling of API requests in flight; the number used follows
                                  rate x latency (${defaultAndRange(RUN_DEFAULTS.concurrency)})
  --max-rate <n>                  ceiling on requests per second; the rate adapts below it
                                  (${defaultAndRange(RUN_DEFAULTS.maxRate)})
  --unit-size <n>                 reports per unit of work, held in memory together
                                  (${defaultAndRange(RUN_DEFAULTS.unitSize)})
  --max-body-mb <n>               the largest API answer read, in MiB; a longer one fails that
                                  request (${defaultAndRange(RUN_DEFAULTS.maxBodyMiB)})
  --wait-lock <seconds>           wait this long for another run writing to --out to finish,
                                  saying so on stderr when the wait starts and ends
                                  (default 0: refuse at once; 0 to ${MAX_WAIT_LOCK_SECONDS})
  --fail-on-partial               exit ${EXIT.partial} when the run ends partial (default: exit 0)
  --s3-region <region>            region of the bucket (default: AWS_REGION, else us-east-1)
  --s3-endpoint <url>             an S3-compatible endpoint (path-style addressing)
  --glue-database <name>          for an Iceberg output registered in Glue (a stack's bucket):
                                  the Glue database its tables are in (default: the one the
                                  output records, state/table-format.json)
  --glue-region <region>          that database's region (default: the one the output records)
  -v, --verbose                   also info and debug lines, one per API request
  -q, --quiet                     no progress and no summary: warnings and errors only
  -h, --help                      this text

Environment:
  INTEGRATION_API_BASE_URL  the API's base URL, https://... (required; a trailing
                            /integration/v1/client is accepted)
  INTEGRATION_API_KEY       the bearer key (required; never printed)

Output: progress on stderr (a bar on a terminal, a line every few seconds otherwise), warnings
on stderr as single lines, the summary table on stdout when the run finishes.

Exit codes:
  ${EXIT.ok}  the run finished: succeeded, or partial (some reports failed or were invalid)
  ${EXIT.failed}  the run failed (one line on stderr: the reason, the API's error_code, what to do),
     or could not start: --out not writable, or another run writing to it
  ${EXIT.usage}  usage error: a flag or variable missing or wrong; no request was sent
  ${EXIT.partial}  the run finished partial and --fail-on-partial was given
  ${EXIT.interrupted}  interrupted by Ctrl-C (SIGINT), ${EXIT.terminated} by SIGTERM: requests ended, nothing published,
       --out released; the next run closes the interrupted one. A second Ctrl-C stops at once`;

/** A whole-number flag bounded as its run default says; every error names the flag and the range. */
const boundedInt = (entry: RunDefault & { flag: string }) => {
  const error = `${entry.flag} takes a whole number from ${describeRange(entry)}`;
  return z.coerce.number({ error }).int({ error }).min(entry.min, { error }).max(entry.max, { error });
};

/** Characters an HTTP header value cannot carry, and spaces: a key holds none of them. */
const NOT_IN_A_KEY = /[^\x21-\x7e]/;

/** Where a key has a character it cannot have, never the key itself. */
const keyCharError = (key: unknown): string => {
  const at = typeof key === 'string' ? key.search(NOT_IN_A_KEY) : -1;
  return (
    `INTEGRATION_API_KEY holds a control character, a space or a non-ASCII character ` +
    `(at position ${at + 1} of ${typeof key === 'string' ? key.length : 0}): copy the key again`
  );
};

/** The normalized base URL, or an issue naming the variable and what it got. */
const BaseUrlSchema = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    try {
      return normalizeBaseUrl(raw, 'INTEGRATION_API_BASE_URL');
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: describeError(error) });
      return z.NEVER;
    }
  });

/**
 * The flags that name an export and reach it, shared by the commands that take one (`export`,
 * `sql`): their parseArgs options, their schema and their values from the flags and environment.
 */
export const OUT_OPTIONS = {
  out: { type: 'string' },
  's3-region': { type: 'string' },
  's3-endpoint': { type: 'string' },
} as const;

export const OUT_SHAPE = {
  out: z.string({ error: '--out is required' }).trim().min(1, '--out is required'),
  s3Region: z.string().optional(),
  s3Endpoint: z
    .url({
      protocol: /^https?$/,
      error: (issue) => `--s3-endpoint takes an http(s) URL, got ${String(issue.input)}`,
    })
    .optional(),
};

/** The {@link OUT_SHAPE} fields from parsed flags: the region from --s3-region, else AWS_REGION. */
export const outValues = (values: Record<string, unknown>, env: NodeJS.ProcessEnv) => ({
  out: values.out,
  s3Region: values['s3-region'] ?? env.AWS_REGION ?? DEFAULT_S3_REGION,
  s3Endpoint: values['s3-endpoint'],
});

export const CliConfigSchema = z.object({
  out: OUT_SHAPE.out,
  date: z
    .string()
    .refine((dt) => DtSchema.safeParse(dt).success, {
      error: (issue) => `--date takes a calendar date YYYY-MM-DD, got ${String(issue.input)}`,
    })
    .optional(),
  full: z.boolean(),
  /** Absent: the output's own format (export-command.ts), hive for a new output. */
  tableFormat: z
    .enum(TABLE_FORMATS, {
      error: (issue) => `--table-format takes hive or iceberg, got ${String(issue.input)}`,
    })
    .optional(),
  schemaContract: z.enum(SCHEMA_CONTRACTS, {
    error: (issue) => `--schema-contract takes ${SCHEMA_CONTRACTS.join(' or ')}, got ${String(issue.input)}`,
  }),
  concurrency: boundedInt(RUN_DEFAULTS.concurrency),
  maxRate: boundedInt(RUN_DEFAULTS.maxRate),
  unitSize: boundedInt(RUN_DEFAULTS.unitSize),
  maxBodyMiB: boundedInt(RUN_DEFAULTS.maxBodyMiB),
  waitLockSeconds: boundedInt({
    flag: '--wait-lock',
    min: 0,
    max: MAX_WAIT_LOCK_SECONDS,
    value: 0,
    reason: '',
  }),
  failOnPartial: z.boolean(),
  verbose: z.boolean(),
  quiet: z.boolean(),
  s3Region: OUT_SHAPE.s3Region,
  s3Endpoint: OUT_SHAPE.s3Endpoint,
  glueDatabase: z.string().trim().min(1, '--glue-database takes the name of a Glue database').optional(),
  glueRegion: z.string().trim().min(1, '--glue-region takes a region, e.g. eu-west-1').optional(),
  baseUrl: BaseUrlSchema,
  apiKey: z
    .string({ error: 'INTEGRATION_API_KEY is not set' })
    // A key pasted with a newline or spaces around it is the same key.
    .trim()
    .min(1, 'INTEGRATION_API_KEY is empty')
    .refine((key) => !NOT_IN_A_KEY.test(key), { error: (issue) => keyCharError(issue.input) }),
});
export type CliConfig = z.infer<typeof CliConfigSchema>;

/** Options that take a value (`--flag value`); the rest are switches. */
const VALUE_OPTIONS = [
  'out',
  'date',
  'concurrency',
  'max-rate',
  'unit-size',
  'max-body-mb',
  'wait-lock',
  's3-region',
  's3-endpoint',
  'glue-database',
  'glue-region',
] as const;

/**
 * `--max-rate -5` as `--max-rate=-5`: parseArgs refuses a value that starts with `-` as
 * ambiguous, and the range check says better what is wrong with a negative number.
 */
function joinNegativeValues(argv: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    if (VALUE_OPTIONS.some((name) => arg === `--${name}`) && next !== undefined && /^-[\d.]/.test(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

/** parseArgs' errors, reworded to name the flag and what it takes. */
export function argumentError(cause: unknown): ConfigError {
  const { code, message } = cause as { code?: string; message: string };
  const flag = /'(-{1,2}[^' ]+)/.exec(message)?.[1] ?? '';
  const reason =
    code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
      ? `unknown option ${flag}`
      : code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'
        ? `unexpected argument ${/'([^']*)'/.exec(message)?.[1] ?? ''}: every value follows its flag`
        : message.includes('does not take an argument')
          ? `${flag} takes no value`
          : message.includes('ambiguous')
            ? `${flag} needs a value; for one that starts with '-', write ${flag}=<value>`
            : message.includes('argument missing')
              ? `${flag} needs a value`
              : message;
  return new ConfigError(reason, { cause });
}

/**
 * Parses argv and the environment; `help` when --help was asked. Throws ConfigError on bad input.
 * A relative --out is resolved against `cwd`, the folder the user ran the command in
 * (npmCallerFolder for `npm run export`).
 */
export function parseCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string = process.cwd(),
): CliConfig | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: joinNegativeValues(argv),
      options: {
        out: OUT_OPTIONS.out,
        date: { type: 'string' },
        full: { type: 'boolean', default: false },
        'table-format': { type: 'string' },
        'schema-contract': { type: 'string', default: DEFAULT_SCHEMA_CONTRACT },
        concurrency: { type: 'string', default: String(RUN_DEFAULTS.concurrency.value) },
        'max-rate': { type: 'string', default: String(RUN_DEFAULTS.maxRate.value) },
        'unit-size': { type: 'string', default: String(RUN_DEFAULTS.unitSize.value) },
        'max-body-mb': { type: 'string', default: String(RUN_DEFAULTS.maxBodyMiB.value) },
        'wait-lock': { type: 'string', default: '0' },
        'fail-on-partial': { type: 'boolean', default: false },
        verbose: { type: 'boolean', short: 'v', default: false },
        quiet: { type: 'boolean', short: 'q', default: false },
        's3-region': OUT_OPTIONS['s3-region'],
        's3-endpoint': OUT_OPTIONS['s3-endpoint'],
        'glue-database': { type: 'string' },
        'glue-region': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (cause) {
    throw argumentError(cause);
  }
  if (values.help) return 'help';
  const { out, s3Region, s3Endpoint } = outValues(values, env);
  const parsed = CliConfigSchema.safeParse({
    out,
    date: values.date,
    full: values.full,
    tableFormat: values['table-format'],
    schemaContract: values['schema-contract'],
    concurrency: values.concurrency,
    maxRate: values['max-rate'],
    unitSize: values['unit-size'],
    maxBodyMiB: values['max-body-mb'],
    waitLockSeconds: values['wait-lock'],
    failOnPartial: values['fail-on-partial'],
    verbose: values.verbose,
    quiet: values.quiet,
    s3Region,
    s3Endpoint,
    glueDatabase: values['glue-database'],
    glueRegion: values['glue-region'],
    baseUrl: env.INTEGRATION_API_BASE_URL,
    apiKey: env.INTEGRATION_API_KEY,
  });
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => i.message).join('; '));
  const config = parsed.data;
  if (config.verbose && config.quiet) throw new ConfigError('--verbose and --quiet exclude each other');
  return { ...config, out: resolveOut(config.out, cwd) };
}

/** An S3 URL as given; a folder as an absolute path, relative ones from where the user is. */
export function resolveOut(out: string, cwd: string): string {
  return isS3Out(out) ? out : resolve(cwd, out);
}

/**
 * The folder a user ran `npm run export` in: npm runs the script from the package root and says
 * where it was started in INIT_CWD. Only that entry reads it: the packaged command runs where
 * it is called, and a script that calls it from its own package means its own folder.
 */
export function npmCallerFolder(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): string {
  return env.INIT_CWD && isAbsolute(env.INIT_CWD) ? env.INIT_CWD : cwd;
}

/**
 * What a CLI configuration asks of runExport (a run without --table-format: hive; the command
 * settles the output's own format first, export-command.ts). --concurrency is the ceiling of a unit's report
 * fetches (fetchConcurrency) as well as the limiter's (cliDeps), not of the limiter alone.
 */
export function runOptionsOf(config: CliConfig): LocalRunOptions {
  return {
    mode: config.full ? 'full' : 'incremental',
    dt: config.date,
    tableFormat: config.tableFormat,
    schemaContract: config.schemaContract,
    unitSize: config.unitSize,
    fetchConcurrency: config.concurrency,
    waitForLockMs: config.waitLockSeconds * 1000,
  };
}
