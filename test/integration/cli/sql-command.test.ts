/**
 * The sql command in-process (sqlCommand with its own streams) on real DuckDB, over exports the
 * simulator's data made: a Hive folder with two runs, an Iceberg folder, and the same Hive
 * export on S3 (fauxqs on 127.0.0.1), read through a temporary copy.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { stripVTControlCharacters } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type SqlIo, sqlCommand } from '../../../functions/cli/sql-command.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import { Captured } from '../../helpers/cli.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../simulator/index.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const TSX = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
const SQL_MAIN = join(ROOT, 'functions/cli/sql-main.ts');

const DATASET: SimulatorOptions = { seed: 5, campaigns: 2, jobsPerCampaign: 6, reportSize: 'tiny' };

let simulator: Simulator;
let hive: string;
let iceberg: string;
let aws: LocalAws;

beforeAll(async () => {
  simulator = await startSimulator(DATASET);
  hive = await tempDir('sql-hive');
  iceberg = await tempDir('sql-iceberg');
  await exporter(simulator, hive).run({ dt: '2026-11-22', mode: 'full' });
  await exporter(simulator, hive).run({ dt: '2026-11-23' });
  aws = await startLocalAws();
  await aws.createBucket('lake');
  const storage = new S3Storage({ bucket: 'lake', prefix: 'acme', client: aws.s3Client() });
  await exporter(simulator, 's3://lake/acme', { storage }).run({ dt: '2026-11-22', mode: 'full' });
  // Iceberg, in a folder and on S3: a full run, then an incremental one after jobs changed,
  // whose reports supersede rows in files shared with other jobs (position deletes).
  const icebergS3 = new S3Storage({ bucket: 'lake', prefix: 'ice', client: aws.s3Client() });
  const icebergRun = (dt: string, mode: 'full' | 'incremental') => [
    exporter(simulator, iceberg).run({ dt, mode, tableFormat: 'iceberg' }),
    exporter(simulator, 's3://lake/ice', { storage: icebergS3 }).run({ dt, mode, tableFormat: 'iceberg' }),
  ];
  await Promise.all(icebergRun('2026-11-22', 'full'));
  for (const campaign of simulator.dataset.campaigns) simulator.dataset.touch(campaign.jobs[0]!.id);
  await Promise.all(icebergRun('2026-11-23', 'incremental'));
}, 120_000);

afterAll(async () => {
  await simulator?.close();
  await aws?.close();
});

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the command with its output captured; stdin is a pipe holding `input` unless given. */
async function sql(
  argv: string[],
  io: Partial<SqlIo> & { input?: string } = {},
  env: NodeJS.ProcessEnv = {},
) {
  const stdout = new Captured();
  const stderr = new Captured();
  const stdin = io.stdin ?? new PassThrough().end(io.input ?? '');
  const code = await sqlCommand(argv, env, { stdout, stderr, stdin, cwd: await tempDir('cwd'), ...io });
  return { code, stdout: stdout.text, stderr: stderr.text } satisfies Ran;
}

const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe('sql over an export folder', () => {
  it('defines every table, runs and the *_latest views, with dt a VARCHAR', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'json',
      '-c',
      "SELECT table_name, data_type FROM information_schema.columns WHERE column_name = 'dt' ORDER BY 1",
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const rows = jsonLines(r.stdout);
    const names = rows.map((row) => row.table_name);
    for (const view of ['campaigns', 'jobs', 'reports', 'sections', 'runs', 'reports_latest'])
      expect(names).toContain(view);
    expect(new Set(rows.map((row) => row.data_type))).toEqual(new Set(['VARCHAR']));
  });

  it('answers the two runs of the folder, and dt compares as a string', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'csv',
      '-c',
      "SELECT dt, count(*) AS n FROM campaigns WHERE dt >= '2026-11-22' GROUP BY dt ORDER BY dt",
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\r\n')).toEqual(['dt,n', '2026-11-22,2', '2026-11-23,2', '']);
  });

  it('prints CSV that parses back: quotes, commas, line breaks, NULL empty and an empty string quoted', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'csv',
      '-c',
      `SELECT 'a,b' AS x, 'say "hi"' AS y, e'two\\nlines' AS z, NULL AS n, '' AS e`,
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('x,y,z,n,e\r\n"a,b","say ""hi""","two\nlines",,""\r\n');
  });

  it('prints JSON Lines: integers a double holds exactly as numbers, nested ones too; larger ones and decimals as exact strings', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'json',
      '-c',
      'SELECT campaign_id, count(*) AS n FROM reports_latest GROUP BY campaign_id ORDER BY campaign_id LIMIT 1; ' +
        'SELECT counts FROM runs ORDER BY run_id LIMIT 1; ' +
        'SELECT 9007199254740991::BIGINT AS top, -9007199254740991::BIGINT AS bottom, 9007199254740992::BIGINT AS over, ' +
        '-9007199254740992::BIGINT AS under, 12::HUGEINT AS huge, [3::BIGINT] AS list, 1.50::DECIMAL(5, 2) AS dec',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [counted, run, edges] = jsonLines(r.stdout);
    expect(counted).toEqual({ campaign_id: expect.any(Number), n: expect.any(Number) });
    expect(typeof (run!.counts as Record<string, unknown>).jobs).toBe('number');
    expect(edges).toEqual({
      top: 9007199254740991,
      bottom: -9007199254740991,
      over: '9007199254740992',
      under: '-9007199254740992',
      huge: 12,
      list: [3],
      dec: '1.50',
    });
  });

  it('prints a table with a row count by default, and runs each -c in order', async () => {
    const r = await sql(['--out', hive, '-c', 'SELECT 1 AS one', '-c', 'SELECT 2 AS two, 3 AS three']);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'one',
      '───',
      '1  ',
      '(1 row)',
      'two │ three',
      '────┼──────',
      '2   │ 3    ',
      '(1 row)',
      '',
    ]);
  });

  it('reads a script from stdin when it is not a terminal, printing nothing for statements without rows', async () => {
    const r = await sql(['--out', hive, '--format', 'csv'], {
      input: 'CREATE TEMP TABLE t AS SELECT 41 AS v;\nSELECT v + 1 AS answer FROM t;\n',
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('answer\r\n42\r\n');
  });

  it('runs the dot-commands in a script on stdin and in -c: .tables lists, .quit stops the script', async () => {
    const r = await sql(['--out', hive, '--format', 'csv'], {
      input: 'SELECT 1 AS a;\n.tables\n-- a comment\nSELECT 2\n  AS b;\n  .quit\nSELECT 3 AS c;\n',
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\r\n');
    expect(lines.slice(0, 3)).toEqual(['a', '1', 'name']);
    for (const view of ['campaigns', 'raw_reports', 'reports_latest', 'runs']) expect(lines).toContain(view);
    expect(lines.slice(-3)).toEqual(['b', '2', '']);
    const c = await sql(['--out', hive, '--format', 'csv', '-c', '.tables']);
    expect(c.code).toBe(0);
    expect(c.stdout.split('\r\n')).toContain('reports_latest');
  });

  it('leaves a line starting with . inside a statement to SQL, and refuses an unknown dot-command before running anything', async () => {
    const inside = await sql(['--out', hive, '--format', 'csv'], { input: 'SELECT\n.5 AS half;\n' });
    expect(inside.stdout).toBe('half\r\n0.5\r\n');
    const r = await sql(['--out', hive, '--format', 'csv'], { input: 'SELECT 1 AS a;\n.schema\n' });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('error: unknown command .schema: the commands are .tables and .quit\n');
  });

  it('offers raw_reports over the raw report lines, as Athena has it: data the JSON text, dt a string', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'json',
      '-c',
      "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'raw_reports' ORDER BY ordinal_position",
      '-c',
      'SELECT (SELECT count(*) FROM raw_reports) AS lines, (SELECT count(*) FROM reports) AS rows, ' +
        "(SELECT count(*) FROM raw_reports r JOIN reports t USING (run_id, job_id) WHERE r.data->>'$.job.id' = CAST(t.job_id AS VARCHAR)) AS matched",
    ]);
    expect(r.stderr).toBe('');
    const [...rows] = jsonLines(r.stdout);
    expect(rows.slice(0, -1)).toEqual(
      [
        ['run_id', 'VARCHAR'],
        ['fetched_at', 'VARCHAR'],
        ['campaign_id', 'BIGINT'],
        ['job_id', 'BIGINT'],
        ['data', 'VARCHAR'],
        ['dt', 'VARCHAR'],
      ].map(([column_name, data_type]) => ({ column_name, data_type })),
    );
    const counts = rows.at(-1)!;
    expect(counts.lines).toBeGreaterThan(0);
    expect(counts).toEqual({ lines: counts.rows, rows: counts.rows, matched: counts.rows });
  });

  it('exits 1 with one line for a SQL error, after printing the statements before it', async () => {
    const r = await sql([
      '--out',
      hive,
      '--format',
      'csv',
      '-c',
      'SELECT 1 AS a; SELECT * FROM no_such_view; SELECT 2',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('a\r\n1\r\n');
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^error: Catalog Error: Table with name no_such_view does not exist!/);
  });

  it('exits 1 with one line for a parse error', async () => {
    const r = await sql(['--out', hive, '-c', 'SELEC 1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Parser Error: syntax error at or near "SELEC"\n$/);
  });

  it('exits 1 for a folder that holds no export, and for one that does not exist, before loading DuckDB', async () => {
    // The packaged CLI would install DuckDB there: not for a wrong --out.
    const duckdb = () => Promise.reject(new Error('DuckDB was asked for'));
    for (const out of [await tempDir('empty'), '/nonexistent/out']) {
      const r = await sql(['--out', out, '-c', 'SELECT 1'], { duckdb });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /^error: --out \S+ (holds no export|is not a folder)[^\n]*pass the --out[^\n]*\n$/,
      );
    }
  });

  it.each([
    [[], /--out is required/],
    [['--out', '.', '--format', 'xml'], /--format takes table, csv or json, got xml/],
    [['--out', '.', '--nope'], /unknown option --nope/],
    [['--out', '.', 'SELECT 1'], /unexpected argument SELECT 1/],
  ])('exits 2 on a usage error %j, with one line', async (argv, message) => {
    const r = await sql(argv);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stdout).toBe('');
  });
});

describe('npm run sql (functions/cli/sql-main.ts) in a pipe', () => {
  it('stops quietly with 0 when its reader closes the pipe early, as `| head` does', async () => {
    const child = spawn(
      process.execPath,
      [TSX, SQL_MAIN, '--out', hive, '--format', 'csv', '-c', 'SELECT * FROM range(500000)'],
      { env: { ...process.env, INIT_CWD: undefined }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [first] = (await once(child.stdout, 'data')) as [Buffer];
    child.stdout.destroy();
    const [code] = (await once(child, 'exit')) as [number];
    expect(first.toString('utf8')).toMatch(/^range\r\n0\r\n/);
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('the prompt on a terminal', () => {
  /** Runs the prompt on a stdin and stdout that say they are a terminal; stdout as plain text. */
  async function atPrompt(lines: string[], end = true) {
    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    const stdout = Object.assign(new PassThrough(), { isTTY: true, columns: 100 });
    let text = '';
    stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    const ran = sql(['--out', hive, '--format', 'csv'], { stdin, stdout });
    for (const line of lines) stdin.write(`${line}\n`);
    if (end) stdin.end();
    const r = await ran;
    // Without the prompt's cursor moves and line clears.
    return { ...r, stdout: stripVTControlCharacters(text) };
  }

  it('runs a statement once a line ends with ;, over several lines, goes on after an error, stops at .quit', async () => {
    const r = await atPrompt([
      'SELECT 1',
      '  AS a;',
      'SELECT * FROM nope;',
      'SELECT 2 AS b;',
      '.quit',
      'SELECT 3 AS c;',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('\na\r\n1\r\nb\r\n2\r\n');
    expect(r.stdout).not.toContain('\nc\r\n');
    expect(r.stderr).toMatch(/^error: Catalog Error: Table with name nope does not exist![^\n]*\n$/);
  });

  it('lists the views on .tables, refuses an unknown dot command, and leaves on Ctrl-D with 0', async () => {
    const r = await atPrompt(['.tables', '.nope']);
    expect(r.code).toBe(0);
    for (const view of ['campaigns', 'reports_latest', 'runs'])
      expect(r.stdout).toMatch(new RegExp(`\\n${view}\\r\\n`));
    expect(r.stderr).toBe('error: unknown command .nope: the commands are .tables and .quit\n');
  });
});

describe('sql over an Iceberg folder', () => {
  it('reads the tables at their current snapshot, with the *_current tables and dt a VARCHAR', async () => {
    const r = await sql([
      '--out',
      iceberg,
      '--format',
      'json',
      '-c',
      'SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM reports_current) AS current, typeof((SELECT dt FROM jobs LIMIT 1)) AS dt_type',
    ]);
    expect(r.stderr).toBe('');
    const [row] = jsonLines(r.stdout);
    expect(row).toEqual({ jobs: 24, current: expect.any(Number), dt_type: 'VARCHAR' });
    expect(row!.current).toBeGreaterThan(0);
  });
});

describe('sql over an export on S3', () => {
  // The SDK reads its credentials from the process's environment, not from the env passed.
  beforeAll(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', aws.credentials.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', aws.credentials.secretAccessKey);
  });
  afterAll(() => {
    vi.unstubAllEnvs();
  });
  const env = () => ({});

  it('reads Iceberg tables at their current snapshot, deletes applied, as the same export in a folder', async () => {
    const q = [
      '--format',
      'csv',
      '-c',
      'SELECT (SELECT count(*) FROM reports) AS history, (SELECT count(*) FROM reports_current) AS current, ' +
        '(SELECT count(DISTINCT job_id) FROM reports) AS jobs',
    ];
    const s3 = await sql(['--out', 's3://lake/ice', '--s3-endpoint', aws.endpoint, ...q], {}, env());
    const local = await sql(['--out', iceberg, ...q]);
    expect(s3.code).toBe(0);
    expect(s3.stdout).toBe(local.stdout);
    const [, values = ''] = s3.stdout.split('\r\n');
    const [history, current, jobs] = values.split(',').map(Number);
    expect(current).toBe(jobs);
    expect(history).toBeGreaterThan(jobs!);
  });

  it('fetches the raw report lines only for a statement that names raw_reports, then answers as the folder does', async () => {
    const out = ['--out', 's3://lake/ice', '--s3-endpoint', aws.endpoint, '--format', 'csv'];
    const without = await sql([...out, '-c', 'SELECT count(*) AS n FROM runs'], {}, env());
    expect(without.stderr.trimEnd().split('\n')).toHaveLength(1);
    const q = 'SELECT count(*) AS lines, count(DISTINCT job_id) AS jobs, min(dt) AS dt FROM raw_reports';
    const s3 = await sql([...out, '-c', 'SELECT 1 AS one', '-c', q, '-c', q], {}, env());
    const local = await sql(['--out', iceberg, '--format', 'csv', '-c', 'SELECT 1 AS one', '-c', q, '-c', q]);
    expect(s3.code).toBe(0);
    expect(s3.stdout).toBe(local.stdout);
    expect(local.stdout).toMatch(/^one\r\n1\r\nlines,jobs,dt\r\n[1-9]\d*,[1-9]\d*,2026-11-22\r\n/);
    const [whole, raw, ...rest] = s3.stderr.split('\n');
    expect(whole).toMatch(/^Read \d+ files \([\d.]+ MiB\) of s3:\/\/lake\/ice into /);
    expect(raw).toMatch(/^Read [1-9]\d* files \([\d.]+ MiB\) of s3:\/\/lake\/ice\/raw\/reports\/ into /);
    expect(rest).toEqual(['']);
  });

  it('answers as the same export in a folder would, and removes its temporary copy', async () => {
    const before = await readdir(tempRoot());
    const q = [
      '--format',
      'csv',
      '-c',
      "SELECT count(*) AS n, min(dt) AS dt FROM reports_latest WHERE dt = '2026-11-22'",
    ];
    const s3 = await sql(['--out', 's3://lake/acme', '--s3-endpoint', aws.endpoint, ...q], {}, env());
    expect(s3.code).toBe(0);
    expect(s3.stderr).toMatch(/^Read \d+ files \([\d.]+ MiB\) of s3:\/\/lake\/acme into /);
    const local = await sql([
      '--out',
      hive,
      '-c',
      "SELECT count(*) AS n FROM campaigns WHERE dt = '2026-11-22'",
      '--format',
      'csv',
    ]);
    expect(local.stdout).toBe('n\r\n2\r\n');
    const s3Campaigns = await sql(
      [
        '--out',
        's3://lake/acme',
        '--s3-endpoint',
        aws.endpoint,
        '--format',
        'csv',
        '-c',
        'SELECT count(*) AS n FROM campaigns',
      ],
      {},
      env(),
    );
    expect(s3Campaigns.stdout).toBe('n\r\n2\r\n');
    expect(s3.stdout).toMatch(/^n,dt\r\n[1-9]\d*,2026-11-22\r\n$/);
    expect((await readdir(tempRoot())).filter((f) => f.startsWith('campaign-report-sql-'))).toEqual(
      before.filter((f) => f.startsWith('campaign-report-sql-')),
    );
  });

  it('exits 1 with one line naming --out for a prefix that holds no export', async () => {
    const r = await sql(
      ['--out', 's3://lake/nothing-here', '--s3-endpoint', aws.endpoint, '-c', 'SELECT 1'],
      { duckdb: () => Promise.reject(new Error('DuckDB was asked for')) },
      env(),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: --out s3:\/\/lake\/nothing-here holds no export[^\n]*\n$/);
  });

  it('exits 1 with one line when the bucket does not exist', async () => {
    const r = await sql(
      ['--out', 's3://no-such-bucket/x', '--s3-endpoint', aws.endpoint, '-c', 'SELECT 1'],
      {},
      env(),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: --out s3:\/\/no-such-bucket\/x cannot be read: [^\n]*\n$/);
  });
});

const tempRoot = () => tmpdir();
