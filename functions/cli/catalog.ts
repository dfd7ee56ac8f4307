/**
 * The catalog a CLI Iceberg run commits to: the one its output is registered in. An output
 * registered in Glue (a stack's bucket) is committed to Glue, with the database and region the
 * output records (state/table-format.json), --glue-database and --glue-region over them; any
 * other output to the file catalog. Settled, and Glue reached once, before the run starts: a
 * missing setting is one line naming it, never a failure at the commit.
 */
import { ConfigError, describeError } from '../../shared/errors.js';
import { registeredCatalog } from '../../shared/export/state/table-format.js';
import type { IcebergCatalog } from '../../shared/iceberg/catalog.js';
import type { TableFormat } from '../../shared/layout.js';
import type { Storage } from '../../shared/storage/storage.js';

export interface CatalogOptions {
  tableFormat: TableFormat;
  glueDatabase?: string | undefined;
  glueRegion?: string | undefined;
}

/** What a run needs of Glue, said when it cannot use it. */
const RUN_NEEDS =
  'the run needs glue:GetTable and glue:UpdateTable on its tables (--glue-database, --glue-region to name another)';

/** The table checked to prove Glue answers with the settings: every output's first. */
const PROBE_TABLE = 'reports';

/** The Glue catalog of `storage`'s output, or undefined for the file catalog (the run's default). */
export async function cliCatalog(
  storage: Storage,
  options: CatalogOptions,
): Promise<IcebergCatalog | undefined> {
  const flag =
    options.glueDatabase !== undefined
      ? '--glue-database'
      : options.glueRegion !== undefined
        ? '--glue-region'
        : undefined;
  if (options.tableFormat !== 'iceberg') {
    if (flag) throw new ConfigError(`${flag} applies to Iceberg runs only (--table-format iceberg)`);
    return undefined;
  }
  const registered = await registeredCatalog(storage);
  if (registered?.kind !== 'glue') {
    if (flag) {
      throw new ConfigError(
        `${flag}: ${storage.location} holds no Iceberg tables registered in Glue (${registered ? 'its tables are in the file catalog' : 'none yet'}), and a run commits to the catalog its output is registered in`,
      );
    }
    return undefined;
  }
  const database = options.glueDatabase ?? registered.database;
  const region = options.glueRegion ?? registered.region;
  if (database === undefined || region === undefined) {
    throw new ConfigError(
      `${storage.location} holds Iceberg tables registered in Glue and does not record ${database === undefined ? 'their database' : 'its region'} yet: ` +
        `pass ${database === undefined ? "--glue-database <the stack's database> and --glue-region <its region>" : '--glue-region <its region>'}, or let the stack run once (its runs record them)`,
    );
  }
  return openGlue(storage, database, region, RUN_NEEDS);
}

/**
 * The catalog a reader of `storage`'s Iceberg tables (the `sql` command) reads their current
 * metadata from: Glue for an output registered in it, or undefined for the file catalog.
 */
export async function readerCatalog(storage: Storage): Promise<IcebergCatalog | undefined> {
  const registered = await registeredCatalog(storage);
  if (registered?.kind !== 'glue') return undefined;
  if (registered.database === undefined) {
    throw new ConfigError(
      `${storage.location} holds Iceberg tables registered in Glue and does not record their database yet: ` +
        'let the stack run once (its runs record it), or query them in Athena',
    );
  }
  return openGlue(
    storage,
    registered.database,
    registered.region,
    'reading needs glue:GetTable on its tables',
  );
}

/** The Glue catalog of `storage`'s output, its credentials and one table checked. */
async function openGlue(
  storage: Storage,
  database: string,
  region: string,
  needs: string,
): Promise<IcebergCatalog> {
  const [{ GlueClient }, { GlueCatalog }] = await Promise.all([
    import('@aws-sdk/client-glue'),
    import('../../shared/iceberg/glue-catalog.js'),
  ]);
  const client = new GlueClient({ region });
  const where = `the Glue database ${database} (${region}) that ${storage.location} is registered in`;
  try {
    await client.config.credentials();
  } catch (cause) {
    throw new ConfigError(
      `no AWS credentials for ${where}: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`,
      { cause },
    );
  }
  const catalog = new GlueCatalog({ client, databaseName: database, storage });
  try {
    await catalog.load(PROBE_TABLE);
  } catch (cause) {
    throw new ConfigError(`cannot use ${where}: ${describeError(cause)}`, { hint: needs, cause });
  }
  return catalog;
}
