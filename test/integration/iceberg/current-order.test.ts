/**
 * The current tables supersede in run order, not commit order: run A dies while committing
 * `reports_current`, the next run B's recovery of A fails as well, and B commits; only then is
 * A's closing taken up. A's late commit must neither put A's report of a job B exported back
 * into `reports_current` (nor delete B's row), nor bring back a job B's complete listing left
 * out: the same rows as the `*_latest` views, which pick each job's newest run by run id.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runExport } from '../../../shared/export/run/local-run.js';
import { recoverOpenRuns } from '../../../shared/export/run/recover.js';
import { REPORT_TABLES } from '../../../shared/export/tables.js';
import { currentTableOf } from '../../../shared/iceberg/schema.js';
import { ICEBERG_ROOT } from '../../../shared/layout.js';
import { tempDir } from '../../helpers/export.js';
import { HoldsOneRun, nextSecond } from '../../helpers/holds-one-run.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { scriptedApi, scriptedDeps } from '../../helpers/scripted-api.js';
import { listPage } from '../../unit/api/fixtures.js';

/** job id → run id of each row of a table. */
const runsOf = async (out: string, table: string) =>
  Object.fromEntries(
    [
      ...new Set(
        (await readIcebergTable(join(out, ICEBERG_ROOT, table))).map((r) => `${r.job_id}=${r.run_id}`),
      ),
    ]
      .sort()
      .map((pair) => pair.split('=')),
  );

describe('Iceberg current tables in run order', () => {
  it("keeps a newer run's rows and deletions when an older run's closing commits after it", async () => {
    let listed = [11, 12];
    const server = await scriptedApi({
      jobs: () => ({
        body: listPage(
          listed.map((id) => ({ id, job_status: 2 })),
          1,
          1,
        ),
      }),
    });
    const out = await tempDir('current-order');
    const deps = scriptedDeps(server, out);
    const catalog = new HoldsOneRun(deps.storage);

    // A exports 11 and 12 and dies at reports_current.
    await expect(runExport({ ...deps, catalog }, { mode: 'full', tableFormat: 'iceberg' })).rejects.toThrow(
      /killed before committing reports_current/,
    );
    const a = catalog.run!;
    // B lists 11 only (12 is gone), cannot close A, and exports 11 (A never recorded it).
    listed = [11];
    await nextSecond();
    const b = await runExport({ ...deps, catalog }, { mode: 'incremental', tableFormat: 'iceberg' });
    expect(b.run_id > a).toBe(true);
    expect(b.counts.reports_exported).toBe(1);
    expect(await runsOf(out, 'reports_current')).toEqual({ '11': b.run_id });

    // A's closing, taken up late, commits after B.
    catalog.held = false;
    await recoverOpenRuns({ ...deps, catalog }, { by: 'test' });
    const history = await runsOf(out, 'reports');
    expect(Object.keys(history).length).toBeGreaterThan(0);
    expect((await readIcebergTable(join(out, ICEBERG_ROOT, 'reports'))).some((r) => r.run_id === a)).toBe(
      true,
    );

    // The latest views' answer: 11 from B (the newest run that exported it); 12 deleted by B's
    // complete listing, newer than A's report.
    for (const table of REPORT_TABLES) {
      const rows = await runsOf(out, currentTableOf(table));
      for (const [job, run] of Object.entries(rows))
        expect({ table, job, run }).toEqual({ table, job: '11', run: b.run_id });
    }
    expect(await runsOf(out, 'reports_current')).toEqual({ '11': b.run_id });
  });
});
