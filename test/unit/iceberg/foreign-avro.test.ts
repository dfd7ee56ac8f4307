/**
 * Manifests and manifest lists other engines wrote (test/fixtures/iceberg/foreign, see its
 * README) decode with the exporter's reader, by each file's own writer schema, to the values
 * icebird's Avro reader (a second, independent decoder) reads from the same bytes.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { avroRead, avroMetadata as icebirdHeader } from 'icebird';
import { describe, expect, it } from 'vitest';
import {
  decodeManifest,
  decodeManifestList,
  MANIFEST_ENTRY_SCHEMA,
  MANIFEST_FILE_SCHEMA,
} from '../../../shared/iceberg/avro.js';

const FOREIGN = join(import.meta.dirname, '../../fixtures/iceberg/foreign');
const ICEBIRD = 'hyparam+icebird/test/files/hyperparam-iceberg';
const DUCKDB = 'duckdb+duckdb-iceberg/data/persistent';

/**
 * [writer, file, fields not compared]: every Avro file of the foreign fixtures. The equality
 * delete manifest's snapshot id (9876543210123456789, chosen by duckdb-iceberg's generator) is
 * beyond the long range: the two decoders wrap it differently, and the commit never reads it.
 */
const FILES: [string, string, string[]?][] = [
  [
    'Athena',
    `${ICEBIRD}/athena/example/metadata/snap-6838723292707092922-1-3d82674b-df1e-49b5-a7a9-05b61567065a.avro`,
  ],
  ['Athena', `${ICEBIRD}/athena/example/metadata/3d82674b-df1e-49b5-a7a9-05b61567065a-m0.avro`],
  [
    'Java',
    `${ICEBIRD}/java/bunnies/metadata/snap-9158179788527662767-1-a01399a1-e864-4562-b921-c8cb56e6e4a9.avro`,
  ],
  ['Java', `${ICEBIRD}/java/bunnies/metadata/a01399a1-e864-4562-b921-c8cb56e6e4a9-m0.avro`],
  [
    'Spark',
    `${ICEBIRD}/spark/bunnies/metadata/snap-2701171901096418979-1-91d5eea0-314d-4056-8818-59b825cbd38a.avro`,
  ],
  ['Spark', `${ICEBIRD}/spark/bunnies/metadata/91d5eea0-314d-4056-8818-59b825cbd38a-m0.avro`],
  [
    'pyiceberg',
    `${DUCKDB}/add_columns_with_defaults/default.db/add_columns_with_defaults/metadata/snap-8904642012249016277-0-0bb8c58e-4fbc-483f-af6d-0e2f896179a2.avro`,
  ],
  [
    'pyiceberg',
    `${DUCKDB}/add_columns_with_defaults/default.db/add_columns_with_defaults/metadata/0bb8c58e-4fbc-483f-af6d-0e2f896179a2-m0.avro`,
  ],
  [
    'pyiceberg (equality deletes)',
    `${DUCKDB}/equality_delete_extra_column/warehouse/ns/t/metadata/482c51b1-71ea-4508-b282-e2d753a5ef36-m0.avro`,
    ['snapshot_id'],
  ],
  [
    'Spark, format version 1',
    `${DUCKDB}/name_mapping/warehouse_1/mydb/t1/metadata/snap-2651609110244230974-1-0acbcf27-b372-4bd0-929f-a5865a59f3dd.avro`,
  ],
  [
    'Spark, format version 1',
    `${DUCKDB}/name_mapping/warehouse_1/mydb/t1/metadata/0acbcf27-b372-4bd0-929f-a5865a59f3dd-m0.avro`,
  ],
];

type Schema = { name: string; type: unknown; 'field-id'?: number; fields?: Schema[] };

/** A value both decoders agree on: longs as text, bytes as hex, null and undefined alike. */
function plain(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint' || typeof v === 'number') return String(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** The record type inside a field's type (through a nullable union and arrays). */
function recordOf(type: unknown): Schema | undefined {
  if (Array.isArray(type)) return type.map(recordOf).find((t) => t !== undefined);
  if (typeof type !== 'object' || type === null) return undefined;
  const t = type as { type: string; items?: unknown; fields?: Schema[] };
  if (t.type === 'record') return t as Schema;
  if (t.type === 'array') return recordOf(t.items);
  return undefined;
}

/**
 * icebird's record (keys: the writer's names) in the exporter's names, matched by field id as
 * Iceberg does; fields the spec schema does not name are left out, as the exporter skips them.
 */
function byFieldId(value: unknown, writer: Schema, ours: Schema): unknown {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return value.map((v) => byFieldId(v, writer, ours));
  const record = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const w of writer.fields ?? []) {
    const o = ours.fields?.find((f) => f['field-id'] === w['field-id']);
    if (!o) continue;
    const wr = recordOf(w.type);
    const or = recordOf(o.type);
    // The partition struct is the writer's own (its spec's fields): compared whole.
    out[o.name] =
      wr && or && o['field-id'] !== 102 ? byFieldId(record[w.name], wr, or) : plain(record[w.name]);
  }
  return out;
}

describe('manifests other engines wrote', () => {
  it.each(FILES)(
    '%s: %s decodes by its writer schema as icebird reads it',
    async (_writer, path, skipped = []) => {
      const bytes = await readFile(join(FOREIGN, path));
      const list = path.split('/').at(-1)!.startsWith('snap-');
      const ours = list ? await decodeManifestList(bytes) : await decodeManifest(bytes);

      const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
      const { metadata, syncMarker } = icebirdHeader(reader);
      const theirs = avroRead({ reader, metadata, syncMarker }) as unknown[];
      const writer = metadata['avro.schema'] as Schema;
      const spec = (list ? MANIFEST_FILE_SCHEMA : MANIFEST_ENTRY_SCHEMA) as Schema;

      expect(ours.length).toBeGreaterThan(0);
      expect(ours.length).toBe(theirs.length);
      const expected = theirs.map((r) => byFieldId(r, writer, spec)) as Record<string, unknown>[];
      const got = ours.map((r) => plain(r)) as Record<string, unknown>[];
      for (const r of [...expected, ...got]) for (const name of skipped) delete r[name];
      // Every field the writer wrote reads the same; the ones it did not (v1) take the spec's values.
      expect(got).toMatchObject(expected);
    },
  );

  it("reads pyiceberg's equality_ids, declared long, as the field ids they are", async () => {
    const bytes = await readFile(join(FOREIGN, FILES[8]![1]));
    const [entry] = await decodeManifest(bytes);
    expect(entry!.data_file.content).toBe(2);
    expect(entry!.data_file.equality_ids).toEqual([1]);
    // The partition struct is the writer's spec's (bucket[1] of val), without the exporter's dt.
    expect({ ...entry!.data_file.partition }).toEqual({ val_bucket: 0, dt: null });
  });

  it('gives a format version 1 manifest list the spec values of what v1 lacks', async () => {
    const [first] = await decodeManifestList(await readFile(join(FOREIGN, FILES[9]![1])));
    expect(first).toMatchObject({ content: 0, sequence_number: 0, min_sequence_number: 0 });
    expect(
      first!.added_files_count + first!.existing_files_count + first!.deleted_files_count,
    ).toBeGreaterThan(0);
  });
});
