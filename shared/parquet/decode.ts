/**
 * Rows of a Parquet file back into the encoder's cells (`schema.ts`), read with hyparquet: what
 * re-encoding needs of a file our encoder wrote. Values come back as they went in: a NULL as
 * null, an empty list as [], NULL items of a list as null, INT64 as a safe-integer number (a
 * value beyond 2^53 is refused rather than rounded), timestamps as `Date`.
 */
import { zstdDecompressSync } from 'node:zlib';
import { type FileMetaData, parquetMetadata, parquetRead } from 'hyparquet';
import { ExporterError } from '../errors.js';
import type { Cell, ParquetColumn, ParquetTable } from './schema.js';

/** hyparquet has no ZSTD of its own; Node's returns a fresh Buffer, taken as it is. */
const COMPRESSORS = { ZSTD: (input: Uint8Array) => zstdDecompressSync(input) };
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A Parquet file opened for reading rows by range: its bytes as hyparquet reads them, and its footer. */
export interface DecodableFile {
  buffer: ArrayBuffer;
  metadata: FileMetaData;
}

/** Opens a whole Parquet file for {@link decodeRows}; copies it only when it is a view into a larger buffer. */
export function openDecodable(file: Uint8Array): DecodableFile {
  const whole = file.byteOffset === 0 && file.byteLength === file.buffer.byteLength;
  const buffer = (whole ? file.buffer : file.slice().buffer) as ArrayBuffer;
  return { buffer, metadata: parquetMetadata(buffer) };
}

/**
 * Appends hyparquet's values of one column to `out` as cells. Types are left to the encoder to
 * check (it names the column and row); only what it could not tell is checked here: an INT64
 * that a number cannot hold exactly.
 */
function appendCells(
  table: ParquetTable,
  column: ParquetColumn,
  values: ArrayLike<unknown>,
  out: Cell[],
): void {
  const n = values.length;
  switch (column.type) {
    case 'bigint':
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (typeof v === 'bigint') {
          if (v < MIN_SAFE || v > MAX_SAFE) {
            throw new ExporterError(
              `parquet table ${table.name}, column ${column.name}: ${v} is beyond a safe integer`,
            );
          }
          out.push(Number(v));
        } else {
          out.push(v === undefined ? null : (v as Cell));
        }
      }
      return;
    default:
      // hyparquet gives undefined for a NULL list, null for other NULLs.
      for (let i = 0; i < n; i++) {
        const v = values[i];
        out.push(v === undefined ? null : (v as Cell));
      }
  }
}

/**
 * Decodes rows [rowStart, rowEnd) of `file` and appends them to `columns` (one array of cells
 * per column of `table`, in its order), as {@link ColumnBuffer} holds them. Throws an
 * `ExporterError` when the file lacks a column of `table` or its rows do not come out whole.
 */
export async function decodeRows(
  table: ParquetTable,
  file: DecodableFile,
  rowStart: number,
  rowEnd: number,
  columns: Cell[][],
): Promise<void> {
  const chunks = new Map<string, { rowStart: number; data: ArrayLike<unknown> }[]>();
  const read = parquetRead({
    file: file.buffer,
    metadata: file.metadata,
    rowStart,
    rowEnd,
    columns: table.columns.map((c) => c.name),
    compressors: COMPRESSORS,
    onChunk: ({ columnName, columnData, rowStart: start }) => {
      const list = chunks.get(columnName) ?? [];
      list.push({ rowStart: start, data: columnData });
      chunks.set(columnName, list);
    },
  });
  try {
    await read;
  } catch (error) {
    throw new ExporterError(`parquet table ${table.name}: ${(error as Error).message}`, { cause: error });
  }
  table.columns.forEach((column, i) => {
    const parts = (chunks.get(column.name) ?? []).sort((a, b) => a.rowStart - b.rowStart);
    let at = rowStart;
    const out = columns[i]!;
    for (const part of parts) {
      // A part may start before the range (hyparquet decodes whole pages): take the rows asked for.
      const from = Math.max(0, at - part.rowStart);
      const to = Math.min(part.data.length, rowEnd - part.rowStart);
      if (part.rowStart + from !== at || to < from) break;
      appendCells(
        table,
        column,
        from === 0 && to === part.data.length ? part.data : sliceOf(part.data, from, to),
        out,
      );
      at = part.rowStart + to;
    }
    if (at !== rowEnd) {
      throw new ExporterError(
        `parquet table ${table.name}, column ${column.name}: rows ${rowStart}–${rowEnd} did not decode whole (got to ${at})`,
        { hint: 'the file must be written with the table definition it is read with' },
      );
    }
  });
}

const sliceOf = (data: ArrayLike<unknown>, from: number, to: number): ArrayLike<unknown> =>
  Array.prototype.slice.call(data, from, to);
