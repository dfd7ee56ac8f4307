/**
 * SQL over an export folder with DuckDB, the way Athena sees it: one view per table over its
 * Parquet files with the `dt` partition column, `runs` over the run manifests, and the
 * `*_latest` views from the very SQL text the Glue catalog registers, so the same query text
 * runs on both engines.
 */
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { PARTITION_KEY, RUNS_PREFIX, tablePrefix } from '../../shared/export/layout.js';
import { TABLE_NAMES } from '../../shared/export/tables.js';
import {
  duckdbType,
  LATEST_VIEWS,
  RUNS_TABLE,
  RUNS_VIEW_COLUMNS,
  type SqlColumn,
  tableColumns,
} from '../../shared/export/views.js';
import { displayWidth, oneLine, padEnd, truncate } from './columns.js';

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
}

export interface LakeSql {
  query(sql: string): Promise<QueryResult>;
  close(): void;
}

const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/** A typed view with no rows: what a table reads as before any run wrote it. */
const emptyView = (columns: readonly SqlColumn[]): string =>
  `SELECT ${columns.map((c) => `CAST(NULL AS ${duckdbType(c.type)}) AS ${c.name}`).join(', ')} WHERE false`;

async function matchesAnyFile(connection: DuckDBConnection, glob: string): Promise<boolean> {
  const reader = await connection.runAndReadAll(`SELECT count(*) FROM glob(${literal(glob)})`);
  return Number(reader.getRowsJS()[0]?.[0] ?? 0) > 0;
}

/**
 * Opens DuckDB over an export folder (what is in it now; a table written later needs a new one):
 * - a view per table over `<root>/parquet/<table>/dt=*\/*.parquet`: the table's columns in
 *   order, then `dt` as a string (as Athena's partition column is);
 * - `runs` over `<root>/runs/dt=*\/*.json` (one line of JSON per manifest), `dt` last;
 * - the `*_latest` views, created from `shared/export/views.ts` like the Glue ones.
 * DuckDB's readers fail on a glob that matches nothing, so a table without files is an empty
 * typed view instead: it reads as zero rows with the right columns, and queries still run.
 */
export async function openLakeSql(root: string): Promise<LakeSql> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  for (const table of TABLE_NAMES) {
    const columns = tableColumns(table);
    const glob = join(root, tablePrefix(table), `${PARTITION_KEY}=*`, '*.parquet');
    const source = (await matchesAnyFile(connection, glob))
      ? `SELECT ${columns.map((c) => c.name).join(', ')} FROM read_parquet(${literal(glob)}, ` +
        `hive_partitioning = true, hive_types = {'${PARTITION_KEY}': VARCHAR}, union_by_name = true)`
      : emptyView(columns);
    await connection.run(`CREATE VIEW ${table} AS ${source}`);
  }

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

  for (const view of LATEST_VIEWS) await connection.run(`CREATE VIEW ${view.name} AS ${view.sql}`);

  return {
    async query(sql) {
      const reader = await connection.runAndReadAll(sql);
      return { columns: reader.columnNames(), rows: reader.getRowsJS() as unknown[][] };
    },
    close() {
      connection.closeSync();
      instance.closeSync();
    },
  };
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
