/** The CLI's catalog: the output's own, never another; each refusal one line naming the setting. */
import { describe, expect, it } from 'vitest';
import { cliCatalog } from '../../../functions/cli/catalog.js';
import { parseCli } from '../../../functions/cli/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { tempDir } from '../../helpers/export.js';

async function output(files: Record<string, string>): Promise<LocalStorage> {
  const storage = new LocalStorage(await tempDir('cli-catalog'));
  for (const [key, body] of Object.entries(files)) await storage.put(key, body);
  return storage;
}

const FILE_OUTPUT = {
  [STATE_KEYS.tableFormat]: JSON.stringify({
    table_format: 'iceberg',
    run_id: 'r1',
    catalog: { kind: 'file' },
  }),
  'iceberg/reports/metadata/v1.metadata.json': '{}',
};

describe("the CLI's catalog", () => {
  it('is the file catalog for an output of its own, or a new one', async () => {
    expect(await cliCatalog(await output(FILE_OUTPUT), { tableFormat: 'iceberg' })).toBeUndefined();
    expect(await cliCatalog(await output({}), { tableFormat: 'iceberg' })).toBeUndefined();
  });

  it('refuses --glue-database for an output not registered in Glue, and for a Hive run', async () => {
    await expect(
      cliCatalog(await output(FILE_OUTPUT), { tableFormat: 'iceberg', glueDatabase: 'db' }),
    ).rejects.toThrow(
      /^--glue-database: .* holds no Iceberg tables registered in Glue \(its tables are in the file catalog\)/,
    );
    await expect(
      cliCatalog(await output({}), { tableFormat: 'hive', glueRegion: 'eu-west-1' }),
    ).rejects.toThrow(/^--glue-region applies to Iceberg runs only/);
  });

  it('names the region when the database is given and the output records neither', async () => {
    const storage = await output({ 'iceberg/reports/metadata/00000-a1.metadata.json': '{}' });
    const refused = cliCatalog(storage, { tableFormat: 'iceberg', glueDatabase: 'db' });
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(/does not record its region yet: pass --glue-region <its region>/);
  });

  it('reads --glue-database and --glue-region', () => {
    const config = parseCli(
      ['--out', 's3://b/p', '--glue-database', ' exporter_prod ', '--glue-region', 'eu-west-1'],
      { INTEGRATION_API_BASE_URL: 'https://api.example.com', INTEGRATION_API_KEY: 'k' },
    );
    expect(config).toMatchObject({ glueDatabase: 'exporter_prod', glueRegion: 'eu-west-1' });
    expect(() =>
      parseCli(['--out', 's3://b/p', '--glue-database', ''], {
        INTEGRATION_API_BASE_URL: 'https://api.example.com',
        INTEGRATION_API_KEY: 'k',
      }),
    ).toThrow(/--glue-database takes the name of a Glue database/);
  });
});
