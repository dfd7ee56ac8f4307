/**
 * Several Parquet files of one table → one file of large row groups, streaming. A run stages
 * one file per batch of ~100 reports, so concatenating them (`concat.ts`) gives row groups of a
 * few hundred rows: each with its own dictionaries, page headers and statistics, which made a
 * published `reports` 2.6× the size of the same rows encoded once, and scans 1.4–3.5× slower.
 * Here the small row groups are decoded (hyparquet, `decode.ts`) and encoded again in groups of
 * up to {@link ROW_GROUP_ROWS} rows, one column at a time (so that memory holds one column of a
 * group decoded, never the whole group); a group that is already large is copied byte for byte,
 * as concatenation does. Row order is kept, so a large group between small ones ends the group
 * being filled. The output depends only on the inputs' bytes and order: the same inputs give
 * the same bytes.
 */

import { ByteWriter } from 'hyparquet-writer';
import { writeMetadata } from 'hyparquet-writer/src/metadata.js';
import { ExporterError } from '../errors.js';
import { ParquetConcat, type ParquetSource } from './concat.js';
import { type DecodableFile, decodeRows, openDecodable } from './decode.js';
import { type EncodeOptions, encodeRowGroupByColumn, ROW_GROUP_ROWS, tableSchema } from './encode.js';
import { equalBytes, type Footer, MAGIC, readFooter, schemaDifference, schemaEntries } from './footer.js';
import type { Cell, ParquetTable } from './schema.js';

/**
 * Uncompressed bytes of one output row group (as the inputs' row groups declare them). Report
 * rows are ~50–500 bytes, so {@link ROW_GROUP_ROWS} rows usually come first. Past a few MB per
 * column chunk, pages are full size and a bigger group no longer shrinks the file. A bound on
 * memory too: a group is encoded one column at a time, so what it holds decoded is one
 * column's values of at most this many bytes (2–3× that as JS values, ~100 MB in the worst
 * case of one column holding all of them, a few MB for a real table's widest column).
 */
export const REGROUP_BYTES = 32 * 1024 * 1024;

/** Rows of a small row group waiting for the output group: which ones, and where they are. */
interface Piece {
  source: ParquetSource;
  file: Uint8Array;
  /** The row group's index in its file. */
  index: number;
  /** The first row of the piece, counted from the file's first row. */
  rowStart: number;
  rows: number;
  /** Uncompressed bytes of its row group (the piece's share of them when it is part of one). */
  bytes: number;
  /** The whole row group, not a part of it: alone, it can be copied as it is. */
  whole: boolean;
}

export interface RegroupOptions extends EncodeOptions {
  /** Uncompressed bytes per output row group; default {@link REGROUP_BYTES}. */
  rowGroupBytes?: number;
}

/**
 * Regroups Parquet files written with `table`: `start()`, then `append()` each whole input in
 * order, then `finish()`; write every returned chunk to the output, in order. A row group is
 * copied as it is when it holds at least half an output group (in rows or bytes): merging it
 * would save little and cost a decode and an encode. Smaller ones are gathered, as the encoded
 * bytes of their files, and re-encoded together one column at a time: memory holds the
 * gathered inputs (at most one output group's worth of their encoded bytes, and the files
 * they are in), one column of the group decoded, and the group's encoded bytes. Throws an
 * `ExporterError` when an input's schema is not `table`'s (as {@link ParquetConcat} says),
 * or a value cannot be decoded exactly.
 *
 * @example
 * const regroup = new ParquetRegroup(TABLES.questions);
 * out.write(regroup.start());
 * for (const path of inputs) for (const chunk of await regroup.append(await readFile(path))) out.write(chunk);
 * for (const chunk of await regroup.finish()) out.write(chunk);
 */
export class ParquetRegroup {
  readonly #concat = new ParquetConcat();
  /** The footer of a file of `table` (no rows), for its schema. */
  readonly #expected: Footer;
  readonly #rowGroupRows: number;
  readonly #rowGroupBytes: number;
  readonly #encode: EncodeOptions;
  /** The rows gathered for the next output group, not decoded yet. */
  #pending: Piece[] = [];
  #pendingRows = 0;
  #pendingBytes = 0;

  constructor(
    readonly table: ParquetTable,
    options: RegroupOptions = {},
  ) {
    const { rowGroupBytes = REGROUP_BYTES, ...encode } = options;
    this.#rowGroupRows = encode.rowGroupRows ?? ROW_GROUP_ROWS;
    this.#rowGroupBytes = rowGroupBytes;
    this.#encode = encode;
    this.#expected = emptyFooter(table);
  }

  /** Rows written so far (copied or encoded; not those still gathered). */
  get rows(): number {
    return this.#concat.rows;
  }

  /** Output bytes returned so far. */
  get bytes(): number {
    return this.#concat.bytes;
  }

  /** The bytes that start the output file. Call once, first. */
  start(): Uint8Array {
    return this.#concat.start();
  }

  /**
   * Adds one whole Parquet file's rows. Returns the bytes to write next (none while its rows
   * are only gathered): views into `file` or into new encoded bytes. `file` is kept until the
   * rows gathered from it are encoded.
   */
  async append(file: Uint8Array): Promise<Uint8Array[]> {
    const source = this.#concat.open(file);
    // Every input is checked against the table, whether its groups are decoded or copied.
    const { schemaBytes, metadata } = source.checked;
    if (!equalBytes(schemaBytes, this.#expected.schemaBytes)) {
      const difference = schemaDifference(schemaEntries(this.#expected.metadata), schemaEntries(metadata));
      if (difference) {
        throw new ExporterError(
          `parquet table ${this.table.name}: a file's schema is not the table's: ${difference}`,
          {
            hint: 'regroup files with the table definition they were written with',
          },
        );
      }
    }
    const out: Uint8Array[] = [];
    let rowStart = 0;
    for (const [index, group] of source.rowGroups.entries()) {
      if (group.rows * 2 >= this.#rowGroupRows || group.bytes * 2 >= this.#rowGroupBytes) {
        await this.#flush(out);
        out.push(this.#concat.copyRowGroup(source, index));
      } else if (group.rows > 0) {
        if (this.#pendingRows > 0 && this.#pendingBytes + group.bytes > this.#rowGroupBytes) {
          await this.#flush(out);
        }
        await this.#gather({ source, file, index, rowStart, ...group, whole: true }, out);
      }
      rowStart += group.rows;
    }
    return out;
  }

  /** The last group, if any rows wait, then the footer and magic that end the output. */
  async finish(): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    await this.#flush(out);
    out.push(this.#concat.finish());
    return out;
  }

  /** Adds a small group to the pending rows, encoding them each time they fill a group. */
  async #gather(group: Piece, out: Uint8Array[]): Promise<void> {
    for (let from = 0; from < group.rows; ) {
      const take = Math.min(group.rows - from, this.#rowGroupRows - this.#pendingRows);
      this.#pending.push({
        ...group,
        rowStart: group.rowStart + from,
        rows: take,
        bytes: (group.bytes * take) / group.rows,
        whole: take === group.rows,
      });
      this.#pendingRows += take;
      this.#pendingBytes += (group.bytes * take) / group.rows;
      from += take;
      if (this.#pendingRows >= this.#rowGroupRows) await this.#flush(out);
    }
  }

  /** Encodes the pending rows as one row group and hands it to the concat. */
  async #flush(out: Uint8Array[]): Promise<void> {
    const pieces = this.#pending;
    if (pieces.length === 0) return;
    this.#pending = [];
    const rows = this.#pendingRows;
    this.#pendingRows = 0;
    this.#pendingBytes = 0;
    const lone = pieces.length === 1 ? pieces[0]! : undefined;
    if (lone?.whole) {
      // Alone, re-encoding it would give the same group: it is copied.
      out.push(this.#concat.copyRowGroup(lone.source, lone.index));
      return;
    }
    // Each file's footer is parsed once per group, not once per column.
    const opened = new Map<Uint8Array, DecodableFile>();
    const decodable = (file: Uint8Array) => {
      const found = opened.get(file) ?? openDecodable(file);
      opened.set(file, found);
      return found;
    };
    const file = await encodeRowGroupByColumn(
      this.table,
      rows,
      async (i) => {
        const one = { ...this.table, columns: [this.table.columns[i]!] };
        const cells: Cell[] = [];
        for (const piece of pieces) {
          await decodeRows(one, decodable(piece.file), piece.rowStart, piece.rowStart + piece.rows, [cells]);
        }
        return cells;
      },
      { ...(this.#encode.pageBytes !== undefined && { pageBytes: this.#encode.pageBytes }) },
    );
    out.push(this.#concat.append(file));
  }
}

/** A footer of `table` as the encoder writes it, without rows: its schema, to compare inputs with. */
function emptyFooter(table: ParquetTable): Footer {
  const writer = new ByteWriter();
  writer.appendBytes(MAGIC);
  const start = writer.offset;
  writeMetadata(writer, {
    version: 2,
    schema: tableSchema(table),
    num_rows: 0n,
    row_groups: [],
    metadata_length: 0,
  });
  writer.appendUint32(writer.offset - start);
  writer.appendBytes(MAGIC);
  return readFooter(new Uint8Array(writer.getBytes()));
}
