/**
 * The lake as DuckDB reads it (`openLakeSql`): the `runs` view over the manifests, the
 * `*_latest` views from the SQL text the Glue catalog registers, the named queries, and an
 * empty output. The folder is built here, run by run, so each run's rows are known.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LakeSql, openLakeSql } from '../../../functions/cli/sql.js';
import { appendReportRows } from '../../../shared/export/format/flatten.js';
import { QUERIES } from '../../../shared/export/queries.js';
import type { DriftEntry } from '../../../shared/export/schema-drift.js';
import { type Manifest, ManifestSchema, type RunStatus } from '../../../shared/export/state/manifest.js';
import {
  REPORT_TABLES,
  type ReportTableName,
  type Row,
  TABLE_NAMES,
  TABLES,
  type TableName,
} from '../../../shared/export/tables.js';
import {
  duckdbType,
  LATEST_VIEWS,
  latestViewName,
  RUNS_VIEW_COLUMNS,
  tableColumns,
} from '../../../shared/export/views.js';
import { manifestKey, parquetKey } from '../../../shared/layout.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import {
  gallery,
  image,
  measuredInput,
  questionTextEntry,
  report,
  scalarQuestion,
  section,
  textEntry,
} from '../../helpers/reports.js';

const CAMPAIGN = 7;

interface TestRun {
  readonly id: string;
  readonly dt: string;
  /** undefined: the run left rows but no manifest (it never closed). */
  readonly status: RunStatus | undefined;
  /** Jobs whose reports the run wrote. */
  readonly reports: readonly number[];
  /** Jobs of its listing. */
  readonly listed: readonly number[];
}

const A: TestRun = {
  id: '20261101T030000Z-aaaaaa',
  dt: '2026-11-01',
  status: 'succeeded',
  reports: [1, 2],
  listed: [1, 2],
};
const B: TestRun = {
  id: '20261102T030000Z-bbbbbb',
  dt: '2026-11-02',
  status: 'partial',
  reports: [2, 3],
  listed: [1, 2, 3, 4],
};
/** Newer than B, but failed: a failed run publishes nothing; were its rows there, they must not count. */
const C: TestRun = {
  id: '20261102T090000Z-cccccc',
  dt: '2026-11-02',
  status: 'failed',
  reports: [1],
  listed: [1, 2, 3, 4, 5],
};
/** Newest of all, with rows but no manifest: not a run of record. */
const D: TestRun = {
  id: '20261102T120000Z-dddddd',
  dt: '2026-11-02',
  status: undefined,
  reports: [3],
  listed: [],
};
const RUNS = [A, B, C, D];
/** B is an evolve run whose reports drifted; A and C's manifests are as before the option. */
const B_DRIFT: DriftEntry[] = [
  { path: 'job.priority', kind: 'new_field', count: 2, reports: 2, first_job_id: 2 },
  {
    path: 'job.job_status',
    kind: 'unlisted_value',
    count: 1,
    reports: 1,
    first_job_id: 3,
    seen: ['archived'],
  },
];

/** The report a run fetched for a job: one row in every report table, the job score naming the run. */
function jobReport(run: TestRun, jobId: number) {
  return report({
    job: {
      id: jobId,
      job_score_percentage: String(RUNS.indexOf(run) + 1),
      campaign: { id: CAMPAIGN, campaign_name: 'Spring audit' },
    },
    sections: [
      section({
        questions: [scalarQuestion(), questionTextEntry()],
        inputs: [measuredInput()],
        media_galleries: [gallery({ images: [image()] })],
        text_entries: [textEntry()],
      }),
    ],
  });
}

function manifest(run: TestRun, status: RunStatus): Manifest {
  return ManifestSchema.parse({
    run_id: run.id,
    dt: run.dt,
    mode: 'incremental',
    status,
    started_at: `${run.dt}T03:00:00.000Z`,
    finished_at: `${run.dt}T03:05:00.000Z`,
    counts: {
      campaigns: 1,
      jobs: run.listed.length,
      reports_exported: status === 'failed' ? 0 : run.reports.length,
      reports_unchanged: 0,
      reports_not_ready: 0,
      reports_not_found: 0,
      reports_invalid: 0,
      reports_failed: status === 'partial' ? 1 : 0,
    },
    requests: { total: 10, retried: 1, by_status: { '200': 9, '429': 1 } },
    files: [],
    company_name: 'Acme',
    ...(run === B ? { schema_contract: 'evolve', schema_drift: B_DRIFT } : {}),
    ...(status === 'failed' ? { error: { message: 'API key expired', error_code: 'API_KEY_EXPIRED' } } : {}),
  });
}

async function put(root: string, key: string, body: Uint8Array | string): Promise<void> {
  const path = join(root, key);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, body);
}

/** Writes each run's Parquet (reports, child tables, campaigns, jobs) and, when it closed, its manifest as one JSON line. */
async function writeLake(root: string): Promise<void> {
  for (const run of RUNS) {
    const ctx = { runId: run.id, exportedAt: new Date(`${run.dt}T03:04:00.000Z`) };
    const rows = new Map<TableName, Row[]>();
    const add = (table: TableName, row: Row) => rows.set(table, [...(rows.get(table) ?? []), row]);
    for (const jobId of run.reports) {
      appendReportRows({ add }, jobReport(run, jobId), { campaignId: CAMPAIGN, jobId }, ctx);
    }
    add('campaigns', {
      campaign_id: CAMPAIGN,
      campaign_name: 'Spring audit',
      campaign_status: 'active',
      start_date: null,
      end_date: null,
      completed_at: null,
      created_at: null,
      item_json: JSON.stringify({ id: CAMPAIGN }),
      run_id: run.id,
      exported_at: ctx.exportedAt,
    });
    for (const jobId of run.listed) {
      add('jobs', {
        job_id: jobId,
        campaign_id: CAMPAIGN,
        job_status: 2,
        job_score_percentage: null,
        item_json: JSON.stringify({ id: jobId }),
        run_id: run.id,
        exported_at: ctx.exportedAt,
      });
    }
    for (const [table, tableRows] of rows) {
      await put(root, parquetKey(table, run.dt, run.id), encodeParquet(TABLES[table], tableRows));
    }
    if (run.status)
      await put(root, manifestKey(run.dt, run.id), `${JSON.stringify(manifest(run, run.status))}\n`);
  }
}

const pairs = (rows: unknown[][]) => rows.map(([job, run]) => `${String(job)}@${String(run)}`);

describe('the lake in DuckDB: runs, latest views, named queries', () => {
  let root: string;
  let sql: LakeSql;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'lake-views-'));
    await writeLake(root);
    sql = await openLakeSql(root);
  });
  afterAll(async () => {
    sql?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('reads one runs row per manifest, nested fields typed, dt last', async () => {
    const { columns, rows } = await sql.query(
      'SELECT run_id, status, counts.jobs, requests.by_status, error.error_code, dt FROM runs ORDER BY run_id',
    );
    expect(columns).toEqual(['run_id', 'status', 'jobs', 'by_status', 'error_code', 'dt']);
    expect(rows.map(([id, status, jobs, , code, dt]) => [id, status, Number(jobs), code, dt])).toEqual([
      [A.id, 'succeeded', 2, null, A.dt],
      [B.id, 'partial', 4, null, B.dt],
      [C.id, 'failed', 5, 'API_KEY_EXPIRED', C.dt],
    ]);
    // DuckDB quotes only the field names that are keywords; compare without quotes.
    const unquoted = (type: unknown) => String(type).replaceAll('"', '');
    const described = await sql.query('DESCRIBE runs');
    expect(described.rows.map(([name, type]) => [name, unquoted(type)])).toEqual(
      RUNS_VIEW_COLUMNS.map((c) => [c.name, unquoted(duckdbType(c.type))]),
    );
  });

  it("reads an evolve run's schema_contract and schema_drift, NULL from manifests without them", async () => {
    const { rows } = await sql.query(
      'SELECT run_id, schema_contract, len(schema_drift), schema_drift[2].path, schema_drift[2].kind, ' +
        'schema_drift[2].count, schema_drift[2].first_job_id, schema_drift[2].seen, schema_drift[1].seen ' +
        'FROM runs ORDER BY run_id',
    );
    expect(rows.map((r) => r.map((v) => (typeof v === 'bigint' ? Number(v) : v)))).toEqual([
      [A.id, null, null, null, null, null, null, null, null],
      [B.id, 'evolve', 2, 'job.job_status', 'unlisted_value', 1, 3, ['archived'], null],
      [C.id, null, null, null, null, null, null, null, null],
    ]);
  });

  it('gives each job the report of its newest succeeded or partial run', async () => {
    const { rows } = await sql.query(
      'SELECT job_id, run_id, job_score_percentage FROM reports_latest ORDER BY job_id',
    );
    expect(rows).toEqual([
      [1n, A.id, '1'],
      [2n, B.id, '2'],
      [3n, B.id, '2'],
    ]);
  });

  it.each(REPORT_TABLES.filter((t) => t !== 'reports'))(
    '%s_latest holds exactly the rows of those (job_id, run_id) pairs',
    async (table: ReportTableName) => {
      const view = latestViewName(table);
      const latest = await sql.query(`SELECT job_id, run_id FROM ${view} ORDER BY job_id, run_id`);
      const expected = await sql.query(
        `SELECT t.job_id, t.run_id FROM ${table} t
         WHERE (t.job_id = 1 AND t.run_id = '${A.id}') OR (t.job_id IN (2, 3) AND t.run_id = '${B.id}')
         ORDER BY t.job_id, t.run_id`,
      );
      expect(latest.rows.length).toBeGreaterThan(0);
      expect(pairs(latest.rows)).toEqual(pairs(expected.rows));
    },
  );

  it.each(LATEST_VIEWS.map((v) => v.name))('%s never shows a failed or unclosed run', async (view) => {
    const { rows } = await sql.query(`SELECT count(*) FROM ${view} WHERE run_id IN ('${C.id}', '${D.id}')`);
    expect(rows).toEqual([[0n]]);
  });

  it.each(LATEST_VIEWS)('$name has the table’s columns and types, then dt', async (view) => {
    const { rows } = await sql.query(`DESCRIBE ${view.name}`);
    expect(rows.map(([name, type]) => [name, type])).toEqual(
      view.columns.map((c) => [c.name, duckdbType(c.type)]),
    );
  });

  it.each(TABLE_NAMES)(
    '%s reads as the table’s columns and types, then dt (with or without files)',
    async (table) => {
      const { rows } = await sql.query(`DESCRIBE ${table}`);
      expect(rows.map(([name, type]) => [name, type])).toEqual(
        tableColumns(table).map((c) => [c.name, duckdbType(c.type)]),
      );
    },
  );

  it('runs every named query; a job exported twice counts once', async () => {
    for (const query of QUERIES) await expect(sql.query(query.sql), query.name).resolves.toBeDefined();
    const byName = (name: string) => QUERIES.find((q) => q.name === name)!.sql;
    const scores = await sql.query(byName('average-score-by-campaign-and-survey'));
    expect(scores.rows.map((r) => Number(r[scores.columns.indexOf('reports')]))).toEqual([3]);
    // The last published listing is B's (C failed): job 4 has no report; 1, 2 and 3 have one.
    const missing = await sql.query(byName('jobs-without-report'));
    expect(missing.rows.map((r) => r[missing.columns.indexOf('job_id')])).toEqual([4n]);
  });
});

describe('an empty output folder in DuckDB', () => {
  let root: string;
  let sql: LakeSql;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'lake-empty-'));
    sql = await openLakeSql(root);
  });
  afterAll(async () => {
    sql?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('reads every table, runs and every latest view as zero rows', async () => {
    for (const name of [...TABLE_NAMES, 'runs', ...LATEST_VIEWS.map((v) => v.name)]) {
      expect((await sql.query(`SELECT count(*) FROM ${name}`)).rows, name).toEqual([[0n]]);
    }
  });

  it('runs every named query without error', async () => {
    for (const query of QUERIES) {
      expect((await sql.query(query.sql)).rows, query.name).toEqual([]);
    }
  });
});
