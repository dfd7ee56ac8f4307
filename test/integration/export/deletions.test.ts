/**
 * Current state honours deletions: runs against the scripted API in which a job leaves its
 * campaign's listing, a report turns 404, a listing fails or holds an invalid item (and must
 * delete nothing), jobs come back, and a campaign leaves the campaign listing. After each run,
 * the `*_latest` views (DuckDB, Hive and Iceberg outputs) and the Iceberg `_current` tables
 * (DuckDB, and icebird as an independent reader) are compared with what the definition in
 * `shared/export/views.ts` says they hold.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeSql } from '../../../functions/cli/sql.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import type { ReportTableName } from '../../../shared/export/tables.js';
import { latestViewName, latestViewSql } from '../../../shared/export/views.js';
import { ICEBERG_ROOT, type TableFormat } from '../../../shared/layout.js';
import { tempDir } from '../../helpers/export.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { runAgainst, scriptedRoute } from '../../helpers/scripted-api.js';
import type { Reply } from '../../integration/api/server.js';
import { listPage, reportData } from '../../unit/api/fixtures.js';
import { errorReply, startServer, type TestServer } from '../api/server.js';

/** One run's API: the campaigns listed, each campaign's job listing, and the report answers. */
interface Step {
  readonly name: string;
  readonly campaigns: readonly number[];
  /** Job items per campaign; a campaign named in `failing` answers a contradictory page. */
  readonly jobs: Readonly<Record<number, readonly Record<string, unknown>[]>>;
  readonly failing?: readonly number[];
  /** Campaigns whose job listing answers 404 (gone while the run lists them). */
  readonly gone?: readonly number[];
  /** Jobs whose report answers 404 / 409 in this run. */
  readonly notFound?: readonly number[];
  readonly notReady?: readonly number[];
  /** What the latest views and current tables hold after the run. */
  readonly expected: {
    readonly campaigns: readonly number[];
    /** `<campaign>:<job>` of jobs_latest. */
    readonly jobs: readonly string[];
    /** `<job>@<step index>` of reports_latest: the step whose report is shown. */
    readonly reports: readonly string[];
  };
}

const job = (id: number, status = 2) => ({ id, job_status: status });

const STEPS: readonly Step[] = [
  {
    name: 'first listing',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12), job(13)], 2: [job(21), job(22)] },
    expected: {
      campaigns: [1, 2],
      jobs: ['1:11', '1:12', '1:13', '2:21', '2:22'],
      reports: ['11@0', '12@0', '13@0', '21@0', '22@0'],
    },
  },
  {
    name: 'job 13 leaves the listing; job 12 changes and its report answers 404',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12, 3)], 2: [job(21), job(22)] },
    notFound: [12],
    expected: { campaigns: [1, 2], jobs: ['1:11', '2:21', '2:22'], reports: ['11@0', '21@0', '22@0'] },
  },
  {
    name: 'campaign 1 cannot be listed; campaign 2 lists an invalid item and not job 22: nothing deleted',
    campaigns: [1, 2],
    jobs: { 2: [job(21), { job_status: 2 }] },
    failing: [1],
    expected: { campaigns: [1, 2], jobs: ['1:11', '2:21', '2:22'], reports: ['11@0', '21@0', '22@0'] },
  },
  {
    name: 'jobs 12 and 13 come back and are fetched again; campaign 2 lists all but job 22',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12, 3), job(13)], 2: [job(21)] },
    expected: {
      campaigns: [1, 2],
      jobs: ['1:11', '1:12', '1:13', '2:21'],
      reports: ['11@0', '12@3', '13@3', '21@0'],
    },
  },
  {
    name: 'job 22 comes back, its report not ready: listed, its old report stays deleted',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12, 3), job(13)], 2: [job(21), job(22)] },
    notReady: [22],
    expected: {
      campaigns: [1, 2],
      jobs: ['1:11', '1:12', '1:13', '2:21', '2:22'],
      reports: ['11@0', '12@3', '13@3', '21@0'],
    },
  },
  {
    name: 'campaign 2 leaves the campaign listing: gone from campaigns_latest, its jobs as last listed',
    campaigns: [1],
    jobs: { 1: [job(11), job(12, 3), job(13)] },
    expected: {
      campaigns: [1],
      jobs: ['1:11', '1:12', '1:13', '2:21', '2:22'],
      reports: ['11@0', '12@3', '13@3', '21@0'],
    },
  },
  {
    name: 'campaign 2 is listed again but its jobs answer 404: it listed none, its jobs are deleted',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12, 3), job(13)] },
    gone: [2],
    expected: { campaigns: [1, 2], jobs: ['1:11', '1:12', '1:13'], reports: ['11@0', '12@3', '13@3'] },
  },
  {
    name: 'job 21 is listed again and fetched again',
    campaigns: [1, 2],
    jobs: { 1: [job(11), job(12, 3), job(13)], 2: [job(21)] },
    expected: {
      campaigns: [1, 2],
      jobs: ['1:11', '1:12', '1:13', '2:21'],
      reports: ['11@0', '12@3', '13@3', '21@7'],
    },
  },
];

/** The scripted API answering as `steps[at()]` says. */
function apiOf(at: () => number) {
  const step = () => STEPS[at()]!;
  return scriptedRoute({
    campaigns: () => ({
      body: listPage(
        step().campaigns.map((id) => ({ id })),
        1,
        1,
      ),
    }),
    jobs: (campaignId, page): Reply =>
      step().failing?.includes(campaignId)
        ? { body: listPage([job(campaignId * 10 + 1)], page + 1, page + 1) }
        : step().gone?.includes(campaignId)
          ? errorReply(404, 'NOT_FOUND', 'Resource not found.')
          : { body: listPage([...(step().jobs[campaignId] ?? [])], 1, 1) },
    report: (_campaignId, jobId): Reply =>
      step().notFound?.includes(jobId)
        ? errorReply(404, 'NOT_FOUND', 'Resource not found.')
        : step().notReady?.includes(jobId)
          ? errorReply(409, 'REPORT_NOT_READY', 'Report not published yet.')
          : { body: { data: reportData(jobId) } },
  });
}

const sorted = (values: Iterable<string>) => [...values].sort();

describe.each<TableFormat>(['hive', 'iceberg'])('current state over runs with deletions (%s)', (format) => {
  let server: TestServer;
  let out: string;
  let step = 0;
  const manifests: Manifest[] = [];

  beforeAll(async () => {
    server = await startServer(apiOf(() => step));
    out = await tempDir(`deletions-${format}`);
  });
  afterAll(async () => {
    await server?.close();
  });

  it.each(STEPS.map((s, i) => [i, s.name] as const))('run %i: %s', async (index) => {
    step = index;
    // Run ids order runs by their start second: each run starts in a second of its own.
    await new Promise((resolve) => setTimeout(resolve, 1005 - (Date.now() % 1000)));
    const expected = STEPS[index]!.expected;
    const { manifest } = await runAgainst(server, { out, run: { tableFormat: format } });
    manifests[index] = manifest;
    expect(manifest.status).not.toBe('failed');
    const stepOf = new Map(manifests.map((m, i) => [m.run_id, i]));
    const sql = await openLakeSql(out);
    // The report tables' *_latest views are Hive's (Athena's Iceberg stack has the _current
    // tables instead, and so has the sql command); over Iceberg their SQL is the model the
    // _current tables are compared with.
    const latest = (table: ReportTableName) =>
      format === 'hive' ? latestViewName(table) : `(${latestViewSql(table)}) AS latest`;
    try {
      const campaigns = await sql.query('SELECT campaign_id FROM campaigns_latest');
      expect(sorted(campaigns.rows.map(([c]) => String(c)))).toEqual(sorted(expected.campaigns.map(String)));
      const jobs = await sql.query('SELECT campaign_id, job_id FROM jobs_latest');
      expect(sorted(jobs.rows.map(([c, j]) => `${c}:${j}`))).toEqual(sorted(expected.jobs));
      const reports = await sql.query(`SELECT job_id, run_id FROM ${latest('reports')}`);
      expect(sorted(reports.rows.map(([j, r]) => `${j}@${stepOf.get(String(r))}`))).toEqual(
        sorted(expected.reports),
      );
      // Child tables follow their report: the (job_id, run_id) pairs of sections_latest are reports_latest's.
      const sections = await sql.query(`SELECT DISTINCT job_id, run_id FROM ${latest('sections')}`);
      expect(sorted(sections.rows.map(([j, r]) => `${j}@${stepOf.get(String(r))}`))).toEqual(
        sorted(expected.reports),
      );
      if (format === 'iceberg') {
        for (const table of ['reports_current', 'sections_current']) {
          const current = await sql.query(`SELECT DISTINCT job_id, run_id FROM ${table}`);
          expect(sorted(current.rows.map(([j, r]) => `${j}@${stepOf.get(String(r))}`)), table).toEqual(
            sorted(expected.reports),
          );
          const read = await readIcebergTable(join(out, ICEBERG_ROOT, table));
          const pairs = new Set(read.map((row) => `${row.job_id}@${stepOf.get(String(row.run_id))}`));
          expect(sorted(pairs), `${table} (icebird)`).toEqual(sorted(expected.reports));
        }
      }
    } finally {
      sql.close();
    }
  });

  it('records the 404s and the incomplete listings in the manifests', () => {
    expect(manifests.map((m) => m.not_found_jobs)).toEqual([
      undefined,
      [12],
      ...Array.from({ length: STEPS.length - 2 }, () => undefined),
    ]);
    expect(manifests[2]?.unlisted_campaigns).toEqual([1]);
    expect(manifests[2]?.partially_listed_campaigns).toEqual([2]);
    expect(manifests.filter((m) => m.partially_listed_campaigns).length).toBe(1);
  });
});
