/**
 * SQL over an export folder with DuckDB, the way Athena sees it: one view per table over its
 * Parquet files with the `dt` partition column, so the same query text runs on both.
 */
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { PARTITION_KEY, tablePrefix } from '../../shared/export/layout.js';
import { TABLE_NAMES } from '../../shared/export/tables.js';

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
}

export interface LakeSql {
  query(sql: string): Promise<QueryResult>;
  close(): void;
}

/** Opens DuckDB with a view per table over `<root>/parquet/<table>/dt=*\/*.parquet`. */
export async function openLakeSql(root: string): Promise<LakeSql> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  for (const table of TABLE_NAMES) {
    const glob = join(root, tablePrefix(table), `${PARTITION_KEY}=*`, '*.parquet').replaceAll("'", "''");
    await connection.run(
      `CREATE VIEW ${table} AS SELECT * FROM read_parquet('${glob}', hive_partitioning = true, union_by_name = true)`,
    );
  }
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

/** A query result as an aligned text table. */
export function formatResult({ columns, rows }: QueryResult): string {
  const cells = rows.map((row) => row.map((v) => (v === null || v === undefined ? 'NULL' : String(v))));
  const widths = columns.map((c, i) =>
    Math.max(c.length, ...cells.map((r) => Math.min(40, r[i]?.length ?? 0))),
  );
  const fmt = (values: string[]) =>
    values.map((v, i) => (v.length > 40 ? `${v.slice(0, 39)}…` : v).padEnd(widths[i] ?? 0)).join(' │ ');
  const rule = widths.map((w) => '─'.repeat(w)).join('─┼─');
  return [fmt(columns), rule, ...cells.map(fmt)].join('\n');
}
