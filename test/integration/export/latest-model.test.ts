/**
 * The `*_latest` views against a plain model over random histories: each history is a lake of
 * runs (published, partial or failed; campaign listings complete or with an invalid item; job
 * listings complete, cut short or with invalid items; reports exported; reports answering
 * 404), written as the exporter writes it under either schema contract, and read in DuckDB. The model replays the runs in
 * order and applies each one's deletions, as the Iceberg current tables do; the views compute
 * the same from the whole history at once.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openLakeSql } from '../../../functions/cli/sql.js';
import { appendReportRows } from '../../../shared/export/format/flatten.js';
import { ManifestSchema, type RunStatus } from '../../../shared/export/state/manifest.js';
import {
  type Row,
  SCHEMA_CONTRACTS,
  type SchemaContract,
  type TableName,
  tablesOf,
} from '../../../shared/export/tables.js';
import { manifestKey, parquetKey } from '../../../shared/layout.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { tempDir } from '../../helpers/export.js';
import { report } from '../../helpers/reports.js';

const CAMPAIGNS = [1, 2] as const;
/** Jobs 1–6; a job's campaign is fixed: odd jobs in campaign 1, even ones in campaign 2. */
const JOBS = [1, 2, 3, 4, 5, 6] as const;
const campaignOf = (job: number) => (job % 2 === 1 ? 1 : 2);

type Listing = 'complete' | 'unlisted' | 'partial';

interface RunSpec {
  status: RunStatus;
  campaigns: number[];
  /** A campaign item failed validation: the campaign listing is not complete. */
  campaignInvalid: boolean;
  listing: Record<number, Listing>;
  /** Jobs listed (those of unlisted campaigns are dropped when written). */
  listed: number[];
  /** Of the listed jobs: exported, or answering 404 (the others: unchanged, not ready…). */
  outcome: Record<number, 'exported' | 'not_found' | 'other'>;
  /**
   * The run's schema contract: its files are of the frozen tables or of the evolve ones (with
   * `_rescued`), so a history may be frozen, evolve, or an output switched from one to the other.
   */
  contract: SchemaContract;
}

const subset = <T>(items: readonly T[]) => fc.subarray([...items]);

const runSpec: fc.Arbitrary<RunSpec> = fc.record({
  status: fc.constantFrom<RunStatus>('succeeded', 'succeeded', 'partial', 'failed'),
  campaigns: subset(CAMPAIGNS),
  campaignInvalid: fc.boolean(),
  listing: fc.record({
    1: fc.constantFrom<Listing>('complete', 'complete', 'unlisted', 'partial'),
    2: fc.constantFrom<Listing>('complete', 'complete', 'unlisted', 'partial'),
  }),
  listed: subset(JOBS),
  outcome: fc.record(
    Object.fromEntries(JOBS.map((j) => [j, fc.constantFrom('exported', 'not_found', 'other')])) as Record<
      number,
      fc.Arbitrary<'exported' | 'not_found' | 'other'>
    >,
  ),
  contract: fc.constantFrom(...SCHEMA_CONTRACTS),
});

const runId = (i: number) => `20261101T03${String(i).padStart(4, '0')}Z-${'abcdef'}`;
const DT = '2026-11-01';

/** What a run wrote: the jobs it listed (of campaigns whose listing went to the end, or partly). */
function listedJobs(run: RunSpec): number[] {
  return run.listed.filter(
    (j) => run.campaigns.includes(campaignOf(j)) && run.listing[campaignOf(j)] !== 'unlisted',
  );
}

async function put(root: string, key: string, body: Uint8Array | string): Promise<void> {
  const path = join(root, key);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, body);
}

/** Writes the runs as the exporter does: campaigns, jobs and report rows, then the manifest. */
async function writeLake(root: string, runs: readonly RunSpec[]): Promise<void> {
  for (const [i, run] of runs.entries()) {
    const id = runId(i);
    const ctx = { runId: id, exportedAt: new Date(`${DT}T03:04:00.000Z`) };
    const rows = new Map<TableName, Row[]>();
    const add = (table: TableName, row: Row) => rows.set(table, [...(rows.get(table) ?? []), row]);
    const base = { run_id: id, exported_at: ctx.exportedAt };
    for (const c of run.campaigns) {
      add('campaigns', {
        campaign_id: c,
        campaign_name: `c${c}`,
        campaign_status: null,
        start_date: null,
        end_date: null,
        completed_at: null,
        created_at: null,
        item_json: JSON.stringify({ id: c }),
        ...base,
      });
    }
    const listed = listedJobs(run);
    for (const j of listed) {
      const campaign_id = campaignOf(j);
      add('jobs', {
        job_id: j,
        campaign_id,
        job_status: 2,
        job_score_percentage: null,
        item_json: '{}',
        ...base,
      });
      if (run.outcome[j] === 'exported') {
        const body = report({
          job: { id: j, campaign: { id: campaign_id, campaign_name: `c${campaign_id}` } },
        });
        appendReportRows({ add }, body, { campaignId: campaign_id, jobId: j }, ctx);
      }
    }
    // A failed run publishes nothing.
    if (run.status !== 'failed') {
      for (const [table, tableRows] of rows) {
        await put(root, parquetKey(table, DT, id), encodeParquet(tablesOf(run.contract)[table], tableRows));
      }
    }
    const byListing = (kind: Listing) => run.campaigns.filter((c) => run.listing[c] === kind);
    const notFound = listed.filter((j) => run.outcome[j] === 'not_found');
    const manifest = ManifestSchema.parse({
      run_id: id,
      dt: DT,
      mode: 'incremental',
      status: run.status,
      started_at: `${DT}T03:00:00.000Z`,
      finished_at: `${DT}T03:05:00.000Z`,
      counts: {
        campaigns: run.campaigns.length + (run.campaignInvalid ? 1 : 0),
        jobs: listed.length,
        reports_exported: 0,
        reports_unchanged: 0,
        reports_not_ready: 0,
        reports_not_found: notFound.length,
        reports_invalid: 0,
        reports_failed: 0,
        campaigns_invalid: run.campaignInvalid ? 1 : 0,
      },
      requests: { total: 1, retried: 0, by_status: { '200': 1 } },
      files: [],
      ...(byListing('unlisted').length > 0 && { unlisted_campaigns: byListing('unlisted') }),
      ...(byListing('partial').length > 0 && { partially_listed_campaigns: byListing('partial') }),
      ...(notFound.length > 0 && { not_found_jobs: notFound }),
    });
    await put(root, manifestKey(DT, id), `${JSON.stringify(manifest)}\n`);
  }
}

/** The model: the runs replayed in order, each one's rows set and its deletions applied. */
function model(runs: readonly RunSpec[]) {
  const campaigns = new Map<number, number>();
  const jobs = new Map<number, number>();
  const reports = new Map<number, number>();
  for (const [i, run] of runs.entries()) {
    if (run.status === 'failed') continue;
    for (const c of run.campaigns) campaigns.set(c, i);
    if (!run.campaignInvalid)
      for (const c of campaigns.keys()) if (!run.campaigns.includes(c)) campaigns.delete(c);
    const listed = listedJobs(run);
    for (const j of listed) jobs.set(j, i);
    for (const j of listed) if (run.outcome[j] === 'exported') reports.set(j, i);
    const deleted = (j: number) => {
      const c = campaignOf(j);
      const complete = run.campaigns.includes(c) && run.listing[c] === 'complete';
      return (complete && !listed.includes(j)) || (listed.includes(j) && run.outcome[j] === 'not_found');
    };
    for (const map of [jobs, reports]) for (const j of [...map.keys()]) if (deleted(j)) map.delete(j);
  }
  const pairs = (map: Map<number, number>) => [...map].map(([k, i]) => `${k}@${runId(i)}`).sort();
  return { campaigns: pairs(campaigns), jobs: pairs(jobs), reports: pairs(reports) };
}

describe('the *_latest views over random histories', () => {
  it('agree with a replay of the runs that applies each one’s deletions', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(runSpec, { minLength: 1, maxLength: 6 }), async (runs) => {
        const root = await tempDir('latest-model');
        try {
          await writeLake(root, runs);
          const sql = await openLakeSql(root);
          try {
            const pairs = async (query: string) =>
              (await sql.query(query)).rows.map(([k, r]) => `${String(k)}@${String(r)}`).sort();
            const expected = model(runs);
            expect(await pairs('SELECT campaign_id, run_id FROM campaigns_latest')).toEqual(
              expected.campaigns,
            );
            expect(await pairs('SELECT job_id, run_id FROM jobs_latest')).toEqual(expected.jobs);
            expect(await pairs('SELECT job_id, run_id FROM reports_latest')).toEqual(expected.reports);
            expect(await pairs('SELECT DISTINCT job_id, run_id FROM sections_latest')).toEqual(
              expected.reports,
            );
          } finally {
            sql.close();
          }
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
