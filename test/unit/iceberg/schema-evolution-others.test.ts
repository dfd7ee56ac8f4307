/**
 * Schema evolution beside other engines. First `schemaFor` over schemas as pyiceberg and Spark
 * wrote them (test/fixtures/iceberg/foreign: extra keys, `decimal(16, 2)`, `fixed[5]`,
 * defaults, a rename), then whole commits: another engine changes the `reports` table's schema
 * as Java's `UpdateSchema` would (next schema id, `last-column-id` raised, metadata-only), the
 * exporter commits a run's files written with its pinned field ids, and icebird reads the table.
 */

import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { avroMetadata, decodeManifest, decodeManifestList } from '../../../shared/iceberg/avro.js';
import { commitRun } from '../../../shared/iceberg/commit.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { parseJson } from '../../../shared/iceberg/json.js';
import { keyOfLocation, sameId } from '../../../shared/iceberg/locations.js';
import { icebergSchema, lastColumnId } from '../../../shared/iceberg/schema.js';
import { currentSchemaOf, schemaFor, withSchema } from '../../../shared/iceberg/schema-evolution.js';
import type { IcebergField, IcebergSchema, TableMetadata } from '../../../shared/iceberg/types.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { listAll } from '../../../shared/storage/storage.js';
import { openDuckDb } from '../../helpers/duckdb.js';
import { metadataAt, reportRow, writeReports } from '../../helpers/iceberg-reports.js';
import { readIcebergTable } from '../../helpers/icebird.js';

const FOREIGN = join(import.meta.dirname, '../../fixtures/iceberg/foreign');
const WITH_DEFAULTS =
  'duckdb+duckdb-iceberg/data/persistent/add_columns_with_defaults/default.db/add_columns_with_defaults/metadata/00002-2d907d9d-0f96-4bf3-9548-edfd9194704c.metadata.json';
const RENAMED = 'hyparam+icebird/test/files/hyperparam-iceberg/spark/rename_column/metadata/v3.metadata.json';

const foreign = async (path: string): Promise<TableMetadata> =>
  parseJson(await readFile(join(FOREIGN, path), 'utf8')) as TableMetadata;

/** A type other engines write and the exporter does not (`decimal(16, 2)`). */
const foreignType = (type: string) => type as unknown as IcebergField['type'];

/** Files of `fields` (taken from a foreign schema, as if the exporter wrote them). */
const filesOf = (fields: IcebergField[]): IcebergSchema => ({ type: 'struct', 'schema-id': 0, fields });

describe('schemaFor over schemas other engines wrote', () => {
  it('takes files that lack columns pyiceberg added with equal initial and write defaults, as they are', async () => {
    const table = await foreign(WITH_DEFAULTS);
    const current = currentSchemaOf(table);
    expect(schemaFor('t', table, filesOf([table.schemas[0]!.fields[0]!]))).toBe(current);
  });

  it('adds a new column after pyiceberg’s, keeping their defaults, types and keys as written', async () => {
    const table = await foreign(WITH_DEFAULTS);
    const col1 = table.schemas[0]!.fields[0]!;
    const added: IcebergField = { id: 16, name: 'extra', required: true, type: 'long' };
    const schema = schemaFor('t', table, filesOf([col1, added]));
    expect(schema['schema-id']).toBe(2);
    expect(schema['identifier-field-ids']).toEqual([]);
    expect(schema.fields.slice(0, -1)).toEqual(currentSchemaOf(table).fields);
    expect(schema.fields.at(-1)).toEqual({ ...added, required: false });
    const next = withSchema(table, schema);
    expect(next['last-column-id']).toBe(16);
    expect(next.schemas.map((s) => s['schema-id'])).toEqual([0, 1, 2]);
  });

  it('refuses a pinned id pyiceberg gave another column, in one line saying what to do', async () => {
    const table = await foreign(WITH_DEFAULTS);
    const mine: IcebergField = { id: 3, name: 'mine', required: false, type: 'string' };
    const act = () => schemaFor('t', table, filesOf([table.schemas[0]!.fields[0]!, mine]));
    expect(act).toThrow(ExporterError);
    expect(act).toThrow(
      /^[^\n]*field id 3, the exporter's mine, is the table's column col_integer; export to a new table/,
    );
  });

  it('refuses a column whose write-default the exporter’s rows would not get', async () => {
    const table = await foreign(WITH_DEFAULTS);
    const current = currentSchemaOf(table);
    current.fields[1] = { ...current.fields[1]!, 'write-default': false };
    expect(() => schemaFor('t', table, filesOf([current.fields[0]!]))).toThrow(
      /col_boolean has a write-default the exporter's rows would not get/,
    );
  });

  it('widens a decimal the exporter now writes wider, promotes nothing else', async () => {
    const table = await foreign(WITH_DEFAULTS);
    const [col1, , , , , , decimal] = currentSchemaOf(table).fields;
    const wider = schemaFor(
      't',
      table,
      filesOf([col1!, { ...decimal!, type: foreignType('decimal(18,2)') }]),
    );
    expect(wider.fields.find((f) => f.id === 7)!.type).toBe('decimal(18,2)');
    expect(
      schemaFor('t', table, filesOf([col1!, { ...decimal!, type: foreignType('decimal(10, 2)') }])),
    ).toBe(currentSchemaOf(table));
    expect(() =>
      schemaFor('t', table, filesOf([col1!, { ...decimal!, type: foreignType('decimal(18,3)') }])),
    ).toThrow(/col_decimal \(field id 7\) is of type decimal\(16, 2\), the exporter writes decimal\(18,3\)/);
  });

  it('takes files of the name a column had before Spark renamed it: same field id, the table’s name kept', async () => {
    const table = await foreign(RENAMED);
    const before = table.schemas.find((s) => s['schema-id'] === 0)!;
    expect(schemaFor('t', table, filesOf(before.fields))).toBe(currentSchemaOf(table));
    expect(currentSchemaOf(table).fields[2]!.name).toBe('event_date');
  });

  it('numbers a new schema after the highest schema id, and re-uses the id of an equal older schema', async () => {
    const table = await foreign(RENAMED);
    const renumbered = { ...table, schemas: table.schemas.map((s, i) => ({ ...s, 'schema-id': i * 5 })) };
    renumbered['current-schema-id'] = 5;
    const more: IcebergField = { id: 6, name: 'more', required: false, type: 'string' };
    const next = schemaFor('t', renumbered, filesOf([...currentSchemaOf(renumbered).fields, more]));
    expect(next['schema-id']).toBe(6);
    const back = withSchema(renumbered, next);
    // Another engine drops `more`: schema 7 equals schema 5. The exporter's files bring it back: schema 6 again.
    const dropped: TableMetadata = {
      ...back,
      'current-schema-id': 7,
      schemas: [...back.schemas, { ...currentSchemaOf(renumbered), 'schema-id': 7 }],
    };
    const again = schemaFor('t', dropped, filesOf([...currentSchemaOf(renumbered).fields, more]));
    expect(again).toBe(back.schemas.find((s) => s['schema-id'] === 6));
    expect(withSchema(dropped, again).schemas).toHaveLength(dropped.schemas.length);
  });

  it('counts the nested ids of struct and map columns in last-column-id', () => {
    const schema = filesOf([
      { id: 1, name: 'a', required: false, type: 'string' },
      {
        id: 2,
        name: 'point',
        required: false,
        type: {
          type: 'struct',
          fields: [
            {
              id: 3,
              name: 'tags',
              required: false,
              type: {
                type: 'map',
                'key-id': 4,
                key: 'string',
                'value-id': 5,
                value: 'long',
                'value-required': false,
              },
            },
          ],
        } as unknown as IcebergField['type'],
      },
    ]);
    expect(lastColumnId(schema)).toBe(5);
  });
});

/** A table of `reports` with one committed frozen run, in a fresh folder. */
async function frozenReports() {
  const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'iceberg-others-')));
  const catalog = new FileCatalog(storage);
  await commitRun(storage, catalog, {
    table: 'reports',
    runId: 'run-a',
    files: [await writeReports(storage, 'run-a', '2026-11-22', 'freeze', [reportRow(1, 'run-a')])],
    now: new Date('2026-11-22T10:00:00Z'),
  });
  return { storage, catalog };
}

/**
 * Another engine's schema change, metadata only, as Java's `UpdateSchema` commits it: the
 * fields (keys in Java's order: id, name, required, type), the next schema id, last-column-id
 * raised, a new metadata version.
 */
async function alterTable(
  catalog: FileCatalog,
  change: (fields: IcebergField[], lastId: number) => IcebergField[],
) {
  const loaded = await catalog.load('reports');
  const metadata = loaded.metadata!;
  const fields = change(
    currentSchemaOf(metadata).fields.map(({ id, name, required, type, doc }) => ({
      id,
      name,
      required,
      type,
      ...(doc !== undefined && { doc }),
    })),
    metadata['last-column-id'],
  );
  const schemaId = Math.max(...metadata.schemas.map((s) => s['schema-id'])) + 1;
  const schema: IcebergSchema = { type: 'struct', 'schema-id': schemaId, fields };
  const next: TableMetadata = {
    ...metadata,
    'last-column-id': Math.max(metadata['last-column-id'], lastColumnId(schema)),
    'current-schema-id': schemaId,
    schemas: [...metadata.schemas, schema],
    'last-updated-ms': metadata['last-updated-ms'] + 1,
  };
  expect((await catalog.commit(loaded, next)).committed).toBe(true);
}

/** Commits run `runId`'s `reports` file of `contract` with `rows`; returns the committed metadata. */
async function commitReports(
  { storage, catalog }: Awaited<ReturnType<typeof frozenReports>>,
  runId: string,
  dt: string,
  contract: 'freeze' | 'evolve',
  rows: ReturnType<typeof reportRow>[],
) {
  const outcome = await commitRun(storage, catalog, {
    table: 'reports',
    runId,
    ...(contract === 'evolve' && { contract }),
    files: [await writeReports(storage, runId, dt, contract, rows)],
    now: new Date(`${dt}T10:00:00Z`),
  });
  return metadataAt(storage, outcome.metadataLocation);
}

const rowsByJob = async (catalog: FileCatalog) =>
  new Map((await readIcebergTable(catalog.tableLocation('reports'))).map((r) => [Number(r.job_id), r]));

describe('the exporter commits to a reports table another engine changed', () => {
  it('keeps a column another engine added; the exporter’s rows read NULL for it', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields, last) => [
      ...fields,
      { id: last + 1, name: 'priority', required: false, type: 'string' },
    ]);
    const after = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [reportRow(2, 'run-b')]);
    expect(after['current-schema-id']).toBe(1);
    expect(after.schemas).toHaveLength(2);
    expect(currentSchemaOf(after).fields.at(-1)).toMatchObject({ id: 19, name: 'priority' });
    const rows = await rowsByJob(lake.catalog);
    expect(rows.get(2)).toMatchObject({ run_id: 'run-b', survey_name: 'Survey' });
    expect(Object.keys(rows.get(2)!)).toContain('priority');
    expect(rows.get(1)!.priority ?? null).toBeNull();
    expect(rows.get(2)!.priority ?? null).toBeNull();
  });

  it('refuses `_rescued` when another engine’s column took its pinned id, saying to run freeze', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields, last) => [
      ...fields,
      { id: last + 1, name: 'priority', required: false, type: 'string' },
    ]);
    const before = await lake.catalog.load('reports');
    await expect(
      commitReports(lake, 'run-b', '2026-11-23', 'evolve', [{ ...reportRow(2, 'run-b'), _rescued: '{}' }]),
    ).rejects.toThrow(
      /^the Iceberg table reports \(.*\) cannot take the exporter's files: field id 19, the exporter's _rescued, is the table's column priority; run with schema_contract freeze, or export to a new table/,
    );
    expect((await lake.catalog.load('reports')).version).toBe(before.version);
  });

  it('refuses `_rescued` when another engine added and dropped a column under its pinned id', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields, last) => [
      ...fields,
      { id: last + 1, name: 'priority', required: false, type: 'string' },
    ]);
    await alterTable(lake.catalog, (fields) => fields.filter((f) => f.name !== 'priority'));
    await expect(
      commitReports(lake, 'run-b', '2026-11-23', 'evolve', [{ ...reportRow(2, 'run-b'), _rescued: '{}' }]),
    ).rejects.toThrow(/field id 19 of the exporter's new column _rescued was the table's column priority/);
  });

  it('refuses `_rescued` when another engine raised last-column-id past its pinned id', async () => {
    const lake = await frozenReports();
    // An id above the pinned ones: whether 19 ever named a column (in a schema since removed) is unknown.
    await alterTable(lake.catalog, (fields) => [
      ...fields,
      { id: 40, name: 'priority', required: false, type: 'string' },
    ]);
    await expect(
      commitReports(lake, 'run-b', '2026-11-23', 'evolve', [{ ...reportRow(2, 'run-b'), _rescued: '{}' }]),
    ).rejects.toThrow(
      /field id 19 of the exporter's new column _rescued was given to a column the table no longer describes \(last-column-id 40\); run with schema_contract freeze/,
    );
  });

  it('writes into a column another engine renamed, under the table’s name', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields) =>
      fields.map((f) => (f.name === 'campaign_name' ? { ...f, name: 'campaign_title' } : f)),
    );
    const after = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [
      { ...reportRow(2, 'run-b'), campaign_name: 'Autumn' },
    ]);
    expect(after['current-schema-id']).toBe(1);
    expect(currentSchemaOf(after).fields[3]).toMatchObject({ id: 4, name: 'campaign_title' });
    // Read as Iceberg readers do, by field id (DuckDB's read_parquet `schema` map). icebird takes
    // ids from a file's `iceberg.schema` key-value, which the exporter's files lack, and matches
    // names otherwise: it reads campaign_title as NULL in them (not checked here).
    const db = await openDuckDb();
    try {
      const files = (await listAll(lake.storage, 'iceberg/reports/data/')).map(
        (k) => `'${join(lake.storage.location, k)}'`,
      );
      const rows = await db.all(
        `SELECT job_id, campaign_title FROM read_parquet([${files.join(', ')}], schema = MAP {
           1: {name: 'job_id', type: 'BIGINT', default_value: NULL},
           4: {name: 'campaign_title', type: 'VARCHAR', default_value: NULL}}) ORDER BY job_id`,
      );
      expect(rows).toEqual([
        { job_id: 1n, campaign_title: 'Spring' },
        { job_id: 2n, campaign_title: 'Autumn' },
      ]);
    } finally {
      await db.close();
    }
  });

  it('brings back a column another engine dropped, with its field id: old rows read their values again', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields) => fields.filter((f) => f.name !== 'survey_name'));
    expect(Object.keys((await rowsByJob(lake.catalog)).get(1)!)).not.toContain('survey_name');
    const after = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [
      { ...reportRow(2, 'run-b'), survey_name: 'Second' },
    ]);
    // survey_name was optional: the schema is schema 0 again, by its id.
    expect(after['current-schema-id']).toBe(0);
    expect(after.schemas.map((s) => s['schema-id'])).toEqual([0, 1]);
    expect(after['last-column-id']).toBe(18);
    const rows = await rowsByJob(lake.catalog);
    expect(rows.get(1)).toMatchObject({ survey_name: 'Survey' });
    expect(rows.get(2)).toMatchObject({ survey_name: 'Second' });
  });

  it('refuses the exporter’s column re-added by another engine under a new id, saying to rename it', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields) => fields.filter((f) => f.name !== 'survey_name'));
    await alterTable(lake.catalog, (fields, last) => [
      ...fields,
      { id: last + 1, name: 'survey_name', required: false, type: 'string' },
    ]);
    await expect(
      commitReports(lake, 'run-b', '2026-11-23', 'freeze', [reportRow(2, 'run-b')]),
    ).rejects.toThrow(
      /its column survey_name has field id 19, the exporter's files 15; rename the table's column survey_name/,
    );
  });

  it('takes int files into a column another engine promoted to long, and a column it made optional', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields) =>
      fields.map((f) =>
        f.name === 'job_status'
          ? { ...f, type: 'long' as const }
          : f.name === 'run_id'
            ? { ...f, required: false }
            : f,
      ),
    );
    const after = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [
      { ...reportRow(2, 'run-b'), job_status: 4 },
    ]);
    expect(after['current-schema-id']).toBe(1);
    expect(currentSchemaOf(after).fields[4]).toMatchObject({
      name: 'job_status',
      type: 'long',
      required: true,
    });
    expect(currentSchemaOf(after).fields[15]).toMatchObject({ name: 'run_id', required: false });
    // The run's manifest gives job_status's bounds as a long (8 bytes), the column's type now.
    const snapshot = after.snapshots!.at(-1)!;
    const list = await decodeManifestList(
      (await lake.storage.get(keyOfLocation(lake.storage, snapshot['manifest-list'])))!.body,
    );
    const added = list.find((m) => sameId(m.added_snapshot_id, snapshot['snapshot-id']))!;
    const [entry] = await decodeManifest(
      (await lake.storage.get(keyOfLocation(lake.storage, added.manifest_path)))!.body,
    );
    for (const bounds of [entry!.data_file.lower_bounds, entry!.data_file.upper_bounds]) {
      const bound = bounds!.find((b) => b.key === 5)!.value;
      expect(bound).toHaveLength(8);
      expect(bound.readBigInt64LE()).toBe(4n);
    }
    const rows = await rowsByJob(lake.catalog);
    expect(Number(rows.get(1)!.job_status)).toBe(3);
    expect(Number(rows.get(2)!.job_status)).toBe(4);
  });

  it('refuses a type no promotion joins, in one line, and commits nothing', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields) =>
      fields.map((f) => (f.name === 'job_status' ? { ...f, type: 'string' as const } : f)),
    );
    const before = await lake.catalog.load('reports');
    const failure = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [reportRow(2, 'run-b')]).catch(
      (e: unknown) => e as Error,
    );
    expect(failure).toBeInstanceOf(ExporterError);
    expect((failure as Error).message).not.toContain('\n');
    expect((failure as Error).message).toMatch(
      /job_status \(field id 5\) is of type string, the exporter writes int, and Iceberg promotes neither to the other; export to a new table/,
    );
    expect((await lake.catalog.load('reports')).version).toBe(before.version);
  });

  it('refuses a required column another engine added that the exporter does not write', async () => {
    const lake = await frozenReports();
    await alterTable(lake.catalog, (fields, last) => [
      ...fields,
      { id: last + 1, name: 'owner', required: true, type: 'string' },
    ]);
    await expect(
      commitReports(lake, 'run-b', '2026-11-23', 'freeze', [reportRow(2, 'run-b')]),
    ).rejects.toThrow(/it requires the column owner, which the exporter does not write; make it optional/);
  });
});

describe('the exporter commits to a table another engine re-partitioned by meaning alone', () => {
  it('takes a partition field another engine renamed under a new spec id, and writes its manifests under that spec', async () => {
    const lake = await frozenReports();
    // As Java's UpdatePartitionSpec commits `RENAME PARTITION FIELD dt TO day`: a new spec (id 1),
    // the same source id, field id and transform, Java's key order.
    const loaded = await lake.catalog.load('reports');
    const metadata = loaded.metadata!;
    const [field] = metadata['partition-specs'][0]!.fields;
    const renamed = {
      'spec-id': 1,
      fields: [
        {
          name: 'day',
          transform: field!.transform,
          'source-id': field!['source-id'],
          'field-id': field!['field-id'],
        },
      ],
    };
    const next: TableMetadata = {
      ...metadata,
      'partition-specs': [...metadata['partition-specs'], renamed],
      'default-spec-id': 1,
      'last-updated-ms': metadata['last-updated-ms'] + 1,
    };
    expect((await lake.catalog.commit(loaded, next)).committed).toBe(true);

    const after = await commitReports(lake, 'run-b', '2026-11-23', 'freeze', [reportRow(2, 'run-b')]);
    expect(after['default-spec-id']).toBe(1);
    expect(after['partition-specs']).toEqual(next['partition-specs']);
    const snapshot = after.snapshots!.find((s) => s['snapshot-id'] === after['current-snapshot-id'])!;
    const list = await decodeManifestList(
      await readFile(join(lake.storage.location, keyOfLocation(lake.storage, snapshot['manifest-list']))),
    );
    const added = list.filter((m) => sameId(m.added_snapshot_id, snapshot['snapshot-id']));
    expect(added.map((m) => m.partition_spec_id)).toEqual([1]);
    const header = await avroMetadata(
      await readFile(join(lake.storage.location, keyOfLocation(lake.storage, added[0]!.manifest_path))),
    );
    expect(header['partition-spec-id']).toBe('1');
    expect(JSON.parse(header['partition-spec']!)).toEqual(renamed.fields);
    expect([...(await rowsByJob(lake.catalog)).keys()].sort()).toEqual([1, 2]);
  });
});

describe('the exporter’s own new column', () => {
  it('is added with its pinned id, the next field id of a table only the exporter changed', async () => {
    const lake = await frozenReports();
    const after = await commitReports(lake, 'run-b', '2026-11-23', 'evolve', [
      { ...reportRow(2, 'run-b'), _rescued: '{}' },
    ]);
    expect(currentSchemaOf(after).fields.find((f) => f.name === '_rescued')!.id).toBe(19);
    expect(after['last-column-id']).toBe(19);
    expect(icebergSchema('reports', 'freeze').fields.every((f) => f.id < 19)).toBe(true);
  });
});
