/**
 * SQL over an export folder with DuckDB, the way Athena sees it: the very tables and views the
 * Glue catalog of the output's table format registers (infra/constructs/catalog.ts), no more and
 * no fewer: one view per table over its Parquet files with the `dt` partition column, `runs`
 * over the run manifests, `raw_reports` over the raw report lines, and the `*_latest` views
 * from the very SQL text the Glue catalog registers, so the same query text runs on both
 * engines. An Iceberg output's tables are read at their current snapshot: the live data files
 * its manifests list, less the rows its position delete files name (DuckDB's own `iceberg`
 * extension would do the same, but it cannot be installed without the internet).
 */
import { join } from 'node:path';
import type { DuckDBConnection, DuckDBResultReader, DuckDBValueConverter, Json } from '@duckdb/node-api';
import { outputTableFormat } from '../../shared/export/state/table-format.js';
import { TABLE_NAMES, type TableName } from '../../shared/export/tables.js';
import {
  athenaViews,
  duckdbType,
  RAW_REPORTS_COLUMNS,
  RAW_REPORTS_TABLE,
  RUNS_TABLE,
  RUNS_VIEW_COLUMNS,
  type SqlColumn,
  tableColumns,
} from '../../shared/export/views.js';
import type { IcebergCatalog } from '../../shared/iceberg/catalog.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../shared/iceberg/locations.js';
import { baseTableOf, ICEBERG_TABLE_NAMES } from '../../shared/iceberg/schema.js';
import { snapshotFiles } from '../../shared/iceberg/snapshot-files.js';
import {
  DEFAULT_TABLE_FORMAT,
  PARTITION_KEY,
  RUNS_PREFIX,
  rawPrefix,
  tablePrefix,
} from '../../shared/layout.js';
import { LocalStorage } from '../../shared/storage/local.js';
import type { Storage } from '../../shared/storage/storage.js';
import { displayWidth, oneLine, padEnd, truncate } from './columns.js';

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
}

/** One statement's result, as the `sql` command prints it. */
export interface StatementResult {
  columns: string[];
  /** False for a statement that returns no rows by nature (CREATE, SET …): nothing to print. */
  returnsRows: boolean;
  /** Each value as DuckDB's own text (`2026-11-22`, `[1, 2]`, `{'a': 1}`), null for NULL. */
  textRows(): (string | null)[][];
  /**
   * Each row as a JSON object: integers as numbers when a double holds them exactly
   * (|n| ≤ 2^53 - 1), larger ones and DECIMAL values as strings, exact.
   */
  jsonRows(): Record<string, unknown>[];
}

export interface LakeSql {
  query(sql: string): Promise<QueryResult>;
  /**
   * Runs `sql`, one statement or several separated by `;`, in order, yielding each one's result
   * before the next runs: a failing statement throws after the results of those before it.
   */
  run(sql: string): AsyncIterable<StatementResult>;
  close(): void;
}

/** The DuckDB Node API module: imported where it is installed (see duckdb-loader.ts). */
export type DuckDbModule = typeof import('@duckdb/node-api');

/**
 * Where the views read from: an output folder, or a local copy of the files an S3 output's
 * views need (lake-mirror.ts), DuckDB reading local files only (httpfs cannot be installed
 * offline).
 */
export interface LakeFiles {
  /** The output itself: its table format and its Iceberg metadata are read from here. */
  storage: Storage;
  /** A local folder holding the output's `parquet/`, `runs/` and `raw/reports/` files under their keys. */
  root: string;
  /**
   * Brings `raw/reports/` into `root`, called before the first statement that names
   * `raw_reports` (a copy of an S3 output fetches the raw lines only if they are queried: they
   * are the biggest part of a lake); absent when they are there already.
   */
  fetchRawReports?: (() => Promise<void>) | undefined;
  /** The local path of a file the output names by its location (an Iceberg data or delete file). */
  localPath(location: string): Promise<string>;
  /**
   * Where the Iceberg tables' current metadata is: the catalog the output is registered in
   * (Glue for a stack's bucket); default the file catalog over `storage`.
   */
  catalog?: IcebergCatalog | undefined;
}

const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/** A typed view with no rows: what a table reads as before any run wrote it. */
const emptyView = (columns: readonly SqlColumn[]): string =>
  `SELECT ${columns.map((c) => `CAST(NULL AS ${duckdbType(c.type)}) AS ${c.name}`).join(', ')} WHERE false`;

/**
 * The select list of `columns` over `source` (aliased `d`): a column that no file of the source
 * has reads as a typed NULL. A column a release added (`_rescued`) is absent from the files
 * written before it, and from every file of a `freeze` output; `union_by_name` gives NULL for
 * the files that lack it only when another file has it.
 */
async function selectList(
  connection: DuckDBConnection,
  columns: readonly SqlColumn[],
  source: string,
): Promise<string> {
  const described = await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`);
  const present = new Set(described.getRowsJS().map((row) => String(row[0])));
  return columns
    .map((c) => (present.has(c.name) ? `d.${c.name}` : `CAST(NULL AS ${duckdbType(c.type)}) AS ${c.name}`))
    .join(', ');
}

async function matchesAnyFile(connection: DuckDBConnection, glob: string): Promise<boolean> {
  const reader = await connection.runAndReadAll(`SELECT count(*) FROM glob(${literal(glob)})`);
  return Number(reader.getRowsJS()[0]?.[0] ?? 0) > 0;
}

/**
 * Opens DuckDB over an export folder (what is in it now; a table written later needs a new one):
 * - a view per table over `<root>/parquet/<table>/dt=*\/*.parquet`: the table's columns in
 *   order, then `dt` as a string (as Athena's partition column is); files are matched by column
 *   name, and a column no file has (`_rescued` in a `freeze` output) reads as NULL, as in Athena;
 * - (an Iceberg output: a view per Iceberg table instead, at its current snapshot);
 * - `runs` over `<root>/runs/dt=*\/*.json` (one line of JSON per manifest), `dt` last;
 * - `raw_reports` over `<root>/raw/reports/dt=*\/*.jsonl.gz`, `dt` last;
 * - the views the output's Athena stack has ({@link athenaViews}: every `*_latest` view for
 *   Hive, the listing ones for Iceberg), created from `shared/export/views.ts` like the Glue ones.
 * DuckDB's readers fail on a glob that matches nothing, so a table without files is an empty
 * typed view instead: it reads as zero rows with the right columns, and queries still run.
 */
export async function openLakeSql(root: string, duckdb?: DuckDbModule): Promise<LakeSql> {
  const storage = new LocalStorage(root);
  // A location is a file:// URI (a bare path in outputs written before): DuckDB gets the path.
  const localPath = async (location: string) =>
    join(storage.location, ...keyOfLocation(storage, location).split('/'));
  return openLake({ storage, root, localPath }, duckdb);
}

/**
 * Opens DuckDB over `files` with the views of {@link openLakeSql}. `duckdb`: the module to use;
 * default, the one this program resolves (a checkout's node_modules).
 */
export async function openLake(files: LakeFiles, duckdb?: DuckDbModule): Promise<LakeSql> {
  const { DuckDBInstance, ResultReturnType, JsonDuckDBValueConverter } =
    duckdb ?? (await import('@duckdb/node-api'));
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  // Fetched on first use when the source says so (an S3 copy): until then an empty typed view,
  // which no statement reads, since one that names it fetches first.
  let fetchRaw = files.fetchRawReports;
  try {
    const format = (await outputTableFormat(files.storage)) ?? DEFAULT_TABLE_FORMAT;
    if (format === 'iceberg') {
      await createIcebergViews(connection, files);
    } else {
      await createHiveViews(connection, files.root);
    }
    await createRunsView(connection, files.root);
    await createRawReportsView(connection, fetchRaw ? undefined : files.root);
    for (const view of athenaViews(format)) await connection.run(`CREATE VIEW ${view.name} AS ${view.sql}`);
  } catch (error) {
    connection.closeSync();
    instance.closeSync();
    throw error;
  }
  const rawReportsNamed = async (sql: string) => {
    if (!fetchRaw || !RAW_REPORTS_NAMED.test(sql)) return;
    await fetchRaw();
    fetchRaw = undefined;
    await createRawReportsView(connection, files.root, 'CREATE OR REPLACE VIEW');
  };

  /**
   * JSON as DuckDB's own converter writes it, but an integer a double holds exactly as a
   * number: `count(*)` and ids are BIGINT, and a string there surprises every JSON reader. A
   * larger one stays a string, since a JSON reader parsing it as a double would round it.
   */
  const exactJson: DuckDBValueConverter<Json> = (value, type, converter) =>
    typeof value === 'bigint' && value >= -MAX_EXACT && value <= MAX_EXACT
      ? Number(value)
      : JsonDuckDBValueConverter(value, type, converter);

  const resultOf = (reader: DuckDBResultReader): StatementResult => ({
    columns: reader.columnNames(),
    returnsRows: reader.returnType === ResultReturnType.QUERY_RESULT,
    textRows: () => reader.getRows().map((row) => row.map((v) => (v === null ? null : String(v)))),
    jsonRows: () => reader.convertRowObjects(exactJson),
  });

  return {
    async query(sql) {
      await rawReportsNamed(sql);
      const reader = await connection.runAndReadAll(sql);
      return { columns: reader.columnNames(), rows: reader.getRowsJS() as unknown[][] };
    },
    async *run(sql) {
      await rawReportsNamed(sql);
      const statements = await connection.extractStatements(sql);
      for (let i = 0; i < statements.count; i++) {
        yield resultOf(await (await statements.prepare(i)).runAndReadAll());
      }
    },
    close() {
      connection.closeSync();
      instance.closeSync();
    },
  };
}

/**
 * A view per Iceberg table (history and current tables) over its current snapshot: the
 * contract's columns, then `dt`. Data files are read by column name (`union_by_name`: the
 * exporter's names keep their field ids for ever), so files written before the table gained a
 * column read NULL in it. Position deletes are applied as Iceberg defines them: a
 * data file's row `pos` (from 0) is left out when a delete file names its path and position.
 * A delete file names the data file by its location in the output; DuckDB reads it at its
 * local path (the same path for a folder, a copy's for S3), so the two are paired first.
 */
async function createIcebergViews(connection: DuckDBConnection, lake: LakeFiles): Promise<void> {
  const catalog = lake.catalog ?? new FileCatalog(lake.storage);
  for (const table of ICEBERG_TABLE_NAMES) {
    const columns = tableColumns(baseTableOf(table) as TableName);
    const files = await snapshotFiles(lake.storage, catalog, table);
    const data = await Promise.all(
      files.data.map(async (location) => [location, await lake.localPath(location)]),
    );
    const deletes = await Promise.all(files.positionDeletes.map(lake.localPath));
    const list = (paths: string[]) => `[${paths.map(literal).join(', ')}]`;
    let source = emptyView(columns);
    if (data.length > 0) {
      const read = `read_parquet(${list(data.map(([, path]) => path!))}, hive_partitioning = false, union_by_name = true, filename = true, file_row_number = true)`;
      const names = await selectList(connection, columns, `${read} AS d`);
      const paths = `(VALUES ${data.map(([location, path]) => `(${literal(location!)}, ${literal(path!)})`).join(', ')}) AS p(location, path)`;
      source =
        deletes.length === 0
          ? `SELECT ${names} FROM ${read} AS d`
          : `SELECT ${names} FROM ${read} AS d ANTI JOIN (SELECT p.path, x.pos FROM read_parquet(${list(deletes)}, ` +
            `hive_partitioning = false) AS x JOIN ${paths} ON x.file_path = p.location) AS x ` +
            'ON d.filename = x.path AND d.file_row_number = x.pos';
    }
    await connection.run(`CREATE VIEW ${table} AS ${source}`);
  }
}

/** A view per table over its Hive-style files (see {@link openLakeSql}). */
async function createHiveViews(connection: DuckDBConnection, root: string): Promise<void> {
  for (const table of TABLE_NAMES) {
    const columns = tableColumns(table);
    const glob = join(root, tablePrefix(table), `${PARTITION_KEY}=*`, '*.parquet');
    const read =
      `read_parquet(${literal(glob)}, hive_partitioning = true, ` +
      `hive_types = {'${PARTITION_KEY}': VARCHAR}, union_by_name = true) AS d`;
    const source = (await matchesAnyFile(connection, glob))
      ? `SELECT ${await selectList(connection, columns, read)} FROM ${read}`
      : emptyView(columns);
    await connection.run(`CREATE VIEW ${table} AS ${source}`);
  }
}

/** `runs` over the run manifests, in both formats. */
async function createRunsView(connection: DuckDBConnection, root: string): Promise<void> {
  // The manifest carries its own dt (equal to its partition's): read it as a column, and keep
  // hive partitioning off so the two cannot clash. Fields not listed are ignored.
  const runsGlob = join(root, RUNS_PREFIX, `${PARTITION_KEY}=*`, '*.json');
  const runsSource = (await matchesAnyFile(connection, runsGlob))
    ? `SELECT ${RUNS_VIEW_COLUMNS.map((c) => c.name).join(', ')} FROM read_json(${literal(runsGlob)}, ` +
      `format = 'newline_delimited', hive_partitioning = false, columns = {${RUNS_VIEW_COLUMNS.map(
        (c) => `${literal(c.name)}: ${literal(duckdbType(c.type))}`,
      ).join(', ')}})`
    : emptyView(RUNS_VIEW_COLUMNS);
  await connection.run(`CREATE VIEW ${RUNS_TABLE} AS ${runsSource}`);
}

/** A statement that may read `raw_reports` (its name anywhere: a view of the user's over it too). */
const RAW_REPORTS_NAMED = new RegExp(RAW_REPORTS_TABLE, 'i');

/** The largest integer a JSON number (a double) holds exactly: 2^53 - 1. */
const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * `raw_reports` over the raw report lines under `root` (gzip JSON Lines), read as Athena's
 * table reads them: the line's fields by name with the contract's types, `data` as its JSON
 * text (an object or array as JSON, a string as itself), `dt` from the folder as a string.
 * Without `root`, an empty typed view (see `fetchRawReports`).
 */
async function createRawReportsView(
  connection: DuckDBConnection,
  root: string | undefined,
  create = 'CREATE VIEW',
): Promise<void> {
  const glob = root && join(root, rawPrefix('reports'), `${PARTITION_KEY}=*`, '*.jsonl.gz');
  const lineColumns = RAW_REPORTS_COLUMNS.filter((c) => c.name !== PARTITION_KEY);
  const source =
    glob && (await matchesAnyFile(connection, glob))
      ? `SELECT ${RAW_REPORTS_COLUMNS.map((c) => c.name).join(', ')} FROM read_json(${literal(glob)}, ` +
        `format = 'newline_delimited', hive_partitioning = true, hive_types = {'${PARTITION_KEY}': VARCHAR}, ` +
        `columns = {${lineColumns.map((c) => `${literal(c.name)}: ${literal(duckdbType(c.type))}`).join(', ')}})`
      : emptyView(RAW_REPORTS_COLUMNS);
  await connection.run(`${create} ${RAW_REPORTS_TABLE} AS ${source}`);
}

/** The widest a result column is shown, in terminal columns; a longer value is cut with `…`. */
const MAX_CELL_WIDTH = 40;

/**
 * A query result as an aligned text table. Widths are the columns text takes on a terminal
 * (CJK and emoji two, combining marks none), so rows line up whatever the data.
 */
export function formatResult({ columns, rows }: QueryResult): string {
  const cell = (v: unknown) =>
    truncate(oneLine(v === null || v === undefined ? 'NULL' : String(v)), MAX_CELL_WIDTH);
  const header = columns.map(cell);
  const cells = rows.map((row) => columns.map((_, i) => cell(row[i])));
  const widths = header.map((h, i) => Math.max(displayWidth(h), ...cells.map((r) => displayWidth(r[i]!))));
  const fmt = (values: string[]) => values.map((v, i) => padEnd(v, widths[i]!)).join(' │ ');
  const rule = widths.map((w) => '─'.repeat(w)).join('─┼─');
  return [fmt(header), rule, ...cells.map(fmt)].join('\n');
}
