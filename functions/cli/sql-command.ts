/**
 * The `sql` command: DuckDB over an export (a folder or s3://bucket/prefix) with the tables,
 * `runs` and the `*_latest` views defined as Athena has them, `dt` a string. `npm run sql` and
 * the packaged `campaign-report-exporter sql` both call {@link sqlCommand}.
 *
 * SQL comes from `-c` (each one run in order), else from stdin: an interactive prompt on a
 * terminal, the whole input as a script otherwise. The prompt's dot-commands (`.tables`,
 * `.quit`) work in a script and in `-c` too, on a line of their own between statements.
 * Results go to stdout; errors are one line on stderr, `error: <reason>`.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import * as z from 'zod';
import { ConfigError, describeError, ExporterError } from '../../shared/errors.js';
import { ICEBERG_ROOT, PARQUET_ROOT, RUNS_ROOT, rawPrefix } from '../../shared/layout.js';
import { isS3Out } from '../../shared/storage/open.js';
import { readerCatalog } from './catalog.js';
import { argumentError, OUT_OPTIONS, OUT_SHAPE, outValues, resolveOut } from './config.js';
import { openOut } from './deps.js';
import { loadDuckDb } from './duckdb-loader.js';
import { type MirrorStats, mirrorLake } from './lake-mirror.js';
import {
  type DuckDbModule,
  formatResult,
  type LakeSql,
  openLake,
  openLakeSql,
  type StatementResult,
} from './sql.js';

/** Exit codes of the sql command (USAGE and docs/cli.md say the same). */
export const SQL_EXIT = { ok: 0, failed: 1, usage: 2 } as const;

export const SQL_FORMATS = ['table', 'csv', 'json'] as const;
export type SqlFormat = (typeof SQL_FORMATS)[number];

export const SQL_USAGE = `Usage: campaign-report-exporter sql --out <DIR | s3://bucket/prefix> [options]
       npm run --silent sql -- --out <DIR | s3://bucket/prefix> [options]   (in a checkout)

Opens DuckDB over an export with the tables and views its Athena stack has for the output's
table format: a view per table (dt a string, as in Athena), runs, raw_reports, and the *_latest
views (Iceberg: the *_current tables, *_latest of campaigns and jobs only), so the queries of
docs/query.md run as they are (docs/query.md#the-sql-command).

Options:
  --out <DIR|s3://bucket/prefix>  the export to read (required); a relative DIR is taken from
                                  the folder you ran the command in. From S3, the files the
                                  views read are copied into a temporary folder first
  -c, --command <SQL>             run this SQL and exit (one statement or several, separated by
                                  ;); repeat to run more. Without it, SQL is read from stdin: a
                                  prompt on a terminal, else the whole input as one script
  --format <table|csv|json>       how results are printed (default table): table, aligned
                                  columns; csv, a header line then RFC 4180 rows, NULL empty;
                                  json, JSON Lines, one object per row (integers as numbers up
                                  to 2^53-1, larger ones and DECIMAL as strings, exact)
  --s3-region <region>            region of the bucket (default: AWS_REGION, else us-east-1)
  --s3-endpoint <url>             an S3-compatible endpoint (path-style addressing)
  -h, --help                      this text

At the prompt: end a statement with ; (it may span lines); .tables lists the views, .quit or
Ctrl-D leaves, Ctrl-C drops the statement being typed. In a script on stdin or in -c, .tables
and .quit work on a line of their own after a statement's ;.

DuckDB (@duckdb/node-api) is installed on first use by the packaged CLI, into
$XDG_CACHE_HOME/campaign-report-exporter/ (default ~/.cache/...), or into the folder
CAMPAIGN_REPORT_EXPORTER_DUCKDB_DIR names.

Exit codes:
  ${SQL_EXIT.ok}  every statement ran (at the prompt: you left it)
  ${SQL_EXIT.failed}  a statement failed (one line on stderr; the statements after it did not run),
     or the export could not be opened
  ${SQL_EXIT.usage}  usage error: a flag missing or wrong`;

const SqlConfigSchema = z.object({
  out: OUT_SHAPE.out,
  commands: z.array(z.string()),
  format: z.enum(SQL_FORMATS, {
    error: (issue) => `--format takes table, csv or json, got ${String(issue.input)}`,
  }),
  s3Region: OUT_SHAPE.s3Region,
  s3Endpoint: OUT_SHAPE.s3Endpoint,
});
export type SqlConfig = z.infer<typeof SqlConfigSchema>;

/** Parses argv; `help` when --help was asked. Throws ConfigError on bad input. */
export function parseSqlCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
): SqlConfig | 'help' {
  let values: Record<string, string | string[] | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ...OUT_OPTIONS,
        command: { type: 'string', short: 'c', multiple: true, default: [] },
        format: { type: 'string', default: 'table' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (cause) {
    throw argumentError(cause);
  }
  if (values.help) return 'help';
  const parsed = SqlConfigSchema.safeParse({
    ...outValues(values, env),
    commands: values.command,
    format: values.format,
  });
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => i.message).join('; '));
  return { ...parsed.data, out: resolveOut(parsed.data.out, cwd) };
}

/** The command's surroundings; tests pass their own. */
export interface SqlIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** The folder a relative --out is taken from (default: the working folder). */
  cwd: string;
  /** DuckDB; default: found or installed by loadDuckDb. */
  duckdb: () => Promise<DuckDbModule>;
}

/** Runs `sql` with `argv` (the flags after the command) and `env`; resolves to the exit code. */
export async function sqlCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  io: Partial<SqlIo> = {},
): Promise<number> {
  const stdin = io.stdin ?? process.stdin;
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const fail = (error: unknown, hint?: string): void => {
    stderr.write(`error: ${describeError(error)}${hint ? ` (${hint})` : ''}\n`);
  };

  let config: SqlConfig | 'help';
  try {
    config = parseSqlCli(argv, env, io.cwd ?? process.cwd());
  } catch (error) {
    fail(error, 'see --help');
    return SQL_EXIT.usage;
  }
  if (config === 'help') {
    stdout.write(`${SQL_USAGE}\n`);
    return SQL_EXIT.ok;
  }

  let lake: OpenedLake;
  try {
    lake = await openExport(config, io.duckdb ?? (() => loadDuckDb({ env, stderr })), stderr);
  } catch (error) {
    fail(error);
    return SQL_EXIT.failed;
  }
  // A reader that stops early (`| head`) closes the pipe: the command stops there, quietly, as
  // commands in a pipe do, instead of dying of an unhandled EPIPE. The listener stays: the
  // error can come after the last write, when the command has returned.
  let stdoutClosed = false;
  const onStdoutError = () => {
    stdoutClosed = true;
  };
  const events = stdout as Partial<NodeJS.EventEmitter>;
  events.on?.('error', onStdoutError);
  try {
    const print = (result: StatementResult) => {
      if (stdoutClosed) throw new StdoutClosedError();
      if (result.returnsRows) stdout.write(formatStatementResult(result, config.format));
    };
    if (config.commands.length > 0 || !stdin.isTTY) {
      const scripts = config.commands.length > 0 ? config.commands : [await readAll(stdin)];
      for (const script of scripts) {
        for (const step of scriptSteps(script)) {
          if (step.dot === 'quit') return SQL_EXIT.ok;
          for await (const result of lake.sql.run(step.dot === undefined ? step.sql : TABLES_SQL))
            print(result);
        }
      }
      return SQL_EXIT.ok;
    }
    await prompt(lake.sql, { stdin, stdout, stderr }, print, config.out);
    return SQL_EXIT.ok;
  } catch (error) {
    if (stdoutClosed) return SQL_EXIT.ok;
    stderr.write(`error: ${sqlErrorLine(error)}\n`);
    return SQL_EXIT.failed;
  } finally {
    await lake.close();
  }
}

/** stdout was closed by its reader: nothing more to print. */
class StdoutClosedError extends Error {
  constructor() {
    super('stdout was closed');
    this.name = 'StdoutClosedError';
  }
}

interface OpenedLake {
  sql: LakeSql;
  close(): Promise<void>;
}

/**
 * Opens the export --out names: a folder as it is, S3 through a temporary local copy. DuckDB is
 * loaded (maybe installed) only once --out is known to hold an export.
 */
async function openExport(
  config: SqlConfig,
  duckdbOf: () => Promise<DuckDbModule>,
  stderr: SqlIo['stderr'],
): Promise<OpenedLake> {
  if (!isS3Out(config.out)) {
    const found = await stat(config.out).catch(() => undefined);
    if (!found?.isDirectory()) {
      throw new ExporterError(`--out ${config.out} is not a folder`, {
        hint: 'pass the --out of an export: a folder or s3://bucket/prefix',
      });
    }
    const entries = await readdir(config.out);
    if (![PARQUET_ROOT, ICEBERG_ROOT, RUNS_ROOT].some((name) => entries.includes(name)))
      throw new NoExportError(config.out);
    const sql = await openLakeSql(config.out, await duckdbOf());
    return { sql, close: async () => sql.close() };
  }

  const storage = openOut(config);
  /** An S3 failure, as one line naming --out and what to check. */
  const unreadable = (error: unknown) =>
    new ExporterError(`--out ${storage.location} cannot be read: ${describeError(error)}`, {
      cause: error,
      hint: 'check the credentials (they need s3:GetObject and s3:ListBucket on the prefix), --s3-region and --s3-endpoint',
    });
  let holdsRuns = false;
  try {
    for await (const _ of storage.list(`${RUNS_ROOT}/`)) {
      holdsRuns = true;
      break;
    }
  } catch (error) {
    throw unreadable(error);
  }
  if (!holdsRuns) throw new NoExportError(storage.location);

  const duckdb = await duckdbOf();
  const folder = await mkdtemp(join(tmpdir(), 'campaign-report-sql-'));
  const removeCopy = () => rm(folder, { recursive: true, force: true });
  try {
    const read = (what: string, { files: count, bytes }: MirrorStats) =>
      stderr.write(`Read ${count} files (${(bytes / 1048576).toFixed(1)} MiB) of ${what} into ${folder}\n`);
    const mirror = await mirrorLake(storage, folder, (added) =>
      read(`${storage.location}/${rawPrefix('reports')}`, added),
    );
    const files = {
      ...mirror,
      catalog: await readerCatalog(storage),
      fetchRawReports: async () => {
        try {
          await mirror.fetchRawReports();
        } catch (error) {
          throw unreadable(error);
        }
      },
    };
    const sql = await openLake(files, duckdb);
    read(storage.location, files.stats);
    return {
      sql,
      close: async () => {
        sql.close();
        await removeCopy();
      },
    };
  } catch (error) {
    await removeCopy();
    // The Glue catalog's own line (readerCatalog) names what is missing already.
    throw error instanceof ConfigError ? error : unreadable(error);
  }
}

/** --out names no export: nothing the views could read. */
class NoExportError extends ExporterError {
  constructor(where: string) {
    super(`--out ${where} holds no export (no ${RUNS_ROOT}/, ${PARQUET_ROOT}/ or ${ICEBERG_ROOT}/)`, {
      hint: 'pass the --out an export wrote to',
    });
    this.name = 'NoExportError';
  }
}

/** DuckDB's error as one line: its first paragraph ("Catalog Error: … Did you mean …?"), not the caret picture after it. */
export function sqlErrorLine(error: unknown): string {
  if (error instanceof ExporterError) return describeError(error);
  const message = error instanceof Error ? error.message : String(error);
  const [paragraph = ''] = message
    .replace(/^Failed to extract statements: /, '')
    .split(/\n\s*\n|\nLINE \d+:/);
  return paragraph
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join(' ');
}

/** A result as `format` prints it, ending with a newline. */
export function formatStatementResult(result: StatementResult, format: SqlFormat): string {
  if (format === 'json')
    return result
      .jsonRows()
      .map((row) => `${JSON.stringify(row)}\n`)
      .join('');
  const rows = result.textRows();
  if (format === 'csv') {
    return [result.columns, ...rows].map((row) => `${row.map(csvField).join(',')}\r\n`).join('');
  }
  const count = `(${rows.length} ${rows.length === 1 ? 'row' : 'rows'})`;
  return `${formatResult({ columns: result.columns, rows })}\n${count}\n`;
}

/** RFC 4180: quoted when it holds a comma, a quote or a line break; NULL empty, '' as `""`. */
const csvField = (value: string | null): string =>
  value === null ? '' : value === '' || /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream)
    text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  return text;
}

/** The views, for `.tables`. */
const TABLES_SQL =
  "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1";

/** The dot-commands, by what is typed: the same at the prompt, in a script and in `-c`. */
const DOT_COMMANDS: Readonly<Record<string, 'tables' | 'quit'>> = {
  '.tables': 'tables',
  '.quit': 'quit',
  '.exit': 'quit',
};

/** A dot-command that is none of {@link DOT_COMMANDS}: one line naming those there are. */
class UnknownDotCommandError extends ExporterError {
  constructor(typed: string) {
    super(`unknown command ${typed}: the commands are .tables and .quit`);
    this.name = 'UnknownDotCommandError';
  }
}

/** One step of a script: SQL (one statement or several), or a dot-command. */
export type ScriptStep = { sql: string; dot?: undefined } | { dot: 'tables' | 'quit'; sql?: undefined };

/**
 * A script's steps in order. A line starting with `.` is a dot-command where a statement may
 * start: when the SQL before it is blank or ends with `;` (comment lines aside). Elsewhere it is
 * SQL (the middle of a statement), left to DuckDB. Throws on an unknown dot-command, before
 * anything runs.
 */
export function scriptSteps(script: string): ScriptStep[] {
  const steps: ScriptStep[] = [];
  let sql = '';
  for (const line of script.split('\n')) {
    const typed = line.trim();
    if (typed.startsWith('.') && statementsComplete(sql)) {
      const dot = DOT_COMMANDS[typed];
      if (dot === undefined) throw new UnknownDotCommandError(typed);
      if (sql.trim() !== '') steps.push({ sql });
      steps.push({ dot });
      sql = '';
    } else {
      sql += `${line}\n`;
    }
  }
  if (sql.trim() !== '') steps.push({ sql });
  return steps;
}

/** True when `sql` ends between statements: blank, or its last line of SQL (not a `--` comment) ends with `;`. */
function statementsComplete(sql: string): boolean {
  const lines = sql
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('--'));
  return lines.length === 0 || lines.at(-1)!.endsWith(';');
}

/**
 * The interactive prompt: lines gather until one ends with `;`, then run; an error is printed
 * and the prompt goes on. Resolves when the user leaves (.quit, Ctrl-D).
 */
async function prompt(
  sql: LakeSql,
  io: Pick<SqlIo, 'stdin' | 'stdout' | 'stderr'>,
  print: (result: StatementResult) => void,
  out: string,
): Promise<void> {
  const rl = createInterface({ input: io.stdin, output: io.stdout as NodeJS.WritableStream, terminal: true });
  let buffer = '';
  // Input may end (Ctrl-D, a closed pipe) while lines typed before are still being run.
  let closed = false;
  rl.on('close', () => {
    closed = true;
  });
  const ask = () => {
    if (closed) return;
    rl.setPrompt(buffer === '' ? 'sql> ' : '...> ');
    rl.prompt();
  };
  rl.on('SIGINT', () => {
    io.stdout.write(buffer === '' ? '^C (.quit or Ctrl-D to leave)\n' : '^C\n');
    buffer = '';
    rl.write(null, { ctrl: true, name: 'u' });
    ask();
  });
  io.stdout.write(`DuckDB over ${out}: end statements with ;  .tables lists the views, .quit leaves\n`);
  ask();
  for await (const line of rl) {
    const typed = buffer === '' ? line.trim() : '';
    const dot = DOT_COMMANDS[typed];
    if (dot === 'quit') break;
    const statement =
      dot === 'tables' ? TABLES_SQL : typed.startsWith('.') ? undefined : `${buffer}${line}\n`;
    if (statement === undefined) {
      io.stderr.write(`error: ${describeError(new UnknownDotCommandError(typed))}\n`);
    } else if (dot === 'tables' || statement.trimEnd().endsWith(';')) {
      buffer = '';
      try {
        for await (const result of sql.run(statement)) print(result);
      } catch (error) {
        io.stderr.write(`error: ${sqlErrorLine(error)}\n`);
      }
    } else {
      buffer = statement.trim() === '' ? '' : statement;
    }
    ask();
  }
  rl.close();
}
