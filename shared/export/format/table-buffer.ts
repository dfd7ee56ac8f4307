/**
 * The rows of a batch, every table at once: the {@link RowSink} list items and reports are
 * flattened into, kept column by column for the Parquet encoder.
 */

import { ColumnBuffer, encodeParquetColumns } from '../../parquet/encode.js';
import { type Cell, type Row, TABLE_NAMES, TABLES, type TableName } from '../tables.js';
import type { RowSink } from './flatten.js';

/**
 * Collects rows of every table: the {@link RowSink} a batch of reports is flattened into.
 *
 * @example
 * const buffer = new TableBuffer();
 * for (const r of fetched) appendReportRows(buffer, r.report, r.ids, ctx);
 * for (const t of REPORT_TABLES) await put(t, buffer.encode(t));
 */
export class TableBuffer implements RowSink {
  readonly #tables = new Map<TableName, ColumnBuffer>(
    TABLE_NAMES.map((name) => [name, new ColumnBuffer(TABLES[name])]),
  );

  add(table: TableName, row: Row): void {
    this.#tables.get(table)!.add(row);
  }

  /** Rows collected for `table`. */
  rowCount(table: TableName): number {
    return this.#tables.get(table)!.rowCount;
  }

  /** The cells of `table`, one array per column in `TABLES` order. */
  columns(table: TableName): readonly (readonly Cell[])[] {
    return this.#tables.get(table)!.columns;
  }

  /** The rows collected for `table` as one Parquet file. */
  encode(table: TableName): Uint8Array {
    return encodeParquetColumns(TABLES[table], this.columns(table));
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
