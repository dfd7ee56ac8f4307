/**
 * A current table's deletions survive a closing cut short: the run that drops a job commits
 * reports_current, then dies before sections_current; the next run closes it, and
 * sections_current loses the job too, computed from its own rows (reports_current no longer
 * holds the job by then). The next run's own listing fails, so only the recovery can delete.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runExport } from '../../../shared/export/run/local-run.js';
import type { CatalogTable } from '../../../shared/iceberg/catalog.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { ICEBERG_ROOT } from '../../../shared/layout.js';
import { tempDir } from '../../helpers/export.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { runAgainst, scriptedApi, scriptedDeps } from '../../helpers/scripted-api.js';
import { listPage } from '../../unit/api/fixtures.js';

/** The file catalog, except that the first commit to `table` fails as a process killed there would. */
class DiesOnce extends FileCatalog {
  died = false;
  constructor(
    storage: FileCatalog['storage'],
    private readonly table: string,
  ) {
    super(storage);
  }
  override async commit(base: CatalogTable, metadata: TableMetadata) {
    if (!this.died && metadata.location.endsWith(`/${this.table}`)) {
      this.died = true;
      throw new Error(`killed before committing ${this.table}`);
    }
    return super.commit(base, metadata);
  }
}

const jobsOf = async (out: string, table: string) =>
  [...new Set((await readIcebergTable(join(out, ICEBERG_ROOT, table))).map((r) => Number(r.job_id)))].sort();

describe('Iceberg current tables, a closing cut short', () => {
  it('drops a job no longer listed from every current table once the next run closes the run', async () => {
    let listing: 'both' | 'one' | 'fails' = 'both';
    const server = await scriptedApi({
      jobs: (_campaign, page) =>
        listing === 'fails'
          ? { body: listPage([{ id: 11, job_status: 2 }], page + 1, page + 1) }
          : {
              body: listPage(
                (listing === 'both' ? [11, 12] : [11]).map((id) => ({ id, job_status: 2 })),
                1,
                1,
              ),
            },
    });
    const out = await tempDir('current-deletions');
    await runAgainst(server, { out, run: { tableFormat: 'iceberg' } });
    expect(await jobsOf(out, 'sections_current')).toEqual([11, 12]);

    listing = 'one';
    const deps = scriptedDeps(server, out);
    const catalog = new DiesOnce(deps.storage, 'sections_current');
    await expect(
      runExport({ ...deps, catalog }, { mode: 'incremental', tableFormat: 'iceberg' }),
    ).rejects.toThrow(/killed before committing sections_current/);
    expect(catalog.died).toBe(true);
    expect(await jobsOf(out, 'reports_current')).toEqual([11]);
    expect(await jobsOf(out, 'sections_current')).toEqual([11, 12]);

    listing = 'fails';
    await new Promise((resolve) => setTimeout(resolve, 1005 - (Date.now() % 1000)));
    const { manifest } = await runAgainst(server, { out, run: { tableFormat: 'iceberg' } });
    expect(manifest.unlisted_campaigns).toEqual([1]);
    expect(await jobsOf(out, 'reports_current')).toEqual([11]);
    expect(await jobsOf(out, 'sections_current')).toEqual([11]);
  });
});
