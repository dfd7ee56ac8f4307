/**
 * Several Parquet files of one table → one file of large row groups, streaming. A run stages
 * one file per batch of ~100 reports, so concatenating them (`concat.ts`) gives row groups of a
 * few hundred rows: each with its own dictionaries, page headers and statistics, which made a
 * published `reports` 2.6× the size of the same rows encoded once, and scans 1.4–3.5× slower.
 * Here the small row groups are decoded (hyparquet, `decode.ts`) and encoded again in groups of
 * up to {@link ROW_GROUP_ROWS} rows; a group that is already large is copied byte for byte,
 * as concatenation does. Row order is kept, so a large group between small ones ends the group
 * being filled. The output depends only on the inputs' bytes and order: the same inputs give
 * the same bytes.
 */

import { ByteWriter } from 'hyparquet-writer';
import { writeMetadata } from 'hyparquet-writer/src/metadata.js';
import { ExporterError } from '../errors.js';
import { ParquetConcat, type ParquetSource } from './concat.js';
import { type DecodableFile, decodeRows, openDecodable } from './decode.js';
import { type EncodeOptions, encodeParquetColumns, ROW_GROUP_ROWS, tableSchema } from './encode.js';
import { equalBytes, type Footer, MAGIC, readFooter, schemaDifference, schemaEntries } from './footer.js';
import type { Cell, ParquetTable } from './schema.js';

/**
 * Uncompressed bytes of one output row group (as the inputs' row groups declare them). A bound
 * on memory more than a target: report rows are ~50–500 bytes, so {@link ROW_GROUP_ROWS} rows
 * come first. Decoded JS values take 2–3× their Parquet bytes, and publishing fills two groups
 * at once, so 32 MiB keeps a publish's decoded rows under ~200 MB of finish-run's 1 GB. Past a
 * few MB per column chunk, pages are full size and a bigger group no longer shrinks the file.
 */
export const REGROUP_BYTES = 32 * 1024 * 1024;

/** A row group below half an output group, where it is in its file. */
interface SmallGroup {
  source: ParquetSource;
  file: Uint8Array;
  index: number;
  rowStart: number;
  rows: number;
  bytes: number;
}

export interface RegroupOptions extends EncodeOptions {
  /** Uncompressed bytes per output row group; default {@link REGROUP_BYTES}. */
  rowGroupBytes?: number;
}

/**
 * Regroups Parquet files written with `table`: `start()`, then `append()` each whole input in
 * order, then `finish()`; write every returned chunk to the output, in order. A row group is
 * copied as it is when it holds at least half an output group (in rows or bytes): merging it
 * would save little and cost a decode and an encode. Smaller ones are decoded and re-encoded
 * together. Throws an `ExporterError` when an input's schema is not `table`'s (as
 * {@link ParquetConcat} says), or a value cannot be decoded exactly.
 *
 * @example
 * const regroup = new ParquetRegroup(TABLES.questions);
 * out.write(regroup.start());
 * for (const path of inputs) for (const chunk of await regroup.append(await readFile(path))) out.write(chunk);
 * for (const chunk of regroup.finish()) out.write(chunk);
 */
export class ParquetRegroup {
  readonly #concat = new ParquetConcat();
  /** The footer of a file of `table` (no rows), for its schema. */
  readonly #expected: Footer;
  readonly #rowGroupRows: number;
  readonly #rowGroupBytes: number;
  readonly #encode: EncodeOptions;
  /** The rows being gathered for the next output group: decoded parts, one array of cells per column each. */
  #pending: Cell[][][] = [];
  #pendingRows = 0;
  #pendingBytes = 0;
  /** A small group not decoded yet, when it is all the pending group holds. */
  #lone: SmallGroup | undefined;
  /** The file small groups are being decoded from, opened once. */
  #decodable: { file: Uint8Array; decodable: DecodableFile } | undefined;

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
   * are only gathered): views into `file` or into new encoded bytes.
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
        this.#flush(out);
        out.push(this.#concat.copyRowGroup(source, index));
      } else if (group.rows > 0) {
        const small: SmallGroup = { source, file, index, rowStart, ...group };
        if (this.#pendingRows > 0 && this.#pendingBytes + group.bytes > this.#rowGroupBytes) this.#flush(out);
        if (this.#pendingRows === 0) {
          this.#lone = small; // decoded only once another small group joins it
          this.#pendingRows = group.rows;
          this.#pendingBytes = group.bytes;
        } else {
          await this.#decodeLone();
          await this.#decode(small, out);
        }
      }
      rowStart += group.rows;
    }
    return out;
  }

  /** The last group, if any rows wait, then the footer and magic that end the output. */
  finish(): Uint8Array[] {
    const out: Uint8Array[] = [];
    this.#flush(out);
    out.push(this.#concat.finish());
    return out;
  }

  /** Decodes a small group onto the pending rows. */
  async #decode(group: SmallGroup, out: Uint8Array[]): Promise<void> {
    if (this.#decodable?.file !== group.file) {
      this.#decodable = { file: group.file, decodable: openDecodable(group.file) };
    }
    const decoded: Cell[][] = this.table.columns.map(() => []);
    await decodeRows(
      this.table,
      this.#decodable.decodable,
      group.rowStart,
      group.rowStart + group.rows,
      decoded,
    );
    this.#gather(decoded, group.rows, group.bytes, out);
  }

  /** The lone group waiting, decoded now that another joins it. */
  async #decodeLone(): Promise<void> {
    const lone = this.#lone;
    if (!lone) return;
    this.#lone = undefined;
    this.#pendingRows = 0;
    this.#pendingBytes = 0;
    await this.#decode(lone, []); // it fills no group: it is smaller than half of one
  }

  /** Adds decoded rows to the pending group, encoding it each time it fills. */
  #gather(decoded: Cell[][], rows: number, bytes: number, out: Uint8Array[]): void {
    for (let from = 0; from < rows; ) {
      const take = Math.min(rows - from, this.#rowGroupRows - this.#pendingRows);
      this.#pending.push(take === rows ? decoded : decoded.map((cells) => cells.slice(from, from + take)));
      this.#pendingRows += take;
      this.#pendingBytes += (bytes * take) / rows;
      from += take;
      if (this.#pendingRows >= this.#rowGroupRows) this.#flush(out);
    }
  }

  /** Encodes the pending rows as one row group and hands it to the concat. */
  #flush(out: Uint8Array[]): void {
    if (this.#pendingRows === 0) return;
    if (this.#lone) {
      // Alone, re-encoding it would give the same group: it is copied.
      out.push(this.#concat.copyRowGroup(this.#lone.source, this.#lone.index));
      this.#lone = undefined;
      this.#pendingRows = 0;
      this.#pendingBytes = 0;
      return;
    }
    // Joined once here: pushing each young cell onto a long-lived array cost 3× the decoding
    // (write barriers and remembered-set scans on every scavenge).
    const parts = this.#pending;
    const columns = this.table.columns.map((_, i) =>
      parts.length === 1 ? parts[0]![i]! : ([] as Cell[]).concat(...parts.map((p) => p[i]!)),
    );
    const file = encodeParquetColumns(this.table, columns, {
      ...this.#encode,
      rowGroupRows: this.#pendingRows,
    });
    out.push(this.#concat.append(file));
    this.#pending = [];
    this.#pendingRows = 0;
    this.#pendingBytes = 0;
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
