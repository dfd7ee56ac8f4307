import { rm } from 'node:fs/promises';
import { GlueClient } from '@aws-sdk/client-glue';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { GlueCatalog, versionOf } from '../../../shared/iceberg/glue-catalog.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { tempDir } from '../../helpers/export.js';
import { GlueFake } from '../../helpers/glue-fake.js';

const DB = 'exporter';
const glue = mockClient(GlueClient);

/** Metadata with one snapshot whose id is `snapshotId`. */
const metadataOf = (location: string, snapshotId: number | bigint = 1): TableMetadata => ({
  'format-version': 2,
  'table-uuid': '5e2a6b8e-0000-4000-8000-000000000001',
  location,
  'last-sequence-number': 1,
  'last-updated-ms': 1_700_000_000_000,
  'last-column-id': 1,
  'current-schema-id': 0,
  schemas: [
    { type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'dt', required: false, type: 'string' }] },
  ],
  'default-spec-id': 0,
  'partition-specs': [{ 'spec-id': 0, fields: [] }],
  'last-partition-id': 999,
  'default-sort-order-id': 0,
  'sort-orders': [{ 'order-id': 0, fields: [] }],
  'current-snapshot-id': snapshotId,
  snapshots: [
    {
      'snapshot-id': snapshotId,
      'sequence-number': 1,
      'timestamp-ms': 1_700_000_000_000,
      'manifest-list': `${location}/metadata/snap-1.avro`,
      summary: { operation: 'append' },
    },
  ],
});

describe('GlueCatalog', () => {
  let root: string;
  let storage: LocalStorage;
  let fake: GlueFake;
  let uuids: number;
  const catalog = (options: { maxAttempts?: number } = {}) =>
    new GlueCatalog({
      client: new GlueClient({ region: 'eu-west-1' }),
      databaseName: DB,
      storage,
      uuid: () => `uuid-${++uuids}`,
      ...options,
    });

  beforeEach(async () => {
    root = await tempDir('glue-catalog');
    storage = new LocalStorage(root);
    uuids = 0;
    fake = new GlueFake(glue);
    fake.create(DB, {
      Name: 'reports',
      TableType: 'EXTERNAL_TABLE',
      Parameters: { table_type: 'ICEBERG', comment: 'kept' },
      StorageDescriptor: {
        Location: `${storage.location}/iceberg/reports`,
        Columns: [{ Name: 'dt', Type: 'string' }],
      },
    });
  });
  afterEach(async () => {
    glue.reset();
    await rm(root, { recursive: true, force: true });
  });

  it("places a table under the output root's iceberg/ folder, as the stack does", () => {
    expect(catalog().tableLocation('reports_current')).toBe(`${storage.location}/iceberg/reports_current`);
  });

  it('loads a table without a pointer as one without metadata', async () => {
    const base = await catalog().load('reports');
    expect(base).toMatchObject({
      name: 'reports',
      metadataLocation: undefined,
      metadata: undefined,
      version: '0',
    });
  });

  it('commits the first metadata as version 00000 and points the Glue table at it', async () => {
    const c = catalog();
    const base = await c.load('reports');
    const metadata = metadataOf(c.tableLocation('reports'));

    const result = await c.commit(base, metadata);

    const location = `${storage.location}/iceberg/reports/metadata/00000-uuid-1.metadata.json`;
    expect(result).toEqual({ committed: true, metadataLocation: location });
    const table = fake.table(DB, 'reports');
    expect(table.Parameters).toEqual({ table_type: 'ICEBERG', comment: 'kept', metadata_location: location });
    expect(table.StorageDescriptor?.Columns).toEqual([{ Name: 'dt', Type: 'string' }]);
    expect(fake.updates[0]).toMatchObject({ VersionId: '0', SkipArchive: true, DatabaseName: DB });
    expect(await c.load('reports')).toMatchObject({ metadataLocation: location, metadata, version: '1' });
  });

  it('commits the next version on top, keeping the previous location', async () => {
    const c = catalog();
    const first = await c.commit(await c.load('reports'), metadataOf(c.tableLocation('reports'), 1));
    const base = await c.load('reports');

    const second = await c.commit(base, metadataOf(c.tableLocation('reports'), 2));

    expect(second).toEqual({
      committed: true,
      metadataLocation: `${storage.location}/iceberg/reports/metadata/00001-uuid-2.metadata.json`,
    });
    expect(fake.table(DB, 'reports').Parameters).toMatchObject({
      metadata_location: second.committed ? second.metadataLocation : '',
      previous_metadata_location: first.committed ? first.metadataLocation : '',
    });
  });

  it('lets exactly one of two racing committers win; the other is told to rebase', async () => {
    const a = catalog();
    const b = catalog();
    const [baseA, baseB] = await Promise.all([a.load('reports'), b.load('reports')]);

    const results = await Promise.all([
      a.commit(baseA, metadataOf(a.tableLocation('reports'), 1)),
      b.commit(baseB, metadataOf(b.tableLocation('reports'), 2)),
    ]);

    expect(results.filter((r) => r.committed)).toHaveLength(1);
    expect(results.filter((r) => !r.committed)).toEqual([{ committed: false }]);
    const winner = results.find((r) => r.committed);
    expect(fake.table(DB, 'reports').Parameters?.metadata_location).toBe(
      winner?.committed ? winner.metadataLocation : undefined,
    );
  });

  it('recognises its own commit when the answer was lost after the update applied', async () => {
    const c = catalog();
    const base = await c.load('reports');
    fake.faults.push('lost-after');

    const result = await c.commit(base, metadataOf(c.tableLocation('reports')));

    expect(result).toMatchObject({ committed: true });
    expect(fake.updates).toHaveLength(1);
    expect(fake.table(DB, 'reports').VersionId).toBe('1');
  });

  it('sends the update again when the answer was lost before it applied, or it was throttled', async () => {
    const c = catalog();
    const base = await c.load('reports');
    fake.faults.push('lost-before', 'throttled');

    const result = await c.commit(base, metadataOf(c.tableLocation('reports')));

    expect(result).toMatchObject({ committed: true });
    expect(fake.updates).toHaveLength(3);
    expect(fake.table(DB, 'reports').Parameters?.metadata_location).toBe(
      result.committed ? result.metadataLocation : undefined,
    );
  });

  it('gives up with a retryable error naming the table when no update ever answers', async () => {
    const c = catalog({ maxAttempts: 2 });
    const base = await c.load('reports');
    fake.faults.push('lost-before', 'lost-before');

    const error = await c.commit(base, metadataOf(c.tableLocation('reports'))).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ExporterError);
    expect((error as ExporterError).retryable).toBe(true);
    expect((error as Error).message).toContain('exporter.reports');
    expect(fake.updates).toHaveLength(2);
  });

  it('is told to rebase when the pointer moved after its answer was lost', async () => {
    const c = catalog();
    const base = await c.load('reports');
    fake.setParameters(DB, 'reports', { table_type: 'ICEBERG', metadata_location: `${root}/other.json` });
    fake.faults.push('lost-before');

    expect(await c.commit(base, metadataOf(c.tableLocation('reports')))).toEqual({ committed: false });
  });

  it('keeps a 64-bit snapshot id exact through commit and load', async () => {
    const c = catalog();
    const id = 9_223_372_036_854_775_807n;
    const result = await c.commit(await c.load('reports'), metadataOf(c.tableLocation('reports'), id));

    const loaded = await c.load('reports');

    expect(loaded.metadata?.['current-snapshot-id']).toBe(id);
    expect(loaded.metadata?.snapshots?.[0]?.['snapshot-id']).toBe(id);
    const key = (result.committed ? result.metadataLocation : '').slice(storage.location.length + 1);
    const text = new TextDecoder().decode((await storage.get(key))?.body);
    expect(text).toContain('"current-snapshot-id":9223372036854775807');
  });

  it('refuses metadata outside the output root, naming both', async () => {
    fake.setParameters(DB, 'reports', {
      table_type: 'ICEBERG',
      metadata_location: 's3://elsewhere/iceberg/reports/metadata/00003-x.metadata.json',
    });

    const error = await catalog()
      .load('reports')
      .catch((e: unknown) => e);

    expect((error as Error).message).toContain(
      's3://elsewhere/iceberg/reports/metadata/00003-x.metadata.json',
    );
    expect((error as Error).message).toContain(storage.location);
  });

  it('says which table is missing from Glue', async () => {
    const error = await catalog()
      .load('sections')
      .catch((e: unknown) => e);
    expect((error as Error).message).toContain('exporter.sections');
  });

  it('reads the version of the metadata file names engines write', () => {
    expect(versionOf('s3://b/t/metadata/00041-6f2c.metadata.json')).toBe(41);
    expect(versionOf('/out/t/metadata/v7.metadata.json')).toBe(7);
    expect(versionOf(undefined)).toBe(-1);
  });
});
