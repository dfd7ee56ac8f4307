/** The CLI's flags: defaults and ranges from shared/run-defaults.ts, and where each value goes. */
import { describe, expect, it } from 'vitest';
import { type CliConfig, parseCli, runOptionsOf, USAGE } from '../../../functions/cli/config.js';
import { limiterOptionsOf } from '../../../functions/cli/deps.js';
import { ConfigError } from '../../../shared/errors.js';
import { DEFAULT_SCHEMA_CONTRACT } from '../../../shared/export/tables.js';
import { describeRange, RUN_DEFAULTS } from '../../../shared/run-defaults.js';

const ENV = { INTEGRATION_API_BASE_URL: 'https://api.acme.test', INTEGRATION_API_KEY: 'k' };

const parse = (...flags: string[]): CliConfig => {
  const config = parseCli(['--out', '/tmp/out', ...flags], ENV);
  if (config === 'help') throw new Error('asked for help');
  return config;
};

const errorOf = (...flags: string[]): string => {
  try {
    parse(...flags);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${flags.join(' ')}`);
};

/** The numeric flags, each with its run default. */
const FLAGS = [
  ['concurrency', RUN_DEFAULTS.concurrency],
  ['maxRate', RUN_DEFAULTS.maxRate],
  ['unitSize', RUN_DEFAULTS.unitSize],
] as const;

describe('parseCli', () => {
  it('defaults every numeric flag to its run default', () => {
    const config = parse();
    for (const [field, entry] of FLAGS) expect(config[field], entry.flag).toBe(entry.value);
  });

  it.each(FLAGS)('accepts %s from its min to its max', (field, entry) => {
    expect(parse(entry.flag, String(entry.min))[field]).toBe(entry.min);
    expect(parse(entry.flag, String(entry.max))[field]).toBe(entry.max);
  });

  it.each(
    FLAGS.flatMap(([, entry]) =>
      [String(entry.min - 1), String(entry.max + 1), '2.5', 'many'].map(
        (given) => [entry.flag, given] as const,
      ),
    ),
  )('rejects %s %s naming the flag and its range', (flag, given) => {
    const entry = FLAGS.find(([, e]) => e.flag === flag)![1];
    expect(errorOf(flag, given)).toBe(`${flag} takes a whole number from ${describeRange(entry)}`);
  });

  it('keeps a unit to at most 500 reports, as in AWS: a unit is held in memory', () => {
    expect(errorOf('--unit-size', '1000')).toBe('--unit-size takes a whole number from 1 to 500');
  });

  it('names --concurrency and its range', () => {
    expect(errorOf('--concurrency', '0')).toBe('--concurrency takes a whole number from 1 to 256');
  });
});

describe('--concurrency', () => {
  it('reaches the report fetches of a unit (runExport fetchConcurrency) and the limiter', () => {
    const config = parse('--concurrency', '16');
    expect(config.concurrency).toBe(16);
    expect(runOptionsOf(config).fetchConcurrency).toBe(16);
    expect(limiterOptionsOf(config)).toEqual({ concurrency: 16, maxRate: RUN_DEFAULTS.maxRate.value });
  });

  it('is the run default in both places when not given', () => {
    const config = parse();
    expect(runOptionsOf(config).fetchConcurrency).toBe(RUN_DEFAULTS.concurrency.value);
    expect(limiterOptionsOf(config).concurrency).toBe(RUN_DEFAULTS.concurrency.value);
  });
});

describe('runOptionsOf', () => {
  it('passes every run setting of the command line', () => {
    const config = parse(
      '--full',
      '--date',
      '2026-11-22',
      '--unit-size',
      '20',
      '--wait-lock',
      '3',
      '--table-format',
      'iceberg',
      '--schema-contract',
      'freeze',
    );
    expect(runOptionsOf(config)).toEqual({
      mode: 'full',
      dt: '2026-11-22',
      tableFormat: 'iceberg',
      schemaContract: 'freeze',
      unitSize: 20,
      fetchConcurrency: RUN_DEFAULTS.concurrency.value,
      waitForLockMs: 3000,
    });
    expect(runOptionsOf(parse()).mode).toBe('incremental');
    // No flag: the output's own format, which the command reads from --out (export-command.ts).
    expect(runOptionsOf(parse()).tableFormat).toBeUndefined();
    expect(() => parse('--table-format', 'delta')).toThrow(/--table-format takes hive or iceberg, got delta/);
  });

  it('runs under the evolve schema contract unless --schema-contract freeze says otherwise', () => {
    expect(runOptionsOf(parse()).schemaContract).toBe(DEFAULT_SCHEMA_CONTRACT);
    expect(DEFAULT_SCHEMA_CONTRACT).toBe('evolve');
    expect(runOptionsOf(parse('--schema-contract', 'evolve')).schemaContract).toBe('evolve');
    expect(runOptionsOf(parse('--schema-contract', 'freeze')).schemaContract).toBe('freeze');
    expect(() => parse('--schema-contract', 'strict')).toThrow(
      /^--schema-contract takes evolve or freeze, got strict$/,
    );
    expect(() => parse('--schema-contract')).toThrow(/^--schema-contract needs a value$/);
    expect(USAGE).toMatch(
      /--schema-contract <evolve\|freeze>\n +a report that differs .* evolve \(default\)/,
    );
  });
});

describe('USAGE', () => {
  it.each(FLAGS)('shows the default and range of %s', (_field, entry) => {
    const start = USAGE.indexOf(`  ${entry.flag} `);
    expect(start).toBeGreaterThan(-1);
    // The flag's text runs to the next option line.
    const text = USAGE.slice(start).split(/\n {2}-/)[0]!;
    expect(text).toContain(`default ${entry.value}, ${describeRange(entry)}`);
  });
});
