/**
 * Another engine's writes to a table the exporter writes, built from files other engines really
 * wrote (test/fixtures/iceberg/foreign): metadata in the key order and with the parts Java and
 * Athena write (taken from their fixtures, not from the exporter's serializer), and manifests
 * and manifest lists encoded with Athena's own Avro writer schemas and header keys (read from
 * the fixture files' headers), through avsc.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import type { DataFile } from '../../shared/iceberg/avro.js';
import { parseJson, stringifyJson } from '../../shared/iceberg/json.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';

export const FOREIGN = join(import.meta.dirname, '../fixtures/iceberg/foreign');
const ATHENA = 'hyparam+icebird/test/files/hyperparam-iceberg/athena/example/metadata';
const JAVA_RESOURCES = 'apache+iceberg/core/src/test/resources';

/** A foreign fixture's JSON, parsed with 64-bit ids exact. */
export const foreignJson = (path: string): Record<string, unknown> =>
  parseJson(readFileSync(join(FOREIGN, path), 'utf8')) as Record<string, unknown>;

export const ATHENA_METADATA = foreignJson(
  `${ATHENA}/00001-aaf0d033-d06b-43c7-be60-67f83abd4aca.metadata.json`,
) as unknown as TableMetadata;
export const JAVA_V2 = foreignJson(`${JAVA_RESOURCES}/TableMetadataV2Valid.json`) as unknown as TableMetadata;

/** `value`'s object keys in the order of `template`'s (then its own others), recursively. */
function orderLike(value: unknown, template: unknown): unknown {
  if (Array.isArray(value)) {
    const t = Array.isArray(template) ? template[0] : undefined;
    return value.map((v) => orderLike(v, t));
  }
  if (value === null || typeof value !== 'object' || typeof value === 'bigint') return value;
  const v = value as Record<string, unknown>;
  // A template that is no object (Athena's field `type` "int" against a `list` type) orders nothing.
  const t = (template !== null && typeof template === 'object' ? template : {}) as Record<string, unknown>;
  const keys = [...Object.keys(t).filter((k) => k in v), ...Object.keys(v).filter((k) => !(k in t))];
  return Object.fromEntries(keys.map((k) => [k, orderLike(v[k], t[k])]));
}

/** The template of Java's key order: Athena's metadata, with Java's partition fields and sort orders. */
const JAVA_ORDER = {
  ...ATHENA_METADATA,
  'partition-specs': JAVA_V2['partition-specs'],
  'sort-orders': JAVA_V2['sort-orders'],
  schemas: [{ ...JAVA_V2.schemas[1], fields: ATHENA_METADATA.schemas[0]!.fields }],
};

/**
 * `metadata` as Java's `TableMetadataParser` writes it: its keys in Java's order, pretty-printed
 * as Jackson does (`"key" : value`), 64-bit ids digit for digit.
 */
export function javaMetadataText(metadata: TableMetadata): string {
  const ordered = orderLike(metadata, JAVA_ORDER);
  const text = stringifyJson(ordered, 2);
  return text.replace(/^(\s*"[^"]+"):/gm, '$1 :');
}

/** A 64-bit long for avsc: numbers and BigInts in, numbers (when safe) or BigInts out. */
const LongType = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => {
    const v = buf.readBigInt64LE();
    return Number.isSafeInteger(Number(v)) ? Number(v) : v;
  },
  toBuffer: (n: number | bigint) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (n: number | bigint) => n,
  toJSON: (n: number | bigint) => Number(n),
  isValid: (n: unknown) => typeof n === 'bigint' || Number.isSafeInteger(n),
  compare: (a: number | bigint, b: number | bigint) =>
    BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0,
});

/** The writer schema and header metadata of one of Athena's Avro files. */
function athenaHeader(file: string): { schema: Record<string, unknown>; meta: Record<string, string> } {
  let found: { schema: Record<string, unknown>; meta: Record<string, string> } | undefined;
  const decoder = new avro.streams.BlockDecoder({ noDecode: true });
  decoder.on('metadata', (_t: unknown, _c: unknown, h: { meta: Record<string, Buffer> }) => {
    const meta = Object.fromEntries(Object.entries(h.meta).map(([k, v]) => [k, v.toString('utf8')]));
    found = { schema: JSON.parse(meta['avro.schema']!) as Record<string, unknown>, meta };
  });
  decoder.end(readFileSync(join(FOREIGN, ATHENA, file)));
  if (!found) throw new Error(`no Avro header in ${file}`);
  return found;
}

function encode(schema: object, meta: Record<string, string>, records: readonly object[]): Promise<Buffer> {
  const type = avro.Type.forSchema(schema as avro.Schema, { registry: { long: LongType } });
  const metadata = Object.fromEntries(
    Object.entries(meta)
      .filter(([k]) => !k.startsWith('avro.'))
      .map(([k, v]) => [k, Buffer.from(v)]),
  );
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const options = { codec: 'deflate', metadata } as Partial<avro.EncoderOptions>;
    const encoder = new avro.streams.BlockEncoder(type, options);
    // The header carries the writer schema as Athena wrote it (field ids included).
    (encoder as unknown as { _schema: object })._schema = schema;
    encoder.on('data', (c: Buffer) => chunks.push(c));
    encoder.on('end', () => resolve(Buffer.concat(chunks)));
    encoder.on('error', reject);
    for (const r of records) encoder.write(r);
    encoder.end();
  });
}

/** One entry of an Athena manifest. */
export interface ForeignEntry {
  status: 0 | 1 | 2;
  snapshot_id: number | bigint;
  sequence_number: number | bigint | null;
  file_sequence_number: number | bigint | null;
  data_file: Pick<DataFile, 'content' | 'file_path' | 'record_count' | 'file_size_in_bytes'> & {
    dt: string;
  };
}

/**
 * A manifest as Athena writes it for a table partitioned by `dt` (identity, field 1000): the
 * writer schema of Athena's manifest with Athena's partition struct for that spec, Athena's
 * header keys with the table's schema and spec. Metrics left out (Iceberg allows it).
 */
export function athenaManifest(
  entries: readonly ForeignEntry[],
  table: { schemaJson: string; schemaId: number; specJson: string },
): Promise<Buffer> {
  const { schema, meta } = athenaHeader('3d82674b-df1e-49b5-a7a9-05b61567065a-m0.avro');
  const text = JSON.stringify(schema).replace(
    '{"type":"record","name":"r102","fields":[]}',
    '{"type":"record","name":"r102","fields":[{"name":"dt","type":["null","string"],"default":null,"field-id":1000}]}',
  );
  const none = { column_sizes: null, value_counts: null, null_value_counts: null, nan_value_counts: null };
  return encode(
    JSON.parse(text) as object,
    {
      ...meta,
      schema: table.schemaJson,
      'schema-id': String(table.schemaId),
      'partition-spec': table.specJson,
      content: entries.some((e) => e.data_file.content !== 0) ? 'deletes' : 'data',
    },
    entries.map((e) => ({
      ...e,
      data_file: {
        content: e.data_file.content,
        file_path: e.data_file.file_path,
        file_format: 'PARQUET',
        partition: { dt: e.data_file.dt },
        record_count: e.data_file.record_count,
        file_size_in_bytes: e.data_file.file_size_in_bytes,
        ...none,
        lower_bounds: null,
        upper_bounds: null,
        key_metadata: null,
        split_offsets: null,
        equality_ids: null,
        sort_order_id: 0,
      },
    })),
  );
}

/** A manifest list entry, in Athena's own field names (`added_data_files_count`, …). */
export interface ForeignListEntry {
  manifest_path: string;
  manifest_length: number;
  content: number;
  sequence_number: number;
  min_sequence_number: number;
  added_snapshot_id: number | bigint;
  added: number;
  existing: number;
  deleted: number;
  addedRows: number;
  existingRows: number;
  deletedRows: number;
}

/** A manifest list as Athena writes it: Athena's writer schema and header keys. */
export function athenaManifestList(
  manifests: readonly ForeignListEntry[],
  header: { snapshotId: bigint; parentSnapshotId: number | bigint; sequenceNumber: number },
): Promise<Buffer> {
  const { schema, meta } = athenaHeader(
    'snap-6838723292707092922-1-3d82674b-df1e-49b5-a7a9-05b61567065a.avro',
  );
  return encode(
    schema,
    {
      ...meta,
      'snapshot-id': String(header.snapshotId),
      'parent-snapshot-id': String(header.parentSnapshotId),
      'sequence-number': String(header.sequenceNumber),
    },
    manifests.map((m) => ({
      manifest_path: m.manifest_path,
      manifest_length: m.manifest_length,
      partition_spec_id: 0,
      content: m.content,
      sequence_number: m.sequence_number,
      min_sequence_number: m.min_sequence_number,
      added_snapshot_id: m.added_snapshot_id,
      added_data_files_count: m.added,
      existing_data_files_count: m.existing,
      deleted_data_files_count: m.deleted,
      added_rows_count: m.addedRows,
      existing_rows_count: m.existingRows,
      deleted_rows_count: m.deletedRows,
      partitions: null,
    })),
  );
}
