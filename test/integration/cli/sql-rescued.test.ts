/**
 * `_rescued` in a Hive output: a real export by a `freeze` run (no file has the column), then a
 * later `evolve` run's reports file (written through the run's TableBuffer: the evolve row
 * builder is not in this branch) and its manifest. hyparquet and DuckDB read the files as
 * written; the sql command's views read `_rescued` as NULL where no file has it, and from the
 * new file where one does, `*_latest` included.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { zstdDecompressSync } from 'node:zlib';
import { parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeSql } from '../../../functions/cli/sql.js';
import { TableBuffer } from '../../../shared/export/format/table-buffer.js';
import { encodeManifest, type Manifest } from '../../../shared/export/state/manifest.js';
import { RESCUED_COLUMN, type Row } from '../../../shared/export/tables.js';
import { manifestKey, parquetKey, tablePrefix } from '../../../shared/layout.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const EVOLVE_RUN = '20991231T000000Z-e0e0e0';
const EVOLVE_DT = '2099-12-31';
const RESCUED = JSON.stringify({ job: { priority: 'high' } });

const ZSTD = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };
const hyparquet = async (path: string) => {
  const bytes = await readFile(path);
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return parquetReadObjects({ file, compressors: ZSTD });
};

/** The Parquet files of `table` in `out`, by partition. */
async function parquetFiles(out: string, table: 'reports'): Promise<string[]> {
  const root = join(out, tablePrefix(table));
  const files: string[] = [];
  for (const dt of (await readdir(root)).sort())
    for (const f of (await readdir(join(root, dt))).sort()) files.push(join(root, dt, f));
  return files;
}

describe('the sql command over a Hive output', () => {
  let simulator: Simulator;
  let frozenOut: string;
  let mixedOut: string;
  let first: Manifest;
  let jobId: number;
  let db: DuckDb;

  beforeAll(async () => {
    simulator = await startSimulator({ seed: 5, campaigns: 2, jobsPerCampaign: 6, reportSize: 'tiny' });
    frozenOut = await tempDir('sql-frozen');
    mixedOut = await tempDir('sql-mixed');
    await exporter(simulator, frozenOut).run({ dt: '2026-11-22', mode: 'full' });
    const target = exporter(simulator, mixedOut);
    first = await target.run({ dt: '2026-11-22', mode: 'full' });
    // A later evolve run exports one job's report again, with a rescued value.
    const [old] = await hyparquet((await parquetFiles(mixedOut, 'reports'))[0]!);
    jobId = Number(old!.job_id);
    const buffer = new TableBuffer({ schema_contract: 'evolve', dt: EVOLVE_DT });
    buffer.add('reports', {
      ...(Object.fromEntries(
        Object.entries(old!).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v]),
      ) as Row),
      run_id: EVOLVE_RUN,
      job_status: null,
      [RESCUED_COLUMN]: RESCUED,
    });
    const bytes = buffer.encode('reports');
    const key = parquetKey('reports', EVOLVE_DT, `${EVOLVE_RUN}-0`);
    await target.deps.storage.put(key, bytes);
    const manifest: Manifest = {
      ...first,
      run_id: EVOLVE_RUN,
      dt: EVOLVE_DT,
      mode: 'incremental',
      schema_contract: 'evolve',
      files: [{ key, table_or_entity: 'reports', format: 'parquet', rows: 1, bytes: bytes.length }],
    };
    await target.deps.storage.put(manifestKey(EVOLVE_DT, EVOLVE_RUN), encodeManifest(manifest));
    db = await openDuckDb();
  }, 120_000);

  afterAll(async () => {
    await db?.close();
    await simulator?.close();
  });

  it('hyparquet reads the files as written: _rescued only in the evolve file', async () => {
    const [frozen, evolved] = await parquetFiles(mixedOut, 'reports');
    const frozenRows = await hyparquet(frozen!);
    expect(frozenRows.length).toBe(first.counts.reports_exported);
    expect(frozenRows.every((r) => !(RESCUED_COLUMN in r))).toBe(true);
    const evolvedRows = await hyparquet(evolved!);
    expect(evolvedRows).toHaveLength(1);
    expect(evolvedRows[0]).toMatchObject({ [RESCUED_COLUMN]: RESCUED, job_status: null, run_id: EVOLVE_RUN });
  });

  it('DuckDB reads both files by name: _rescued NULL in the old rows, set in the new one', async () => {
    const glob = join(mixedOut, tablePrefix('reports'), 'dt=*', '*.parquet');
    const rows = await db.all(
      `SELECT run_id, ${RESCUED_COLUMN} AS rescued FROM read_parquet('${glob}', union_by_name = true)`,
    );
    expect(rows.filter((r) => r.rescued !== null)).toEqual([{ run_id: EVOLVE_RUN, rescued: RESCUED }]);
    expect(rows.filter((r) => r.rescued === null)).toHaveLength(first.counts.reports_exported);
  });

  it('a freeze-only output: _rescued reads as NULL (VARCHAR) in every table and *_latest view', async () => {
    const lake = await openLakeSql(frozenOut);
    try {
      for (const view of ['reports', 'questions', 'reports_latest', 'media_images_latest']) {
        const result = await lake.query(`SELECT count(*), count(${RESCUED_COLUMN}) FROM ${view}`);
        expect(Number(result.rows[0]![1]), view).toBe(0);
      }
      const reports = await lake.query('SELECT count(*) FROM reports');
      expect(Number(reports.rows[0]![0])).toBe(first.counts.reports_exported);
      const types = await lake.query(
        `SELECT data_type FROM information_schema.columns WHERE table_name = 'reports_latest' AND column_name = '${RESCUED_COLUMN}'`,
      );
      expect(types.rows).toEqual([['VARCHAR']]);
    } finally {
      lake.close();
    }
  });

  it('a mixed output: reports_latest shows the evolve row’s _rescued, queryable as JSON', async () => {
    const lake = await openLakeSql(mixedOut);
    try {
      const latest = await lake.query(
        `SELECT job_id, run_id, _rescued->>'$.job.priority', json_extract_string(_rescued, '$.job.priority')
         FROM reports_latest WHERE _rescued IS NOT NULL`,
      );
      expect(latest.rows.map((r) => r.map(String))).toEqual([[String(jobId), EVOLVE_RUN, 'high', 'high']]);
      const count = await lake.query('SELECT count(*) FROM reports_latest');
      expect(Number(count.rows[0]![0])).toBe(first.counts.reports_exported);
    } finally {
      lake.close();
    }
  });
});
