/**
 * `_rescued` in an Iceberg output: a real export by a `freeze` run (today's schemas, schema id 0,
 * as the fixture of a release before the schema contract), then an `evolve` run's commit
 * (commitIcebergRun, its rows written through the run's TableBuffer: the evolve row builder is
 * not in this branch) to the history and `_current` tables. icebird and the sql command read
 * old rows with `_rescued` NULL and the new ones with it set.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeSql } from '../../../functions/cli/sql.js';
import { TableBuffer } from '../../../shared/export/format/table-buffer.js';
import { commitIcebergRun } from '../../../shared/export/run/commit-iceberg.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import type { FileEntry } from '../../../shared/export/state/records.js';
import { REPORT_TABLES, type Row } from '../../../shared/export/tables.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { ICEBERG_TABLE_NAMES } from '../../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { icebergDataKey } from '../../../shared/layout.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const FIXTURE = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../fixtures/iceberg/frozen-schemas.json'), 'utf8'),
) as Record<string, { schemas: unknown[]; 'last-column-id': number }>;

const EVOLVE_RUN = '20991231T000000Z-e0e0e0';
const EVOLVE_DT = '2099-12-31';
const RESCUED = JSON.stringify({ job: { priority: 'high' }, location: { region: 7 } });

const metadataOf = async (out: string, table: string, version: number): Promise<TableMetadata> =>
  JSON.parse(await readFile(join(out, 'iceberg', table, 'metadata', `v${version}.metadata.json`), 'utf8'));

describe('an Iceberg output that a freeze run wrote and an evolve run then commits to', () => {
  let simulator: Simulator;
  let out: string;
  let first: Manifest;
  let job: Row;

  beforeAll(async () => {
    simulator = await startSimulator({ seed: 5, campaigns: 2, jobsPerCampaign: 6, reportSize: 'tiny' });
    out = await tempDir('iceberg-rescued');
    const target = exporter(simulator, out);
    first = await target.run({ dt: '2026-11-22', mode: 'full', tableFormat: 'iceberg' });
    // The evolve run: one job's report again, its reports row with a rescued value and a NULL
    // where the frozen table requires a value; no other table gets a file.
    const [reportRow] = await readIcebergTable(join(out, 'iceberg', 'reports'));
    // icebird gives longs as bigint; the encoder takes numbers.
    job = Object.fromEntries(
      Object.entries(reportRow!).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v]),
    ) as Row;
    const buffer = new TableBuffer({ table_format: 'iceberg', schema_contract: 'evolve', dt: EVOLVE_DT });
    const row: Row = { ...job, run_id: EVOLVE_RUN, job_status: null, _rescued: RESCUED };
    delete row.dt;
    buffer.add('reports', row);
    const bytes = buffer.encode('reports');
    const key = icebergDataKey('reports', EVOLVE_DT, `${EVOLVE_RUN}-0`);
    await target.deps.storage.put(key, bytes);
    const files: FileEntry[] = [
      { key, table_or_entity: 'reports', format: 'parquet', rows: 1, bytes: bytes.length },
    ];
    const manifest = {
      ...first,
      run_id: EVOLVE_RUN,
      dt: EVOLVE_DT,
      mode: 'incremental' as const,
      schema_contract: 'evolve' as const,
    };
    await commitIcebergRun(target.deps, manifest, files, new Map());
  }, 120_000);

  afterAll(async () => {
    await simulator?.close();
  });

  it("freeze: every table's first metadata has today's schema, schema id 0", async () => {
    expect(first.schema_contract).toBeUndefined();
    for (const table of ICEBERG_TABLE_NAMES) {
      const metadata = await metadataOf(out, table, 1);
      expect(metadata['current-schema-id'], table).toBe(0);
      expect(metadata.schemas, table).toEqual(FIXTURE[table]!.schemas);
      expect(metadata['last-column-id'], table).toBe(FIXTURE[table]!['last-column-id']);
    }
  });

  it('evolve: the tables it commits to gain schema 1 with _rescued; history tables it did not write keep theirs', async () => {
    const catalog = new FileCatalog(new LocalStorage(out));
    for (const table of ['reports', 'reports_current']) {
      const { metadata } = await catalog.load(table);
      expect(metadata!['current-schema-id'], table).toBe(1);
      expect(metadata!.schemas.map((s) => s['schema-id'])).toEqual([0, 1]);
      expect(metadata!.schemas[1]!.fields.find((f) => f.name === '_rescued')).toMatchObject({
        id: 19,
        required: false,
      });
    }
    for (const table of REPORT_TABLES.filter((t) => t !== 'reports')) {
      const { metadata } = await catalog.load(table);
      expect(metadata!['current-schema-id'], table).toBe(0);
    }
    // A current table the run only removes the job's old rows from evolves too: the run commits to it.
    const { metadata } = await catalog.load('sections_current');
    expect(metadata!.snapshots!.at(-1)!.summary.operation).toBe('overwrite');
    expect(metadata!['current-schema-id']).toBe(1);
  });

  it('icebird reads the history table: old rows without _rescued, the new row with it', async () => {
    const rows = await readIcebergTable(join(out, 'iceberg', 'reports'));
    const evolved = rows.filter((r) => r.run_id === EVOLVE_RUN);
    expect(evolved).toHaveLength(1);
    expect(evolved[0]).toMatchObject({ _rescued: RESCUED, job_status: null });
    expect(Number(evolved[0]!.job_id)).toBe(job.job_id);
    const old = rows.filter((r) => r.run_id === first.run_id);
    expect(old.length).toBe(first.counts.reports_exported);
    expect(old.every((r) => 'job_status' in r && (r._rescued ?? null) === null)).toBe(true);
  });

  it('icebird reads reports_current: the job’s old row superseded by the evolve row, the others kept', async () => {
    const rows = await readIcebergTable(join(out, 'iceberg', 'reports_current'));
    const ofJob = rows.filter((r) => Number(r.job_id) === job.job_id);
    expect(ofJob).toHaveLength(1);
    expect(ofJob[0]).toMatchObject({ run_id: EVOLVE_RUN, _rescued: RESCUED });
    expect(rows).toHaveLength(first.counts.reports_exported);
  });

  it('the sql command reads _rescued from mixed files, and from tables whose files all lack it', async () => {
    const lake = await openLakeSql(out);
    try {
      const mixed = await lake.query(
        `SELECT count(*) AS n, count(_rescued) AS rescued, max(_rescued->>'$.job.priority') AS priority,
                max(json_extract_string(_rescued, '$.location.region')) AS region
         FROM reports_current`,
      );
      expect(mixed.rows[0]!.map(String)).toEqual([String(first.counts.reports_exported), '1', 'high', '7']);
      const history = await lake.query(
        'SELECT run_id, job_status, _rescued FROM reports WHERE _rescued IS NOT NULL',
      );
      expect(history.rows).toEqual([[EVOLVE_RUN, null, RESCUED]]);
      const none = await lake.query('SELECT count(*), count(_rescued) FROM sections_current');
      expect(Number(none.rows[0]![0])).toBeGreaterThan(0);
      expect(Number(none.rows[0]![1])).toBe(0);
      const types = await lake.query(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'sections' AND column_name = '_rescued'",
      );
      expect(types.rows).toEqual([['VARCHAR']]);
    } finally {
      lake.close();
    }
  });
});
