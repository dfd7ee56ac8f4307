/**
 * The rows of a batch, every table at once: the {@link RowSink} list items and reports are
 * flattened into, kept column by column for the Parquet encoder.
 */

import { icebergParquetTable } from '../../iceberg/schema.js';
import { PARTITION_KEY, type TableFormat } from '../../layout.js';
import { ColumnBuffer, encodeParquetColumns } from '../../parquet/encode.js';
import type { ParquetTable } from '../../parquet/schema.js';
import {
  type Cell,
  type Row,
  type SchemaContract,
  schemaContractOf,
  TABLE_NAMES,
  type TableName,
  tablesOf,
} from '../tables.js';
import type { RowSink } from './flatten.js';

/** What a buffer needs to know of its run (a `RunRef`): its table format, schema contract and date. */
export interface RunFormat {
  table_format?: TableFormat | undefined;
  /** Absent: `freeze` (`schemaContractOf`). */
  schema_contract?: SchemaContract | undefined;
  dt: string;
}

/**
 * The Parquet table a run writes `table` as: its schema contract's (`tablesOf`: `TABLES` for
 * `evolve`, `FROZEN_TABLES` for `freeze`) for Hive; for Iceberg, the same columns with field
 * ids, MICROS timestamps and `dt` (see `shared/iceberg/schema.ts`).
 */
export function parquetTableOf(
  run: Pick<RunFormat, 'table_format' | 'schema_contract'> | undefined,
  table: TableName,
): ParquetTable {
  const contract = schemaContractOf(run ?? {});
  return run?.table_format === 'iceberg' ? icebergParquetTable(table, contract) : tablesOf(contract)[table];
}

/**
 * Collects rows of every table: the {@link RowSink} a batch of reports is flattened into.
 *
 * @example
 * const buffer = new TableBuffer();
 * for (const r of fetched) appendReportRows(buffer, r.report, r.ids, ctx);
 * for (const t of REPORT_TABLES) await put(t, buffer.encode(t));
 */
export class TableBuffer implements RowSink {
  readonly #tables: Map<TableName, ColumnBuffer>;
  /** The run's `dt`, written into every row of an Iceberg run (its tables' partition column). */
  readonly #dt: string | undefined;

  /** `run`: the run the rows are for (its table format, schema contract and date); default a Hive `freeze` run. */
  constructor(run?: RunFormat) {
    this.#tables = new Map(TABLE_NAMES.map((name) => [name, new ColumnBuffer(parquetTableOf(run, name))]));
    this.#dt = run?.table_format === 'iceberg' ? run.dt : undefined;
  }

  add(table: TableName, row: Row): void {
    if (this.#dt !== undefined) row[PARTITION_KEY] = this.#dt;
    this.#tables.get(table)!.add(row);
  }

  /** Rows collected for `table`. */
  rowCount(table: TableName): number {
    return this.#tables.get(table)!.rowCount;
  }

  /** The cells of `table`, one array per column of its Parquet table (`parquetTableOf`). */
  columns(table: TableName): readonly (readonly Cell[])[] {
    return this.#tables.get(table)!.columns;
  }

  /** The rows collected for `table` as one Parquet file. */
  encode(table: TableName): Uint8Array {
    return encodeParquetColumns(this.#tables.get(table)!.table, this.columns(table));
  }

  /** Rows of every table now: where the rows added next start, for {@link check} and {@link truncate}. */
  mark(): RowMark {
    return new Map([...this.#tables].map(([name, buffer]) => [name, buffer.rowCount]));
  }

  /**
   * Throws, naming the table, column and row, when a cell added since `since` (default: any)
   * would not encode (see `ColumnBuffer.check`).
   */
  check(since?: RowMark): void {
    for (const [name, buffer] of this.#tables) buffer.check(since?.get(name) ?? 0);
  }

  /**
   * Drops every row added since `mark`. With {@link check}, how one report's rows join a batch
   * all or nothing: dropping only shortens arrays, so it cannot fail half-way.
   *
   * @example
   * const mark = batch.mark();
   * try {
   *   appendReportRows(batch, report, ids, ctx);
   *   batch.check(mark);
   * } catch (error) {
   *   batch.truncate(mark); // the batch holds no row of this report
   * }
   */
  truncate(mark: RowMark): void {
    for (const [name, buffer] of this.#tables) buffer.truncate(mark.get(name) ?? 0);
  }
}

/** Rows per table at one moment (see `TableBuffer.mark`). */
export type RowMark = ReadonlyMap<TableName, number>;
