/** The catalog an output records beside its table format, and what an output without one tells. */
import { describe, expect, it } from 'vitest';
import { recordCatalog, registeredCatalog } from '../../../../shared/export/state/table-format.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const GLUE = { kind: 'glue', database: 'exporter_prod', region: 'eu-west-1' } as const;
const published = { status: 'succeeded', table_format: 'iceberg' } as const;

async function output(files: Record<string, string>): Promise<LocalStorage> {
  const storage = new LocalStorage(await tempDir('catalog-record'));
  for (const [key, body] of Object.entries(files)) await storage.put(key, body);
  return storage;
}

const record = async (storage: LocalStorage) =>
  JSON.parse(Buffer.from((await storage.get(STATE_KEYS.tableFormat))!.body).toString('utf8'));

describe('the catalog of an output', () => {
  it('is the recorded one', async () => {
    const storage = await output({
      [STATE_KEYS.tableFormat]: JSON.stringify({ table_format: 'iceberg', run_id: 'r1', catalog: GLUE }),
      'iceberg/reports/metadata/v1.metadata.json': '{}',
    });
    expect(await registeredCatalog(storage)).toEqual(GLUE);
  });

  it('without a record of it, is Glue (database unknown) when a metadata file has a catalog name', async () => {
    const storage = await output({
      [STATE_KEYS.tableFormat]: JSON.stringify({ table_format: 'iceberg', run_id: 'r1' }),
      'iceberg/jobs/metadata/v1.metadata.json': '{}',
      'iceberg/reports/metadata/00003-5f0c.metadata.json': '{}',
    });
    expect(await registeredCatalog(storage)).toEqual({ kind: 'glue' });
  });

  it('without a record of it, is the file catalog when only vN.metadata.json exist, none without Iceberg tables', async () => {
    const file = await output({
      'iceberg/jobs/metadata/v2.metadata.json': '{}',
      'iceberg/jobs/metadata/snap-1.avro': '',
    });
    expect(await registeredCatalog(file)).toEqual({ kind: 'file' });
    const hive = await output({
      [STATE_KEYS.tableFormat]: JSON.stringify({ table_format: 'hive', run_id: 'r1' }),
    });
    expect(await registeredCatalog(hive)).toBeUndefined();
  });

  it('is recorded by an Iceberg run that published, keeping the record as it was besides', async () => {
    const storage = await output({
      [STATE_KEYS.tableFormat]: JSON.stringify({ table_format: 'iceberg', run_id: 'r1', other: 1 }),
    });
    await recordCatalog(storage, { status: 'failed', table_format: 'iceberg' }, GLUE);
    expect((await record(storage)).catalog).toBeUndefined();
    await recordCatalog(storage, published, GLUE);
    expect(await record(storage)).toEqual({ table_format: 'iceberg', run_id: 'r1', other: 1, catalog: GLUE });
    await recordCatalog(storage, published, { kind: 'file' });
    expect((await record(storage)).catalog).toEqual({ kind: 'file' });
  });

  it('is not recorded beside a Hive format', async () => {
    const storage = await output({
      [STATE_KEYS.tableFormat]: JSON.stringify({ table_format: 'hive', run_id: 'r1' }),
    });
    await recordCatalog(storage, { status: 'succeeded', table_format: 'hive' }, { kind: 'file' });
    await recordCatalog(storage, published, GLUE);
    expect((await record(storage)).catalog).toBeUndefined();
  });
});
