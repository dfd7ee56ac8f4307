/**
 * A column's cells → its Parquet leaf: definition and repetition levels and the non-null values,
 * typed per column type. Every cell is checked against its column here, so a flattener bug
 * fails the encode with the column, row and value rather than writing a wrong file.
 */
import { ExporterError } from '../errors.js';
import { type Cell, INT32_MAX, INT32_MIN, type ParquetColumn } from './schema.js';

/** The leaf of one column as levels and non-null values, before pages are cut. */
export interface Leaf {
  /** Level entries (one per row for a flat column, one per item or empty/null list otherwise). */
  count: number;
  def: Uint8Array | null;
  rep: Uint8Array | null;
  maxDef: number;
  /** Level index where each row starts (length rows + 1); null when it is the row index. */
  rowStart: Int32Array | null;
  nulls: number;
  values: LeafValues;
}

export type LeafValues =
  | { kind: 'string'; values: string[] }
  | { kind: 'int32'; values: Int32Array }
  | { kind: 'int64'; values: Float64Array }
  | { kind: 'boolean'; values: Uint8Array };

const fail = (column: ParquetColumn, row: number, what: string) =>
  new ExporterError(`parquet column ${column.name}, row ${row}: ${what}`);

/** Definition levels of a flat optional column (1 present, 0 NULL) and its NULL count. */
function flatLevels(cells: readonly Cell[]): { def: Uint8Array; nulls: number } {
  const def = new Uint8Array(cells.length);
  let nulls = 0;
  for (let r = 0; r < cells.length; r++) {
    const cell = cells[r];
    if (cell === null || cell === undefined) nulls++;
    else def[r] = 1;
  }
  return { def, nulls };
}

/**
 * Levels and values of a flat column; validates every cell against the column type. The
 * loops are written out per type, NULLs skipped inline, because they run once per cell.
 */
export function flatLeaf(column: ParquetColumn, cells: readonly Cell[]): Leaf {
  const n = cells.length;
  const { def, nulls } = column.nullable ? flatLevels(cells) : { def: null, nulls: 0 };
  const nullable = column.nullable;
  const required = (r: number) => fail(column, r, 'a required value is null');
  let values: LeafValues;
  let k = 0;
  switch (column.type) {
    case 'string': {
      // Without NULLs the cells are the values: only checked, not copied.
      const out: string[] = nulls > 0 ? new Array(n - nulls) : (cells as string[]);
      for (let r = 0; r < n; r++) {
        const cell = cells[r];
        if (typeof cell === 'string') {
          if (nulls > 0) out[k++] = cell;
        } else if (cell !== null && cell !== undefined) {
          throw fail(column, r, `expected a string, got ${typeof cell}`);
        } else if (!nullable) {
          throw required(r);
        }
      }
      values = { kind: 'string', values: out };
      break;
    }
    case 'int': {
      const out = new Int32Array(n - nulls);
      for (let r = 0; r < n; r++) {
        const cell = cells[r];
        if (cell === null || cell === undefined) {
          if (!nullable) throw required(r);
          continue;
        }
        if (!Number.isInteger(cell) || (cell as number) < INT32_MIN || (cell as number) > INT32_MAX) {
          throw fail(column, r, `expected a 32-bit integer, got ${String(cell)}`);
        }
        out[k++] = cell as number;
      }
      values = { kind: 'int32', values: out };
      break;
    }
    case 'bigint':
    case 'timestamp': {
      const out = new Float64Array(n - nulls);
      const timestamp = column.type === 'timestamp';
      const perMs = column.timestampUnit === 'MICROS' ? 1000 : 1;
      for (let r = 0; r < n; r++) {
        const cell = cells[r];
        if (cell === null || cell === undefined) {
          if (!nullable) throw required(r);
          continue;
        }
        const v = timestamp ? (cell instanceof Date ? cell.getTime() * perMs : Number.NaN) : (cell as number);
        if (!Number.isSafeInteger(v)) {
          throw fail(
            column,
            r,
            `expected ${timestamp ? 'a valid Date' : 'a safe integer'}, got ${String(cell)}`,
          );
        }
        out[k++] = v;
      }
      values = { kind: 'int64', values: out };
      break;
    }
    case 'boolean': {
      const out = new Uint8Array(n - nulls);
      for (let r = 0; r < n; r++) {
        const cell = cells[r];
        if (cell === null || cell === undefined) {
          if (!nullable) throw required(r);
          continue;
        }
        if (typeof cell !== 'boolean') throw fail(column, r, `expected a boolean, got ${typeof cell}`);
        out[k++] = cell ? 1 : 0;
      }
      values = { kind: 'boolean', values: out };
      break;
    }
    default:
      throw fail(column, 0, `not a flat column type: ${column.type}`);
  }
  return { count: n, def, rep: null, maxDef: def ? 1 : 0, rowStart: null, nulls, values };
}

/**
 * Levels and values of a 3-level LIST of nullable strings. Definition levels, for an optional
 * list: 0 null list, 1 empty list, 2 null item, 3 item (one less each for a required list).
 */
export function listLeaf(column: ParquetColumn, cells: readonly Cell[]): Leaf {
  const n = cells.length;
  let count = 0;
  for (let r = 0; r < n; r++) {
    const cell = cells[r];
    count += Array.isArray(cell) && cell.length > 0 ? cell.length : 1;
  }
  const base = column.nullable ? 1 : 0;
  const def = new Uint8Array(count);
  const rep = new Uint8Array(count);
  const rowStart = new Int32Array(n + 1);
  const values: string[] = new Array(count); // an upper bound, trimmed below
  let k = 0;
  let nulls = 0;
  let l = 0;
  for (let r = 0; r < n; r++) {
    rowStart[r] = l;
    const cell = cells[r];
    if (cell === null || cell === undefined) {
      if (!column.nullable) throw fail(column, r, 'a required list is null');
      def[l++] = 0;
      nulls++;
      continue;
    }
    if (!Array.isArray(cell)) throw fail(column, r, `expected an array, got ${typeof cell}`);
    if (cell.length === 0) {
      def[l++] = base;
      nulls++;
      continue;
    }
    for (let i = 0; i < cell.length; i++) {
      const item: unknown = cell[i];
      if (i > 0) rep[l] = 1; // 0 (a new row) is the array's initial value
      if (typeof item === 'string') {
        def[l++] = base + 2;
        values[k++] = item;
      } else if (item === null || item === undefined) {
        def[l++] = base + 1;
        nulls++;
      } else {
        throw fail(column, r, `expected string items, got ${typeof item}`);
      }
    }
  }
  rowStart[n] = l;
  values.length = k;
  return { count, def, rep, maxDef: base + 2, rowStart, nulls, values: { kind: 'string', values } };
}
