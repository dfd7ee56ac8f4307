/**
 * Iceberg's Avro files: manifests (one entry per data or delete file) and manifest lists (one
 * entry per manifest of a snapshot), with the spec's Avro schemas and field ids
 * (https://iceberg.apache.org/spec/#manifests), written and read with avsc.
 *
 * Longs are JS numbers when they are safe integers and BigInt otherwise: snapshot ids written
 * by other engines (Athena's OPTIMIZE, Spark) use all 63 bits, and a manifest list carried over
 * by a commit must keep them exactly.
 */
import { createHash } from 'node:crypto';
import avro from 'avsc';
import { PARTITION_KEY } from '../layout.js';
import { DT_PARTITION_FIELD_ID } from './schema.js';

/** A long as read: a number when safe, a BigInt beyond 2^53. */
export type Long = number | bigint;

/** avsc's long, widened to BigInt where a number would lose digits. */
const LongType = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => {
    const v = buf.readBigInt64LE();
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  },
  toBuffer: (n: Long) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (n: Long) => n,
  toJSON: (n: Long) => Number(n),
  isValid: (n: unknown) =>
    (typeof n === 'number' && Number.isSafeInteger(n)) ||
    (typeof n === 'bigint' && n >= -(2n ** 63n) && n < 2n ** 63n),
  compare: (a: Long, b: Long) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0),
});

const optional = (type: unknown) => ['null', type];
/** Iceberg's map<int, V> in Avro: an array of key/value records (keys are not strings). */
const intMap = (fieldId: number, keyId: number, valueId: number, value: 'long' | 'bytes', name: string) => ({
  name,
  type: optional({
    type: 'array',
    logicalType: 'map',
    items: {
      type: 'record',
      name: `k${keyId}_v${valueId}`,
      fields: [
        { name: 'key', type: 'int', 'field-id': keyId },
        { name: 'value', type: value, 'field-id': valueId },
      ],
    },
  }),
  default: null,
  'field-id': fieldId,
});

/** The data_file struct (field id 2), partitioned by `dt` (identity, partition field 1000). */
const DATA_FILE = {
  type: 'record',
  name: 'r2',
  fields: [
    {
      name: 'content',
      type: 'int',
      'field-id': 134,
      doc: 'Contents of the file: 0=data, 1=position deletes, 2=equality deletes',
    },
    { name: 'file_path', type: 'string', 'field-id': 100, doc: 'Location URI with FS scheme' },
    { name: 'file_format', type: 'string', 'field-id': 101, doc: 'File format name: avro, orc, or parquet' },
    {
      name: 'partition',
      type: {
        type: 'record',
        name: 'r102',
        fields: [
          { name: PARTITION_KEY, type: optional('string'), default: null, 'field-id': DT_PARTITION_FIELD_ID },
        ],
      },
      'field-id': 102,
      doc: 'Partition data tuple, schema based on the partition spec',
    },
    { name: 'record_count', type: 'long', 'field-id': 103, doc: 'Number of records in the file' },
    { name: 'file_size_in_bytes', type: 'long', 'field-id': 104, doc: 'Total file size in bytes' },
    intMap(108, 117, 118, 'long', 'column_sizes'),
    intMap(109, 119, 120, 'long', 'value_counts'),
    intMap(110, 121, 122, 'long', 'null_value_counts'),
    intMap(137, 138, 139, 'long', 'nan_value_counts'),
    intMap(125, 126, 127, 'bytes', 'lower_bounds'),
    intMap(128, 129, 130, 'bytes', 'upper_bounds'),
    { name: 'key_metadata', type: optional('bytes'), default: null, 'field-id': 131 },
    {
      name: 'split_offsets',
      type: optional({ type: 'array', items: 'long', 'element-id': 133 }),
      default: null,
      'field-id': 132,
    },
    {
      name: 'equality_ids',
      type: optional({ type: 'array', items: 'int', 'element-id': 136 }),
      default: null,
      'field-id': 135,
    },
    { name: 'sort_order_id', type: optional('int'), default: null, 'field-id': 140 },
  ],
};

/** The spec's manifest_entry schema (format version 2). */
export const MANIFEST_ENTRY_SCHEMA = {
  type: 'record',
  name: 'manifest_entry',
  fields: [
    { name: 'status', type: 'int', 'field-id': 0 },
    { name: 'snapshot_id', type: optional('long'), default: null, 'field-id': 1 },
    { name: 'sequence_number', type: optional('long'), default: null, 'field-id': 3 },
    { name: 'file_sequence_number', type: optional('long'), default: null, 'field-id': 4 },
    { name: 'data_file', type: DATA_FILE, 'field-id': 2 },
  ],
};

/** The spec's manifest_file schema (format version 2): one entry of a manifest list. */
export const MANIFEST_FILE_SCHEMA = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    { name: 'manifest_path', type: 'string', 'field-id': 500 },
    { name: 'manifest_length', type: 'long', 'field-id': 501 },
    { name: 'partition_spec_id', type: 'int', 'field-id': 502 },
    { name: 'content', type: 'int', 'field-id': 517 },
    { name: 'sequence_number', type: 'long', 'field-id': 515 },
    { name: 'min_sequence_number', type: 'long', 'field-id': 516 },
    { name: 'added_snapshot_id', type: 'long', 'field-id': 503 },
    { name: 'added_files_count', type: 'int', 'field-id': 504 },
    { name: 'existing_files_count', type: 'int', 'field-id': 505 },
    { name: 'deleted_files_count', type: 'int', 'field-id': 506 },
    { name: 'added_rows_count', type: 'long', 'field-id': 512 },
    { name: 'existing_rows_count', type: 'long', 'field-id': 513 },
    { name: 'deleted_rows_count', type: 'long', 'field-id': 514 },
    {
      name: 'partitions',
      type: optional({
        type: 'array',
        'element-id': 508,
        items: {
          type: 'record',
          name: 'r508',
          fields: [
            { name: 'contains_null', type: 'boolean', 'field-id': 509 },
            { name: 'contains_nan', type: optional('boolean'), default: null, 'field-id': 518 },
            { name: 'lower_bound', type: optional('bytes'), default: null, 'field-id': 510 },
            { name: 'upper_bound', type: optional('bytes'), default: null, 'field-id': 511 },
          ],
        },
      }),
      default: null,
      'field-id': 507,
    },
    { name: 'key_metadata', type: optional('bytes'), default: null, 'field-id': 519 },
  ],
};

/** Manifest entry status. */
export const STATUS = { EXISTING: 0, ADDED: 1, DELETED: 2 } as const;
/** data_file.content and manifest_file.content. */
export const CONTENT = { DATA: 0, POSITION_DELETES: 1 } as const;

type IntMap<V> = { key: number; value: V }[] | null;

export interface DataFile {
  content: number;
  file_path: string;
  file_format: 'PARQUET';
  partition: { dt: string | null };
  record_count: Long;
  file_size_in_bytes: Long;
  column_sizes: IntMap<Long>;
  value_counts: IntMap<Long>;
  null_value_counts: IntMap<Long>;
  nan_value_counts: IntMap<Long>;
  lower_bounds: IntMap<Buffer>;
  upper_bounds: IntMap<Buffer>;
  key_metadata: Buffer | null;
  split_offsets: Long[] | null;
  equality_ids: number[] | null;
  sort_order_id: number | null;
}

export interface ManifestEntry {
  status: number;
  snapshot_id: Long | null;
  sequence_number: Long | null;
  file_sequence_number: Long | null;
  data_file: DataFile;
}

export interface FieldSummary {
  contains_null: boolean;
  contains_nan: boolean | null;
  lower_bound: Buffer | null;
  upper_bound: Buffer | null;
}

export interface ManifestFile {
  manifest_path: string;
  manifest_length: Long;
  partition_spec_id: number;
  content: number;
  sequence_number: Long;
  min_sequence_number: Long;
  added_snapshot_id: Long;
  added_files_count: number;
  existing_files_count: number;
  deleted_files_count: number;
  added_rows_count: Long;
  existing_rows_count: Long;
  deleted_rows_count: Long;
  partitions: FieldSummary[] | null;
  key_metadata: Buffer | null;
}

const registry = () => ({ long: LongType });
const entryType = avro.Type.forSchema(MANIFEST_ENTRY_SCHEMA as avro.Schema, { registry: registry() });
const fileType = avro.Type.forSchema(MANIFEST_FILE_SCHEMA as avro.Schema, { registry: registry() });

/**
 * An Avro object container file of `records`, deflate-compressed (as Iceberg writes them). The
 * sync marker is derived from the content, so the same records and metadata always give the
 * same bytes: a commit done again writes the very same file.
 */
function containerFile(
  type: avro.Type,
  schema: object,
  records: readonly unknown[],
  metadata: Record<string, string>,
): Promise<Buffer> {
  const body = Buffer.concat(records.map((r) => type.toBuffer(r)));
  const syncMarker = createHash('sha256')
    .update(JSON.stringify(metadata))
    .update(body)
    .digest()
    .subarray(0, 16);
  const meta = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, Buffer.from(v, 'utf8')]));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    // `metadata` is an option of avsc's BlockEncoder that its type declarations leave out.
    const options = { codec: 'deflate', metadata: meta, syncMarker } as Partial<avro.EncoderOptions>;
    const encoder = new avro.streams.BlockEncoder(type, options);
    // The header must carry the schema as written here, field ids included: avsc exports a
    // Type's schema without attributes it does not know, and Iceberg readers resolve manifest
    // fields by those ids. Given a Type, the encoder keeps its schema in `_schema` (unset).
    (encoder as unknown as { _schema: object })._schema = schema;
    encoder.on('data', (chunk: Buffer) => chunks.push(chunk));
    encoder.on('end', () => resolve(Buffer.concat(chunks)));
    encoder.on('error', reject);
    for (const r of records) encoder.write(r);
    encoder.end();
  });
}

/** An Avro schema as JSON (the header's `avro.schema`, or one of the spec schemas above). */
type AvroSchema = string | AvroSchema[] | { [key: string]: unknown };
type AvroRecordSchema = { type: 'record'; name?: string; fields: AvroField[]; [key: string]: unknown };
type AvroField = {
  name: string;
  type: AvroSchema;
  'field-id'?: number;
  default?: unknown;
  [key: string]: unknown;
};

/**
 * Values of fields a format-version 1 writer left out, as the spec reads them: data content,
 * sequence number 0 (https://iceberg.apache.org/spec/#sequence-number-inheritance).
 */
const V1_DEFAULTS: Readonly<Record<number, number>> = { 134: 0, 515: 0, 516: 0, 517: 0 };
/** The data_file's partition struct: its fields are the writer's partition spec's. */
const PARTITION_FIELD_ID = 102;

const isRecord = (s: AvroSchema): s is AvroRecordSchema =>
  typeof s === 'object' && !Array.isArray(s) && s.type === 'record';
const typeName = (s: AvroSchema): string | undefined =>
  typeof s === 'string' ? s : Array.isArray(s) ? undefined : (s.type as string);

/** The record, enum and fixed types a schema defines, by name (a later use may name them only). */
function namedTypes(schema: AvroSchema, into = new Map<string, AvroSchema>()): Map<string, AvroSchema> {
  if (Array.isArray(schema)) for (const s of schema) namedTypes(s, into);
  else if (typeof schema === 'object') {
    if (typeof schema.name === 'string' && ['record', 'enum', 'fixed'].includes(schema.type as string))
      into.set(schema.name, schema);
    if (isRecord(schema)) for (const f of schema.fields) namedTypes(f.type, into);
    if (schema.type === 'array') namedTypes(schema.items as AvroSchema, into);
    if (schema.type === 'map') namedTypes(schema.values as AvroSchema, into);
  }
  return into;
}

/**
 * The partition struct to read: the writer's own, its fields its partition spec's by their
 * names (the exporter's spec names its field `dt`, and the commit takes only tables of that
 * spec), with `dt` null when the writer's spec has no such field.
 */
function partitionReader(writer: AvroRecordSchema): AvroRecordSchema {
  if (writer.fields.some((f) => f.name === PARTITION_KEY)) return writer;
  const dt = { name: PARTITION_KEY, type: optional('string') as AvroSchema, default: null };
  return { ...writer, fields: [...writer.fields, dt] };
}

/**
 * `reader` (one of the spec schemas above) adapted to read what `writer` wrote, by Iceberg's
 * rules rather than Avro's names: fields are matched by field id (a format-version 1 writer
 * names field 504 `added_data_files_count`), record names are aliased, an int is read from a
 * writer's long (pyiceberg declares `equality_ids` elements long), a field the writer may leave
 * null is read as nullable, and a field a v1 writer lacks takes the spec's value. Avro's own
 * resolution (avsc's `createResolver`) then does the reading.
 */
function readerFor(reader: AvroSchema, writer: AvroSchema, named: Map<string, AvroSchema>): AvroSchema {
  const w = typeof writer === 'string' && named.has(writer) ? named.get(writer)! : writer;
  if (Array.isArray(reader)) {
    const inner = Array.isArray(w) ? (w.find((t) => t !== 'null') ?? 'null') : w;
    return reader.map((t) => (t === 'null' ? t : readerFor(t, inner, named)));
  }
  if (Array.isArray(w)) {
    const inner = w.find((t) => t !== 'null');
    return inner === undefined ? reader : ['null', readerFor(reader, inner, named)];
  }
  if (typeof reader === 'string') return reader === 'int' && typeName(w) === 'long' ? 'long' : reader;
  if (reader.type === 'array' && typeof w === 'object' && w.type === 'array') {
    return { ...reader, items: readerFor(reader.items as AvroSchema, w.items as AvroSchema, named) };
  }
  if (!isRecord(reader) || !isRecord(w)) return reader;
  const fields = reader.fields.map((f): AvroField => {
    const found = w.fields.find((g) => g['field-id'] !== undefined && g['field-id'] === f['field-id']);
    if (!found) {
      const v1 = f['field-id'] === undefined ? undefined : V1_DEFAULTS[f['field-id']];
      return f.default === undefined && v1 !== undefined ? { ...f, default: v1 } : f;
    }
    const type =
      f['field-id'] === PARTITION_FIELD_ID && isRecord(found.type)
        ? partitionReader(found.type)
        : readerFor(f.type, found.type, named);
    return { ...f, type, ...(found.name !== f.name && { aliases: [found.name] }) };
  });
  return { ...reader, fields, ...(w.name !== undefined && w.name !== reader.name && { aliases: [w.name] }) };
}

/** Resolvers by reader and writer schema: a table's manifests share a handful of writer schemas. */
const resolvers = new Map<string, { readerType: avro.Type; resolver: avro.Resolver }>();
const RESOLVERS_KEPT = 64;

function resolverFor(reader: object, writerText: string) {
  const key = `${reader === MANIFEST_ENTRY_SCHEMA ? 'entry' : 'file'}\0${writerText}`;
  let found = resolvers.get(key);
  if (!found) {
    const writer = JSON.parse(writerText) as AvroSchema;
    const adapted = readerFor(reader as AvroSchema, writer, namedTypes(writer));
    const readerType = avro.Type.forSchema(adapted as avro.Schema, { registry: registry() });
    const writerType = avro.Type.forSchema(writer as avro.Schema, { registry: registry() });
    found = { readerType, resolver: readerType.createResolver(writerType) };
    if (resolvers.size >= RESOLVERS_KEPT) resolvers.clear();
    resolvers.set(key, found);
  }
  return found;
}

/**
 * Reads every record and the header metadata of an Avro container file, each record by the
 * writer's own schema (the header's) resolved into `reader` (see {@link readerFor}): manifests
 * other engines wrote (Java, Spark, Athena, pyiceberg, format version 1 or 2) read as the
 * exporter's own do.
 */
async function readContainer<T>(
  bytes: Uint8Array,
  reader: object,
): Promise<{ records: T[]; metadata: Record<string, string> }> {
  const { records, header } = await rawContainer(bytes);
  const { readerType, resolver } = resolverFor(reader, header['avro.schema']!.toString('utf8'));
  return {
    records: records.map((r) => readerType.fromBuffer(r, resolver) as T),
    metadata: Object.fromEntries(Object.entries(header).map(([k, v]) => [k, v.toString('utf8')])),
  };
}

/** The header metadata and the records, still encoded, of an Avro container file. */
function rawContainer(bytes: Uint8Array): Promise<{ records: Buffer[]; header: Record<string, Buffer> }> {
  return new Promise((resolve, reject) => {
    const records: Buffer[] = [];
    let header: Record<string, Buffer> = {};
    const decoder = new avro.streams.BlockDecoder({ noDecode: true });
    decoder.on('metadata', (_type: unknown, _codec: unknown, h: { meta: Record<string, Buffer> }) => {
      header = h.meta;
    });
    decoder.on('data', (r: Buffer) => records.push(r));
    decoder.on('end', () => resolve({ records, header }));
    decoder.on('error', reject);
    decoder.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });
}

/** What a manifest's header says of the table (the spec's required key/value metadata). */
export interface ManifestHeader {
  schema: string;
  schemaId: number;
  partitionSpec: string;
  partitionSpecId: number;
  content: 'data' | 'deletes';
}

/** A manifest file of `entries`. */
export function encodeManifest(entries: readonly ManifestEntry[], header: ManifestHeader): Promise<Buffer> {
  return containerFile(entryType, MANIFEST_ENTRY_SCHEMA, entries, {
    schema: header.schema,
    'schema-id': String(header.schemaId),
    'partition-spec': header.partitionSpec,
    'partition-spec-id': String(header.partitionSpecId),
    'format-version': '2',
    content: header.content,
  });
}

/** A manifest list of `manifests`, the snapshot it belongs to named in its header. */
export function encodeManifestList(
  manifests: readonly ManifestFile[],
  header: { snapshotId: Long; parentSnapshotId: Long | undefined; sequenceNumber: number },
): Promise<Buffer> {
  return containerFile(fileType, MANIFEST_FILE_SCHEMA, manifests, {
    'snapshot-id': String(header.snapshotId),
    'parent-snapshot-id': header.parentSnapshotId === undefined ? 'null' : String(header.parentSnapshotId),
    'sequence-number': String(header.sequenceNumber),
    'format-version': '2',
  });
}

/**
 * The entries of a manifest, read by its writer's schema into the spec's (fields another writer
 * added are skipped; the partition struct is the writer's, its `dt` the exporter's field 1000).
 */
export async function decodeManifest(bytes: Uint8Array): Promise<ManifestEntry[]> {
  return (await readContainer<ManifestEntry>(bytes, MANIFEST_ENTRY_SCHEMA)).records;
}

/** The manifests of a manifest list, read by its writer's schema into the spec's. */
export async function decodeManifestList(bytes: Uint8Array): Promise<ManifestFile[]> {
  return (await readContainer<ManifestFile>(bytes, MANIFEST_FILE_SCHEMA)).records;
}

/** The header metadata of an Avro file (for tests and the maintenance step). */
export async function avroMetadata(
  bytes: Uint8Array,
  _kind?: 'manifest' | 'manifest-list',
): Promise<Record<string, string>> {
  const { header } = await rawContainer(bytes);
  return Object.fromEntries(Object.entries(header).map(([k, v]) => [k, v.toString('utf8')]));
}
