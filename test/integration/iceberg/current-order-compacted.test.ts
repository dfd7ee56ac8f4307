/**
 * A late commit's newer runs, read back after another engine compacted the history tables: run
 * A dies while committing `reports_current`, the next run B exports a job of A's and commits,
 * then `OPTIMIZE reports REWRITE DATA` (Athena, Spark) rewrites the `reports` table's live rows
 * into one file of several runs and marks B's own data file DELETED; only then is A's closing
 * taken up. B's rule must still hold the job it exported (its rows are in the compacted file,
 * told by their `run_id`), so that A's late commit keeps A's report of it out of the current
 * tables: the `*_latest` views read the history table's rows whoever wrote the file.
 * (Found by the simulation, seed 132 on the s32-services branch: six `*_current` tables kept an
 * older run's rows of a job a newer partial CLI run had exported.)
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runExport } from '../../../shared/export/run/local-run.js';
import { recoverOpenRuns } from '../../../shared/export/run/recover.js';
import { REPORT_TABLES } from '../../../shared/export/tables.js';
import { currentTableOf } from '../../../shared/iceberg/schema.js';
import { ICEBERG_ROOT, STATE_KEYS } from '../../../shared/layout.js';
import { tempDir } from '../../helpers/export.js';
import { HoldsOneRun, nextSecond } from '../../helpers/holds-one-run.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { scriptedApi, scriptedDeps } from '../../helpers/scripted-api.js';
import { OtherEngine } from '../../sim/other-engine.js';
import { Prng } from '../../sim/prng.js';
import { listPage } from '../../unit/api/fixtures.js';

/** The distinct `job=run` pairs of a table's live rows, sorted. */
const pairsOf = async (out: string, table: string) =>
  [
    ...new Set(
      (await readIcebergTable(join(out, ICEBERG_ROOT, table))).map((r) => `${r.job_id}=${r.run_id}`),
    ),
  ].sort();

describe('Iceberg current tables in run order, the history tables compacted by another engine', () => {
  it("keeps an older run's late rows out for a job a newer run exported, its file compacted away", async () => {
    const server = await scriptedApi({
      jobs: () => ({ body: listPage([{ id: 11, job_status: 2 }], 1, 1) }),
    });
    const out = await tempDir('current-order-compacted');
    const deps = scriptedDeps(server, out);
    const catalog = new HoldsOneRun(deps.storage);

    // A exports 11 and dies at reports_current; B cannot close A, and exports 11 again.
    await expect(runExport({ ...deps, catalog }, { mode: 'full', tableFormat: 'iceberg' })).rejects.toThrow(
      /killed before committing reports_current/,
    );
    const a = catalog.run!;
    await nextSecond();
    const b = await runExport({ ...deps, catalog }, { mode: 'incremental', tableFormat: 'iceberg' });
    expect(b.run_id > a).toBe(true);
    expect(b.counts.reports_exported).toBe(1);

    // OPTIMIZE reports REWRITE DATA: one file holding A's and B's rows, B's own file DELETED.
    const engine = new OtherEngine();
    await engine.act({ rng: new Prng(1) }, deps.storage, ['reports'], Date.now, 1);
    expect(engine.cases.compactions).toBe(1);
    expect(await pairsOf(out, 'reports')).toEqual([`11=${a}`, `11=${b.run_id}`]);

    // A's closing, taken up late, commits after B.
    catalog.held = false;
    await recoverOpenRuns({ ...deps, catalog }, { by: 'test' });
    expect(await deps.storage.get(STATE_KEYS.closed(a))).toBeDefined();

    // The latest views' answer: 11 from B only, in every current table that holds rows.
    for (const table of REPORT_TABLES) {
      for (const pair of await pairsOf(out, currentTableOf(table)))
        expect({ table, pair }).toEqual({ table, pair: `11=${b.run_id}` });
    }
    expect(await pairsOf(out, 'reports_current')).toEqual([`11=${b.run_id}`]);
  });
});
