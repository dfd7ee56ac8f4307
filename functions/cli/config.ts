/**
 * The CLI's configuration: flags and environment, read once here at the edge and validated.
 */
import { parseArgs } from 'node:util';
import * as z from 'zod';
import { ConfigError } from '../../shared/errors.js';
import type { LocalRunOptions } from '../../shared/export/run/local-run.js';
import { DtSchema } from '../../shared/export/state/records.js';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../shared/run-defaults.js';

/** The bucket's region when neither --s3-region nor AWS_REGION says (S3's own default). */
const DEFAULT_S3_REGION = 'us-east-1';

/** `default 64, 1 to 256` for the usage text. */
const defaultAndRange = (entry: RunDefault): string => `default ${entry.value}, ${describeRange(entry)}`;

export const USAGE = `Usage: npm run --silent export -- --out <DIR | s3://bucket/prefix> [options]

Copies campaigns, jobs and job reports from the Integration API into dated JSON Lines and
Parquet under --out (see README: "Output layout").

Options:
  --out <DIR|s3://bucket/prefix>  where to write (required)
  --date <YYYY-MM-DD>             the dt= partition (default: today, UTC)
  --full                          fetch every report again (default: incremental)
  --concurrency <n>               ceiling of API requests in flight; the number used follows
                                  rate x latency (${defaultAndRange(RUN_DEFAULTS.concurrency)})
  --max-rate <n>                  ceiling on requests per second; the rate adapts below it
                                  (${defaultAndRange(RUN_DEFAULTS.maxRate)})
  --unit-size <n>                 reports per unit of work, held in memory together
                                  (${defaultAndRange(RUN_DEFAULTS.unitSize)})
  --wait-lock <seconds>           wait this long for another run writing to --out to finish
                                  (default 0: refuse at once)
  --s3-region <region>            region of the bucket (default: AWS_REGION, else us-east-1)
  --s3-endpoint <url>             an S3-compatible endpoint (path-style addressing)
  -h, --help                      this text

Environment:
  INTEGRATION_API_BASE_URL  the API's base URL (required)
  INTEGRATION_API_KEY       the bearer key (required; never printed)

Exit code 0 when the run finished (reports not ready or not found are counted, not errors);
1 with a one-line reason on a fatal error or when another run is writing to --out; 2 on a
usage error.`;

/** A whole-number flag bounded as its run default says; every error names the flag and the range. */
const boundedInt = (entry: RunDefault & { flag: string }) => {
  const error = `${entry.flag} takes a whole number from ${describeRange(entry)}`;
  return z.coerce.number({ error }).int({ error }).min(entry.min, { error }).max(entry.max, { error });
};

export const CliConfigSchema = z.object({
  out: z.string({ error: '--out is required' }).min(1, '--out is required'),
  date: DtSchema.optional(),
  full: z.boolean(),
  concurrency: boundedInt(RUN_DEFAULTS.concurrency),
  maxRate: boundedInt(RUN_DEFAULTS.maxRate),
  unitSize: boundedInt(RUN_DEFAULTS.unitSize),
  waitLockSeconds: z.coerce
    .number({ error: '--wait-lock takes a whole number of seconds' })
    .int('--wait-lock takes a whole number of seconds')
    .min(0, '--wait-lock takes 0 to 86400 seconds')
    .max(86_400, '--wait-lock takes 0 to 86400 seconds'),
  s3Region: z.string().optional(),
  s3Endpoint: z.url('--s3-endpoint takes a URL').optional(),
  baseUrl: z.url({ error: 'INTEGRATION_API_BASE_URL must be set to the API base URL' }),
  apiKey: z.string({ error: 'INTEGRATION_API_KEY must be set' }).min(1, 'INTEGRATION_API_KEY must be set'),
});
export type CliConfig = z.infer<typeof CliConfigSchema>;

/** Parses argv and the environment; `help` when --help was asked. Throws ConfigError on bad input. */
export function parseCli(argv: readonly string[], env: NodeJS.ProcessEnv): CliConfig | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        out: { type: 'string' },
        date: { type: 'string' },
        full: { type: 'boolean', default: false },
        concurrency: { type: 'string', default: String(RUN_DEFAULTS.concurrency.value) },
        'max-rate': { type: 'string', default: String(RUN_DEFAULTS.maxRate.value) },
        'unit-size': { type: 'string', default: String(RUN_DEFAULTS.unitSize.value) },
        'wait-lock': { type: 'string', default: '0' },
        's3-region': { type: 'string' },
        's3-endpoint': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (cause) {
    throw new ConfigError((cause as Error).message, { cause });
  }
  if (values.help) return 'help';
  const parsed = CliConfigSchema.safeParse({
    out: values.out,
    date: values.date,
    full: values.full,
    concurrency: values.concurrency,
    maxRate: values['max-rate'],
    unitSize: values['unit-size'],
    waitLockSeconds: values['wait-lock'],
    s3Region: values['s3-region'] ?? env.AWS_REGION ?? DEFAULT_S3_REGION,
    s3Endpoint: values['s3-endpoint'],
    baseUrl: env.INTEGRATION_API_BASE_URL,
    apiKey: env.INTEGRATION_API_KEY,
  });
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => i.message).join('; '));
  return parsed.data;
}

/**
 * What a CLI configuration asks of runExport. --concurrency is the ceiling of a unit's report
 * fetches (fetchConcurrency) as well as the limiter's (cliDeps), not of the limiter alone.
 */
export function runOptionsOf(config: CliConfig): LocalRunOptions {
  return {
    mode: config.full ? 'full' : 'incremental',
    dt: config.date,
    unitSize: config.unitSize,
    fetchConcurrency: config.concurrency,
    waitForLockMs: config.waitLockSeconds * 1000,
  };
}
