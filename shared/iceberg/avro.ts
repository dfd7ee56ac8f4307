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
import { PARTITION_KEY } from '../export/layout.js';
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

/** Reads every record and the header metadata of an Avro container file. */
async function readContainer<T>(
  bytes: Uint8Array,
  type: avro.Type,
): Promise<{ records: T[]; metadata: Record<string, string> }> {
  return new Promise((resolve, reject) => {
    const records: T[] = [];
    let metadata: Record<string, string> = {};
    const decoder = new avro.streams.BlockDecoder({ readerSchema: type });
    decoder.on('metadata', (_type: unknown, _codec: unknown, header: { meta: Record<string, Buffer> }) => {
      metadata = Object.fromEntries(Object.entries(header.meta).map(([k, v]) => [k, v.toString('utf8')]));
    });
    decoder.on('data', (r: T) => records.push(r));
    decoder.on('end', () => resolve({ records, metadata }));
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

/** The entries of a manifest, read with the spec's schema (fields another writer added are skipped). */
export async function decodeManifest(bytes: Uint8Array): Promise<ManifestEntry[]> {
  return (await readContainer<ManifestEntry>(bytes, entryType)).records;
}

/** The manifests of a manifest list. */
export async function decodeManifestList(bytes: Uint8Array): Promise<ManifestFile[]> {
  return (await readContainer<ManifestFile>(bytes, fileType)).records;
}

/** The header metadata of an Avro file (for tests and the maintenance step). */
export async function avroMetadata(
  bytes: Uint8Array,
  kind: 'manifest' | 'manifest-list',
): Promise<Record<string, string>> {
  return (await readContainer(bytes, kind === 'manifest' ? entryType : fileType)).metadata;
}
