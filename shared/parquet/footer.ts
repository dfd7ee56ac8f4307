/**
 * A Parquet file's footer as thrift structs (see `thrift.ts`): where it is, the field ids of
 * the parts concatenation touches (parquet.thrift), and a readable form of a schema for
 * error messages.
 */
import { ConvertedTypes, FieldRepetitionTypes, ParquetTypes } from 'hyparquet/src/constants.js';
import { ExporterError } from '../errors.js';
import { ThriftReader, type ThriftStruct, type ThriftValue, ThriftWriter } from './thrift.js';

/** 'PAR1' at both ends of a Parquet file; 'PARE' ends one whose footer is encrypted. */
export const MAGIC = Uint8Array.of(0x50, 0x41, 0x52, 0x31);
const ENCRYPTED_MAGIC = Uint8Array.of(0x50, 0x41, 0x52, 0x45);

/** FileMetaData field ids. */
export const FILE = {
  schema: 2,
  numRows: 3,
  rowGroups: 4,
  createdBy: 6,
  encryptionAlgorithm: 8,
  footerSigningKeyMetadata: 9,
} as const;
/** RowGroup field ids. */
export const ROW_GROUP = { columns: 1, totalByteSize: 2, numRows: 3, fileOffset: 5, ordinal: 7 } as const;
/** ColumnChunk field ids. */
export const CHUNK = {
  filePath: 1,
  fileOffset: 2,
  metaData: 3,
  offsetIndexOffset: 4,
  columnIndexOffset: 6,
  cryptoMetadata: 8,
  encryptedColumnMetadata: 9,
} as const;
/** ColumnMetaData field ids of the offsets into the file, and of the chunk's size there. */
export const META = {
  totalCompressedSize: 7,
  dataPageOffset: 9,
  indexPageOffset: 10,
  dictionaryPageOffset: 11,
  bloomFilterOffset: 14,
} as const;
/** SchemaElement field ids. */
const SCHEMA = {
  type: 1,
  repetition: 3,
  name: 4,
  numChildren: 5,
  convertedType: 6,
  logicalType: 10,
} as const;
/** LogicalType union members by field id (parquet.thrift). */
const LOGICAL_TYPES: Record<number, string> = {
  1: 'STRING',
  2: 'MAP',
  3: 'LIST',
  4: 'ENUM',
  5: 'DECIMAL',
  6: 'DATE',
  7: 'TIME',
  8: 'TIMESTAMP',
  10: 'INTEGER',
  11: 'NULL',
  12: 'JSON',
  13: 'BSON',
  14: 'UUID',
  15: 'FLOAT16',
  16: 'VARIANT',
  17: 'GEOMETRY',
  18: 'GEOGRAPHY',
};

export const equalBytes = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0;

/** A file's footer: its FileMetaData, and where its data (row groups, indexes) ends. */
export interface Footer {
  metadata: ThriftStruct;
  /** The schema list as it is serialized: equal bytes, equal schemas. */
  schemaBytes: Uint8Array;
  /** Offset of the footer's first byte: the file's data is [4, dataEnd). */
  dataEnd: number;
}

/**
 * Reads the footer of a whole Parquet file. The footer's bytes are copied, so `file` may be
 * reused once this returns. Throws an `ExporterError` when `file` is not a Parquet file.
 */
export function readFooter(file: Uint8Array): Footer {
  const notParquet = (why: string) => new ExporterError(`not a Parquet file: ${why}`);
  if (file.length < 12) throw notParquet(`${file.length} bytes`);
  const tail = file.subarray(file.length - 4);
  if (equalBytes(tail, ENCRYPTED_MAGIC)) throw notParquet('its footer is encrypted');
  if (!equalBytes(file.subarray(0, 4), MAGIC) || !equalBytes(tail, MAGIC)) throw notParquet('no PAR1 magic');
  const length = Buffer.from(file.buffer, file.byteOffset, file.byteLength).readUInt32LE(file.length - 8);
  const dataEnd = file.length - 8 - length;
  if (dataEnd < 4) throw notParquet(`a footer of ${length} bytes in ${file.length}`);
  try {
    const bytes = file.slice(dataEnd, file.length - 8);
    const spans = new Map<number, [number, number]>();
    const metadata = new ThriftReader(bytes).struct(spans);
    const [start, end] = spans.get(FILE.schema) ?? [0, 0];
    return { metadata, schemaBytes: bytes.subarray(start, end), dataEnd };
  } catch (error) {
    throw new ExporterError('not a Parquet file: its footer does not parse', { cause: error });
  }
}

/** One schema element, serialized (to compare) and described (to tell a person). */
export interface SchemaEntry {
  /** Dotted path of names below the root, e.g. `photos.list.element`; '' for the root. */
  path: string;
  /** Type, repetition, converted and logical type, e.g. `BYTE_ARRAY OPTIONAL UTF8 STRING`. */
  kind: string;
  bytes: Uint8Array;
}

const enumName = (names: readonly string[], value: ThriftValue | undefined) =>
  typeof value === 'number' ? (names[value] ?? String(value)) : undefined;

/** The schema elements of a FileMetaData, root first, with their paths. */
export function schemaEntries(metadata: ThriftStruct): SchemaEntry[] {
  const elements = (metadata.list(FILE.schema) ?? []) as ThriftStruct[];
  const entries: SchemaEntry[] = [];
  // The elements are a depth-first walk; a stack of the open groups' remaining children gives paths.
  const open: { path: string; left: number }[] = [];
  elements.forEach((element, i) => {
    while (open.length > 0 && open[open.length - 1]!.left === 0) open.pop();
    const parent = open[open.length - 1];
    if (parent) parent.left--;
    const name = element.get(SCHEMA.name);
    const own = name instanceof Uint8Array ? Buffer.from(name).toString('utf8') : '?';
    const path = i === 0 ? '' : parent?.path ? `${parent.path}.${own}` : own;
    const logical = element.struct(SCHEMA.logicalType);
    const kind = [
      enumName(ParquetTypes, element.get(SCHEMA.type)) ?? 'group',
      enumName(FieldRepetitionTypes, element.get(SCHEMA.repetition)),
      enumName(ConvertedTypes, element.get(SCHEMA.convertedType)),
      logical && [...logical.fields.keys()].map((id) => LOGICAL_TYPES[id] ?? `logical ${id}`).join(),
    ]
      .filter(Boolean)
      .join(' ');
    const writer = new ThriftWriter(64);
    writer.struct(element);
    entries.push({ path, kind, bytes: writer.bytes().slice() });
    const children = element.get(SCHEMA.numChildren);
    if (typeof children === 'number' && children > 0) open.push({ path, left: children });
  });
  return entries;
}

/**
 * How schema `other` differs from `first` (root elements aside: their name is free), in words,
 * or undefined when they are the same.
 */
export function schemaDifference(first: SchemaEntry[], other: SchemaEntry[]): string | undefined {
  const a = first.slice(1);
  const b = other.slice(1);
  const inB = new Map(b.map((e) => [e.path, e]));
  const inA = new Map(a.map((e) => [e.path, e]));
  for (const e of a) if (!inB.has(e.path)) return `it has no column ${e.path}`;
  for (const e of b) if (!inA.has(e.path)) return `it has a column ${e.path} the first file has not`;
  for (const e of a) {
    const o = inB.get(e.path)!;
    if (o.kind !== e.kind) return `column ${e.path} is ${o.kind}, not ${e.kind}`;
  }
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.path !== b[i]!.path)
      return `its columns are in another order (${b[i]!.path} for ${a[i]!.path})`;
    if (!equalBytes(a[i]!.bytes, b[i]!.bytes)) {
      return `column ${a[i]!.path} differs in a detail of its type (unit, scale, field id…)`;
    }
  }
  return undefined;
}
