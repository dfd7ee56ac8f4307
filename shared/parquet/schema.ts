/**
 * What the Parquet encoder needs to know of a table: column names, logical types and
 * nullability, and the cells it accepts. Nothing of reports or runs: `shared/export/tables.ts`
 * defines the contract's tables in these terms (its `Column` and `TableDef` extend them).
 */

/** Logical column types; each maps to one Parquet physical type (see `columnSchema`). */
export type ColumnType = 'string' | 'int' | 'bigint' | 'boolean' | 'timestamp' | 'array<string>';

/** One column of a table. */
export interface ParquetColumn {
  readonly name: string;
  readonly type: ColumnType;
  /** false when every row has a value. */
  readonly nullable: boolean;
  /**
   * The Parquet `field_id` of the column (an Iceberg table's field id), and of its list element
   * for `array<string>`. Absent: no field id is written.
   */
  readonly fieldId?: number;
  readonly elementFieldId?: number;
  /**
   * The unit a `timestamp` column is stored in: MILLIS (default; the Hive tables) or MICROS
   * (what the Iceberg spec asks of `timestamptz`). Cells are `Date`s either way.
   */
  readonly timestampUnit?: 'MILLIS' | 'MICROS';
}

/** A table: its name (used in error messages) and its columns, in file order. */
export interface ParquetTable {
  readonly name: string;
  readonly columns: readonly ParquetColumn[];
}

/** The range of an [int] column (Parquet INT32). */
export const INT32_MIN = -2147483648;
export const INT32_MAX = 2147483647;

/**
 * A cell as the encoder accepts it: a string, a safe integer (int, bigint), a boolean, a
 * `Date` (timestamp), an array of nullable strings (array<string>), or NULL.
 */
export type Cell = string | number | boolean | Date | null | readonly (string | null)[];
export type Row = Record<string, Cell>;
