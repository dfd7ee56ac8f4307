/**
 * DuckDB as the independent reader in tests: read Parquet and gzip JSON Lines back, inspect
 * their schemas. Files are written to a private temp folder, removed on close.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance, type DuckDBValue, type JS } from '@duckdb/node-api';

export type JsRow = Record<string, JS>;

/** A row of DuckDB's `parquet_schema()` (the fields tests look at). */
export interface ParquetSchemaRow {
  name: string;
  type: string | null;
  repetition_type: string | null;
  converted_type: string | null;
  logical_type: string | null;
  num_children: bigint | null;
}

export interface DuckDb {
  /** Runs `sql` ($1… bound to `params`) and returns every row as JS (BIGINT → bigint, TIMESTAMP → Date). */
  all(sql: string, params?: DuckDBValue[]): Promise<JsRow[]>;
  /** Runs `sql` and returns the column names and DuckDB type names of its result. */
  columns(sql: string): Promise<{ name: string; type: string }[]>;
  /** Writes `bytes` to a new file in the temp folder; returns its path, quoted for SQL. */
  file(bytes: Uint8Array | string, extension: string): Promise<string>;
  /** A new path in the temp folder (not created), quoted for SQL. */
  path(extension: string): string;
  readonly dir: string;
  close(): Promise<void>;
}

const quote = (path: string) => `'${path.replaceAll("'", "''")}'`;

/**
 * Opens an in-memory DuckDB and a temp folder.
 *
 * @example
 * const db = await openDuckDb();
 * const rows = await db.all(`SELECT * FROM read_parquet(${await db.file(bytes, 'parquet')})`);
 * await db.close();
 */
export async function openDuckDb(): Promise<DuckDb> {
  const dir = await mkdtemp(join(tmpdir(), 'duckdb-test-'));
  const instance = await DuckDBInstance.create(':memory:');
  const connection: DuckDBConnection = await instance.connect();
  let n = 0;
  return {
    dir,
    async all(sql, params) {
      const reader = await connection.runAndReadAll(sql, params);
      return reader.getRowObjectsJS();
    },
    async columns(sql) {
      const reader = await connection.runAndReadAll(sql);
      return reader.columnNames().map((name, i) => ({ name, type: reader.columnType(i).toString() }));
    },
    async file(bytes, extension) {
      const path = join(dir, `f${n++}.${extension}`);
      await writeFile(path, bytes);
      return quote(path);
    },
    path(extension) {
      return quote(join(dir, `f${n++}.${extension}`));
    },
    async close() {
      connection.closeSync();
      instance.closeSync();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Every row of a Parquet file, in file order. */
export async function readParquet(db: DuckDb, bytes: Uint8Array): Promise<JsRow[]> {
  return db.all(`SELECT * FROM read_parquet(${await db.file(bytes, 'parquet')})`);
}

/** The leaf and group elements of a Parquet file's schema, as DuckDB reports them. */
export async function parquetSchema(db: DuckDb, bytes: Uint8Array): Promise<ParquetSchemaRow[]> {
  const rows = await db.all(
    `SELECT name, type, repetition_type, converted_type, logical_type, num_children
     FROM parquet_schema(${await db.file(bytes, 'parquet')})`,
  );
  return rows as unknown as ParquetSchemaRow[];
}

/** The compression codec of every column chunk of a Parquet file. */
export async function parquetCodecs(db: DuckDb, bytes: Uint8Array): Promise<string[]> {
  const rows = await db.all(
    `SELECT DISTINCT compression FROM parquet_metadata(${await db.file(bytes, 'parquet')})`,
  );
  return rows.map((r) => String(r.compression));
}

/** Every line of a gzip JSON Lines file, read by DuckDB's own JSON reader. */
export async function readJsonLines(db: DuckDb, gzipped: Uint8Array): Promise<JsRow[]> {
  return db.all(
    `SELECT * FROM read_json(${await db.file(gzipped, 'jsonl.gz')}, format = 'newline_delimited', compression = 'gzip')`,
  );
}
