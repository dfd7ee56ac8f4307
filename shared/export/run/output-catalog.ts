/**
 * One table, one catalog: every writer of an output commits its Iceberg tables to the catalog
 * the output is registered in (`registeredCatalog`). Checked at the start of each Iceberg
 * commit, under the run's lock:
 * - a run with the file catalog (the CLI, the demo, a folder) into an output registered in Glue
 *   is refused: its snapshots would be in files no Glue reader (Athena) looks at, and its jobs
 *   recorded as exported all the same;
 * - a run with Glue (the stack's) into an output the file catalog holds takes the tables over:
 *   each table that has snapshots in the file catalog and none in Glue is registered in Glue
 *   (its current metadata becomes the Glue table's, as Iceberg's `register_table` does), so
 *   the history the CLI wrote stays whole and readable in Athena; the run then commits on it and
 *   records Glue, and later CLI runs commit to Glue.
 */
import { ConfigError } from '../../errors.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import { FileCatalog } from '../../iceberg/file-catalog.js';
import { ICEBERG_TABLE_NAMES } from '../../iceberg/schema.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { registeredCatalog } from '../state/table-format.js';

/** Swaps tried per table when another writer moves Glue's pointer during the take-over. */
const REGISTER_ATTEMPTS = 3;

/**
 * Throws when `catalog` is not the one the output's tables are registered in and cannot
 * become it; registers the file catalog's tables in Glue when a Glue run meets them.
 */
export async function claimOutputCatalog(storage: Storage, catalog: IcebergCatalog): Promise<void> {
  const registered = await registeredCatalog(storage);
  if (catalog.kind === 'file') {
    if (registered?.kind !== 'glue') return;
    const where = registered.database ? ` ${registered.database} (${registered.region})` : '';
    throw new ConfigError(
      `${storage.location} holds Iceberg tables registered in the Glue database${where}, and this run would ` +
        'commit them to the file catalog, where Athena never sees them',
      { hint: 'run the CLI of this release (it commits to Glue), or let the stack run' },
    );
  }
  // Recorded as Glue: nothing the file catalog holds is newer.
  if (registered?.kind === 'glue' && registered.database !== undefined) return;
  await registerFileTables(storage, catalog);
}

/**
 * Registers in `catalog` each table whose history is in the file catalog: it has snapshots
 * there and none in `catalog`, and the exporter's last commit to it (`state/iceberg/<table>.json`,
 * if any) was that file-catalog one, not a Glue one whose pointer a stack update lost (the
 * commit's own `adoptLostPointer` takes that case up).
 */
async function registerFileTables(storage: Storage, catalog: IcebergCatalog): Promise<void> {
  const files = new FileCatalog(storage);
  for (const table of ICEBERG_TABLE_NAMES) {
    const held = await files.load(table);
    if (!held.metadata?.snapshots?.length) continue;
    const pointer = await storage.get(STATE_KEYS.icebergPointer(table));
    if (pointer) {
      const { metadata_location } = JSON.parse(Buffer.from(pointer.body).toString('utf8')) as {
        metadata_location?: string;
      };
      if (metadata_location !== held.metadataLocation) continue;
    }
    for (let attempt = 1; attempt <= REGISTER_ATTEMPTS; attempt++) {
      const base = await catalog.load(table);
      if (base.metadata?.snapshots?.length) break;
      if ((await catalog.commit(base, held.metadata)).committed) break;
    }
  }
}
