/**
 * The current tables after three real exports (a full run, then two incremental runs after
 * overlapping sets of jobs changed in the simulator): icebird reads each current table, and it
 * holds exactly the history table's rows of each job's newest run.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { REPORT_TABLES } from '../../../shared/export/tables.js';
import { currentTableOf } from '../../../shared/iceberg/schema.js';
import { ICEBERG_ROOT } from '../../../shared/layout.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { readIcebergTable, rowKey } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const key = rowKey;

describe('Iceberg current tables over three exports', () => {
  let simulator: Simulator;
  let out: string;
  const runs: Manifest[] = [];

  beforeAll(async () => {
    simulator = await startSimulator({ seed: 5, campaigns: 2, jobsPerCampaign: 20, reportSize: 'mixed' });
    out = await tempDir('iceberg-current');
    const target = exporter(simulator, out);
    runs.push(await target.run({ mode: 'full', tableFormat: 'iceberg' }));
    const published = simulator.dataset.campaigns
      .flatMap((c) => c.jobs)
      .filter((j) => j.state === 'published' && !j.invalid && !j.forbidden)
      .map((j) => j.id);
    for (const id of published.slice(0, 8)) simulator.dataset.touch(id);
    runs.push(await target.run({ tableFormat: 'iceberg' }));
    for (const id of published.slice(4, 12)) simulator.dataset.touch(id);
    runs.push(await target.run({ tableFormat: 'iceberg' }));
  }, 120_000);

  afterAll(async () => {
    await simulator?.close();
  });

  it('exports overlapping job sets, each run naming every current table', () => {
    expect(runs.map((r) => r.counts.reports_exported)).toEqual([runs[0]!.counts.reports_exported, 8, 8]);
    for (const run of runs) {
      for (const table of REPORT_TABLES) expect(run.iceberg?.tables[currentTableOf(table)]).toBeDefined();
    }
  });

  it.each(REPORT_TABLES)('%s_current holds the rows of each job’s newest run', async (table) => {
    // Newest by run id, as the *_latest views and the current tables order runs (issue 28), which
    // is the order the runs ran in, one second apart or not (issue 32: ids order by start).
    const order = runs.map((r) => r.run_id);
    expect([...order].sort()).toEqual(order);
    const reports = await readIcebergTable(join(out, ICEBERG_ROOT, 'reports'));
    const newest = new Map<string, string>();
    for (const r of reports) {
      const job = String(r.job_id);
      const seen = newest.get(job);
      if (seen === undefined || order.indexOf(String(r.run_id)) > order.indexOf(seen))
        newest.set(job, String(r.run_id));
    }
    const history = await readIcebergTable(join(out, ICEBERG_ROOT, table));
    const want = history.filter((r) => newest.get(String(r.job_id)) === r.run_id).map((r) => key(table, r));
    const current = await readIcebergTable(join(out, ICEBERG_ROOT, currentTableOf(table)));
    expect(current.map((r) => key(table, r)).sort()).toEqual(want.sort());
    if (table === 'reports') expect(current).toHaveLength(newest.size);
  });
});
