/**
 * The CLI's flags and environment as a new user and a hostile setup give them: every error
 * names the flag or variable and what it takes, and never contains the key.
 */
import { describe, expect, it } from 'vitest';
import { type CliConfig, EXIT, npmCallerFolder, parseCli, USAGE } from '../../../functions/cli/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { describeRange, RUN_DEFAULTS } from '../../../shared/run-defaults.js';

const KEY = 'sk_live_0123456789abcdef';
const ENV = { INTEGRATION_API_BASE_URL: 'https://api.acme.test', INTEGRATION_API_KEY: KEY };

const parse = (flags: string[], env: NodeJS.ProcessEnv = ENV, cwd = '/home/me/project'): CliConfig => {
  const config = parseCli(['--out', '/tmp/out', ...flags], env, cwd);
  if (config === 'help') throw new Error('asked for help');
  return config;
};

const errorOf = (flags: string[], env: NodeJS.ProcessEnv = ENV): string => {
  try {
    parse(flags, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${flags.join(' ')}`);
};

describe('INTEGRATION_API_KEY', () => {
  it.each([' ', '   ', '\n', '\t \r\n'])('refuses %j: a key of whitespace only', (key) => {
    expect(errorOf([], { ...ENV, INTEGRATION_API_KEY: key })).toBe('INTEGRATION_API_KEY is empty');
  });

  it('says it is not set when it is missing', () => {
    expect(errorOf([], { INTEGRATION_API_BASE_URL: ENV.INTEGRATION_API_BASE_URL })).toBe(
      'INTEGRATION_API_KEY is not set',
    );
  });

  it.each([`${KEY}\n`, `  ${KEY}\r\n`, `\t${KEY} `])('trims a pasted key %j to the key', (key) => {
    expect(parse([], { ...ENV, INTEGRATION_API_KEY: key }).apiKey).toBe(KEY);
  });

  it.each([
    ['a newline inside', `${KEY.slice(0, 8)}\n${KEY.slice(8)}`],
    ['a NUL', `${KEY}\u0000x`],
    ['an escape', `\u001b[31m${KEY}`],
    ['a space inside', `${KEY.slice(0, 8)} ${KEY.slice(8)}`],
    ['a non-ASCII letter', `${KEY}é`],
    ['a DEL', `${KEY}\u007f`],
  ])('refuses a key with %s, without showing the key', (_what, key) => {
    const message = errorOf([], { ...ENV, INTEGRATION_API_KEY: key });
    expect(message).toMatch(
      /^INTEGRATION_API_KEY holds a control character, a space or a non-ASCII character/,
    );
    expect(message).not.toContain(KEY.slice(0, 8));
    expect(message).not.toContain(KEY.slice(8));
  });

  it('says where the bad character is', () => {
    expect(errorOf([], { ...ENV, INTEGRATION_API_KEY: 'abc\u0007def' })).toContain('(at position 4 of 7)');
  });
});

describe('INTEGRATION_API_BASE_URL', () => {
  it('accepts a base that already ends in the API path, and strips it', () => {
    const env = { ...ENV, INTEGRATION_API_BASE_URL: 'https://api.acme.test/integration/v1/client/' };
    expect(parse([], env).baseUrl).toBe('https://api.acme.test');
  });

  it('names the variable and what it got when the scheme is missing, rather than "must be set"', () => {
    const message = errorOf([], { ...ENV, INTEGRATION_API_BASE_URL: 'api.example.com' });
    expect(message).toBe(
      'INTEGRATION_API_BASE_URL must start with https:// or http://, got "api.example.com". write it as https://api.example.com',
    );
  });

  it('says it is not set when it is missing or blank', () => {
    expect(errorOf([], { INTEGRATION_API_KEY: KEY })).toMatch(/^INTEGRATION_API_BASE_URL is not set/);
    expect(errorOf([], { ...ENV, INTEGRATION_API_BASE_URL: ' ' })).toMatch(
      /^INTEGRATION_API_BASE_URL is not set/,
    );
  });
});

describe('numeric flags', () => {
  it('takes --concurrency up to its maximum (65 is fine)', () => {
    expect(parse(['--concurrency', '65']).concurrency).toBe(65);
  });

  it('names --max-rate and its range for 1001', () => {
    expect(errorOf(['--max-rate', '1001'])).toBe('--max-rate takes a whole number from 1 to 1000');
  });

  it.each(['--max-rate', '--concurrency', '--unit-size', '--max-body-mb'])(
    'gives the range error, not "argument is ambiguous", for a negative %s',
    (flag) => {
      const entry = Object.values(RUN_DEFAULTS).find((e) => 'flag' in e && e.flag === flag)!;
      expect(errorOf([flag, '-5'])).toBe(`${flag} takes a whole number from ${describeRange(entry)}`);
      expect(errorOf([`${flag}=-5`])).toBe(`${flag} takes a whole number from ${describeRange(entry)}`);
    },
  );

  it('names --wait-lock and its range', () => {
    expect(errorOf(['--wait-lock', '-1'])).toBe('--wait-lock takes a whole number from 0 to 86400');
    expect(errorOf(['--wait-lock', 'soon'])).toBe('--wait-lock takes a whole number from 0 to 86400');
  });
});

describe('--max-body-mb', () => {
  const entry = RUN_DEFAULTS.maxBodyMiB;

  it('defaults to the run default and takes its range', () => {
    expect(entry.flag).toBe('--max-body-mb');
    expect(parse([]).maxBodyMiB).toBe(entry.value);
    expect(parse(['--max-body-mb', String(entry.min)]).maxBodyMiB).toBe(entry.min);
    expect(parse(['--max-body-mb', String(entry.max)]).maxBodyMiB).toBe(entry.max);
  });

  it.each([String(entry.min - 1), String(entry.max + 1), '1.5', 'lots'])(
    'refuses %s naming its range',
    (given) => {
      expect(errorOf(['--max-body-mb', given])).toBe(
        `--max-body-mb takes a whole number from ${describeRange(entry)}`,
      );
    },
  );

  it('is in the usage text with its default and range', () => {
    expect(USAGE).toMatch(/--max-body-mb <n>[\s\S]*?default 64, 1 to 512/);
  });
});

describe('--date', () => {
  it.each(['2026-13-45', '2026-02-30', '22.11.2026', '2026-1-2', 'today'])(
    'names the flag, the form and what it got for %s',
    (given) => {
      expect(errorOf(['--date', given])).toBe(`--date takes a calendar date YYYY-MM-DD, got ${given}`);
    },
  );

  it('takes a real date, a leap day included', () => {
    expect(parse(['--date', '2028-02-29']).date).toBe('2028-02-29');
  });
});

describe('switches and other argument errors', () => {
  it('reads --fail-on-partial, --verbose and --quiet (and -v, -q)', () => {
    expect(parse([])).toMatchObject({ failOnPartial: false, verbose: false, quiet: false });
    expect(parse(['--fail-on-partial', '--verbose'])).toMatchObject({ failOnPartial: true, verbose: true });
    expect(parse(['-q'])).toMatchObject({ quiet: true });
    expect(parse(['-v'])).toMatchObject({ verbose: true });
  });

  it('refuses --verbose with --quiet', () => {
    expect(errorOf(['--verbose', '--quiet'])).toBe('--verbose and --quiet exclude each other');
  });

  it('names an unknown option', () => {
    expect(errorOf(['--max-rat', '5'])).toBe('unknown option --max-rat');
  });

  it('says a value-taking flag at the end needs a value', () => {
    expect(errorOf(['--date'])).toBe('--date needs a value');
  });

  it('says how to pass a value that starts with a dash', () => {
    expect(errorOf(['--s3-region', '-x'])).toBe(
      "--s3-region needs a value; for one that starts with '-', write --s3-region=<value>",
    );
  });

  it('says a switch takes no value', () => {
    expect(errorOf(['--full=yes'])).toBe('--full takes no value');
  });

  it('refuses a stray argument', () => {
    expect(errorOf(['2026-11-22'])).toBe('unexpected argument 2026-11-22: every value follows its flag');
  });

  it('names --s3-endpoint and what it got', () => {
    expect(errorOf(['--s3-endpoint', 'localhost:9000'])).toBe(
      '--s3-endpoint takes an http(s) URL, got localhost:9000',
    );
    expect(parse(['--s3-endpoint', 'http://127.0.0.1:9000']).s3Endpoint).toBe('http://127.0.0.1:9000');
  });
});

describe('--out', () => {
  const out = (value: string, env: NodeJS.ProcessEnv, cwd: string) => {
    const config = parseCli(['--out', value], { ...ENV, ...env }, cwd);
    if (config === 'help') throw new Error('asked for help');
    return config.out;
  };

  it('takes a relative folder from the folder the command runs in', () => {
    expect(out('exports/acme', {}, '/home/me/data')).toBe('/home/me/data/exports/acme');
    expect(out('../up', {}, '/home/me/data')).toBe('/home/me/up');
  });

  it('reads INIT_CWD only through npmCallerFolder, the `npm run export` entry', () => {
    expect(out('exports', { INIT_CWD: '/home/me/data' }, '/home/me/project')).toBe(
      '/home/me/project/exports',
    );
    expect(npmCallerFolder({ INIT_CWD: '/home/me/data' }, '/home/me/project')).toBe('/home/me/data');
    expect(npmCallerFolder({ INIT_CWD: '' }, '/home/me/project')).toBe('/home/me/project');
    expect(npmCallerFolder({ INIT_CWD: 'relative' }, '/home/me/project')).toBe('/home/me/project');
    expect(npmCallerFolder({}, '/home/me/project')).toBe('/home/me/project');
  });

  it('keeps an absolute folder as it is', () => {
    expect(out('/data/lake', { INIT_CWD: '/home/me/data' }, '/x')).toBe('/data/lake');
  });

  it.each(['s3://lake/p', 'S3://lake/p', 's3://lake'])(
    'keeps %s as S3, in any case of the scheme',
    (value) => {
      expect(out(value, { INIT_CWD: '/home/me/data' }, '/x')).toBe(value);
    },
  );

  it('is required', () => {
    expect(() => parseCli([], ENV)).toThrow('--out is required');
  });
});

describe('USAGE', () => {
  it('documents every exit code and --fail-on-partial', () => {
    expect(EXIT).toEqual({ ok: 0, failed: 1, usage: 2, partial: 3, interrupted: 130, terminated: 143 });
    expect(USAGE).toMatch(/^ {2}0 {2}the run finished: succeeded, or partial/m);
    expect(USAGE).toMatch(/^ {2}1 {2}the run failed/m);
    expect(USAGE).toMatch(/^ {2}2 {2}usage error/m);
    expect(USAGE).toMatch(/^ {2}3 {2}the run finished partial and --fail-on-partial was given/m);
    expect(USAGE).toMatch(/^ {2}130 {2}interrupted by Ctrl-C \(SIGINT\), 143 by SIGTERM/m);
    for (const flag of ['--fail-on-partial', '--verbose', '--quiet', '--max-body-mb'])
      expect(USAGE).toContain(flag);
  });
});
