/**
 * A run killed while it commits `reports_current`, for the tests of the current tables' run
 * order (test/integration/iceberg/current-order*.test.ts).
 */
import type { CatalogTable } from '../../shared/iceberg/catalog.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';

/**
 * The file catalog, except that every commit of one run to `reports_current` fails as a process
 * killed there would, while `held` is set: the first run that commits the table is that run.
 */
export class HoldsOneRun extends FileCatalog {
  held = true;
  run: string | undefined;
  override async commit(base: CatalogTable, metadata: TableMetadata) {
    if (this.held && metadata.location.endsWith('/reports_current')) {
      const snapshot = metadata.snapshots?.find((s) => s['snapshot-id'] === metadata['current-snapshot-id']);
      const run = snapshot?.summary['run-id'];
      this.run ??= run;
      if (run === this.run) throw new Error(`killed before committing reports_current for ${run}`);
    }
    return super.commit(base, metadata);
  }
}

/** Resolves just after the next whole second. */
export const nextSecond = () => new Promise((resolve) => setTimeout(resolve, 1005 - (Date.now() % 1000)));
