/**
 * A data file's manifest entry metrics, from its Parquet footer (the spec's "Manifests" and
 * Appendix D, single-value serialization): per column, by field id, the bytes it takes,
 * its value count, its null count and lower/upper bounds. Parquet's plain encoding of a
 * statistic (INT32 and INT64 little-endian, a BOOLEAN byte, UTF-8 bytes; a MICROS timestamp is
 * an INT64) is exactly Iceberg's single-value serialization, so bounds are copied as bytes.
 * A column gets bounds only when every row group has them (a group without statistics could
 * hold any value); cut string bounds are still bounds, which the spec allows. No split
 * offsets: they are optional, and an engine that splits a file at wrong ones reads rows twice.
 */
import { CHUNK, FILE, ROW_GROUP, readFooter } from '../parquet/footer.js';
import type { ParquetTable } from '../parquet/schema.js';
import type { ThriftStruct } from '../parquet/thrift.js';
import type { DataFile } from './avro.js';

/** Field ids of Parquet's ColumnMetaData and Statistics structs. */
const COLUMN_META = { pathInSchema: 3, numValues: 5, totalCompressedSize: 7, statistics: 12 } as const;
const STATS = { nullCount: 3, maxValue: 5, minValue: 6 } as const;

interface ColumnTotals {
  size: bigint;
  values: bigint;
  nulls: bigint | undefined;
  lower: Buffer | undefined;
  upper: Buffer | undefined;
  bounded: boolean;
}

const compareBytes = (a: Buffer, b: Buffer) => Buffer.compare(a, b);

/** Compares two statistics of one column type as its values compare (signed for integers). */
function compareValues(kind: 'int' | 'long' | 'bytes', a: Buffer, b: Buffer): number {
  if (kind === 'int') return a.readInt32LE() - b.readInt32LE();
  if (kind === 'long') {
    const x = a.readBigInt64LE();
    const y = b.readBigInt64LE();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return compareBytes(a, b);
}

/**
 * The metrics of a Parquet data file of `table` (whose columns carry field ids), for its
 * manifest entry. `file` needs to hold only the footer and the 8 bytes after it.
 */
export function dataFileMetrics(
  file: Uint8Array,
  table: ParquetTable,
): Pick<
  DataFile,
  'record_count' | 'column_sizes' | 'value_counts' | 'null_value_counts' | 'lower_bounds' | 'upper_bounds'
> {
  // A footer alone has no leading magic: prepend one so that the footer reader accepts it.
  const whole =
    file.length >= 4 && Buffer.from(file.subarray(0, 4)).toString() === 'PAR1'
      ? file
      : Buffer.concat([Buffer.from('PAR1'), file]);
  const { metadata } = readFooter(whole);
  const byPath = new Map<string, { id: number; kind: 'int' | 'long' | 'bytes' | 'bool'; bounded: boolean }>();
  for (const c of table.columns) {
    if (c.fieldId === undefined) throw new Error(`column ${table.name}.${c.name} has no field id`);
    if (c.type === 'array<string>') {
      // Bounds of a list's elements are not kept (as Iceberg's own Parquet writer does).
      byPath.set(`${c.name}.list.element`, { id: c.elementFieldId!, kind: 'bytes', bounded: false });
    } else {
      const kind =
        c.type === 'int'
          ? 'int'
          : c.type === 'bigint' || c.type === 'timestamp'
            ? 'long'
            : c.type === 'boolean'
              ? 'bool'
              : 'bytes';
      byPath.set(c.name, { id: c.fieldId, kind, bounded: true });
    }
  }
  const totals = new Map<number, ColumnTotals>();
  const groups = (metadata.list(FILE.rowGroups) ?? []) as ThriftStruct[];
  for (const group of groups) {
    const chunks = (group.list(ROW_GROUP.columns) ?? []) as ThriftStruct[];
    for (const chunk of chunks) {
      const meta = chunk.struct(CHUNK.metaData);
      if (!meta) continue;
      const path = ((meta.list(COLUMN_META.pathInSchema) ?? []) as Uint8Array[])
        .map((p) => Buffer.from(p).toString('utf8'))
        .join('.');
      const column = byPath.get(path);
      if (!column) continue;
      const stats = meta.struct(COLUMN_META.statistics);
      const nullCount = stats?.get(STATS.nullCount);
      const min = stats?.get(STATS.minValue);
      const max = stats?.get(STATS.maxValue);
      const total = totals.get(column.id) ?? {
        size: 0n,
        values: 0n,
        nulls: 0n,
        lower: undefined,
        upper: undefined,
        bounded: column.bounded,
      };
      total.size += BigInt(meta.get(COLUMN_META.totalCompressedSize) as bigint | number);
      total.values += BigInt(meta.get(COLUMN_META.numValues) as bigint | number);
      total.nulls =
        total.nulls === undefined || nullCount === undefined
          ? undefined
          : total.nulls + BigInt(nullCount as bigint | number);
      if (total.bounded && min instanceof Uint8Array && max instanceof Uint8Array) {
        const kind = column.kind === 'bool' ? 'bytes' : column.kind;
        const lo = Buffer.from(min);
        const hi = Buffer.from(max);
        if (!total.lower || compareValues(kind, lo, total.lower) < 0) total.lower = lo;
        if (!total.upper || compareValues(kind, hi, total.upper) > 0) total.upper = hi;
      } else if (
        total.bounded &&
        (nullCount === undefined ||
          BigInt(nullCount as bigint | number) < BigInt(meta.get(COLUMN_META.numValues) as bigint | number))
      ) {
        // A group with values and no bounds: the file's bounds are unknown.
        total.bounded = false;
      }
      totals.set(column.id, total);
    }
  }
  const ids = [...totals.keys()].sort((a, b) => a - b);
  const map = <V>(value: (t: ColumnTotals) => V | undefined) =>
    ids.flatMap((key) => {
      const v = value(totals.get(key)!);
      return v === undefined ? [] : [{ key, value: v }];
    });
  const asLong = (n: bigint) => (n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n);
  const numRows = metadata.get(FILE.numRows) as bigint | number;
  return {
    record_count: asLong(BigInt(numRows)),
    column_sizes: map((t) => asLong(t.size)),
    value_counts: map((t) => asLong(t.values)),
    null_value_counts: map((t) => (t.nulls === undefined ? undefined : asLong(t.nulls))),
    lower_bounds: map((t) => (t.bounded ? t.lower : undefined)),
    upper_bounds: map((t) => (t.bounded ? t.upper : undefined)),
  };
}
