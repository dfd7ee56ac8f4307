import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReportSchema } from '../../../shared/api/schemas.js';
import { REPORT_TABLES, SCHEMA_CONTRACTS, type SchemaContract } from '../../../shared/export/tables.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { expectedRowCounts, exporter, tempDir } from '../../helpers/export.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const glob = (dir: string, path: string) => `'${dir}/${path}'`;

/**
 * Under both schema contracts (issue 27): they agree on every report the spec allows. The body
 * the simulator breaks (invalidReportJobs) is quarantined and counted invalid under freeze; under
 * evolve it lands (its data is an object) and is counted exported, its values in its rows.
 */
describe.each(SCHEMA_CONTRACTS)('a run against the simulator (%s)', (contract: SchemaContract) => {
  const evolve = contract === 'evolve';
  let simulator: Simulator;
  let db: DuckDb;
  let out: string;

  beforeAll(async () => {
    simulator = await startSimulator({
      seed: 7,
      campaigns: 3,
      jobsPerCampaign: 20,
      reportSize: 'small',
      unpublishedShare: 0.1,
      surveyMissingJobs: 1,
      noSectionsJobs: 1,
      tryLaterJobs: 2,
      tryLaterAttempts: 1,
      invalidReportJobs: 1,
      forbiddenReportJobs: 1,
    });
    db = await openDuckDb();
    out = await tempDir('run');
  });
  afterAll(async () => {
    await simulator?.close();
    await db?.close();
  });

  const jobs = () => simulator.dataset.campaigns.flatMap((c) => c.jobs);
  /** Jobs whose report the run writes: the published ones that answer, and under evolve the invalid ones too. */
  const landed = () =>
    jobs().filter((j) => j.state === 'published' && !j.forbidden && (evolve || !j.invalid));
  /** The report the API sends for `job`. */
  const sent = (job: { id: number; invalid: boolean }) =>
    job.invalid ? simulator.dataset.invalidReportOf(job.id) : simulator.dataset.reportOf(job.id);
  const run = (options: Parameters<ReturnType<typeof exporter>['run']>[0] = {}) =>
    exporter(simulator, out).run({ schemaContract: contract, ...options });

  it('gives every listed job exactly one outcome, as the dataset says', async () => {
    const manifest = await run();
    const all = jobs();
    const notReady = all.filter((j) => j.state !== 'published').length;
    const invalid = all.filter((j) => j.state === 'published' && j.invalid).length;
    const forbidden = all.filter((j) => j.state === 'published' && j.forbidden).length;
    expect(invalid).toBe(1);
    expect(manifest.counts).toEqual({
      campaigns: 3,
      jobs: 60,
      reports_exported: 60 - notReady - (evolve ? 0 : invalid) - forbidden,
      reports_unchanged: 0,
      reports_not_ready: notReady,
      reports_not_found: 0,
      reports_invalid: evolve ? 0 : invalid,
      reports_failed: forbidden,
      campaigns_invalid: 0,
      duplicates: 0,
    });
    expect(manifest.status).toBe('partial');
    expect(manifest.requests.total).toBe(simulator.stats.total);
    expect(manifest.requests.by_status['409']).toBe(simulator.stats.byStatus['409']);
  });

  it('writes raw report lines that deep-equal what the API sent', async () => {
    const rows = await db.all(
      `SELECT job_id, campaign_id, data::VARCHAR AS data FROM read_json(${glob(out, 'raw/reports/*/*.jsonl.gz')},
        format = 'newline_delimited', compression = 'gzip', columns = {job_id: 'BIGINT', campaign_id: 'BIGINT', data: 'JSON'})`,
    );
    expect(rows).toHaveLength(landed().length);
    for (const row of rows) {
      const job = simulator.dataset.job(Number(row.job_id))!;
      expect(job.campaignId).toBe(Number(row.campaign_id));
      expect(JSON.parse(String(row.data))).toEqual(sent(job));
    }
  });

  it('writes each report table with the rows the generator truth implies', async () => {
    const exported = landed();
    for (const table of REPORT_TABLES) {
      const rows = await db.all(
        `SELECT job_id, count(*) AS n FROM read_parquet(${glob(out, `parquet/${table}/*/*.parquet`)}) GROUP BY job_id`,
      );
      const actual = new Map(rows.map((r) => [Number(r.job_id), Number(r.n)]));
      for (const job of exported) {
        const expected = expectedRowCounts(sent(job))[table];
        expect(actual.get(job.id) ?? 0, `${table} rows of job ${job.id}`).toBe(expected);
      }
    }
  });

  it('copies the report header fields into the reports table', async () => {
    const rows = await db.all(`SELECT * FROM read_parquet(${glob(out, 'parquet/reports/*/*.parquet')})`);
    expect(rows).toHaveLength(landed().length);
    for (const row of rows) {
      if (simulator.dataset.job(Number(row.job_id))?.invalid) continue; // Not the spec's: no truth to parse.
      const truth = ReportSchema.parse(simulator.dataset.reportOf(Number(row.job_id)));
      expect(row.job_status).toBe(truth.job.job_status);
      expect(row.job_score_percentage).toBe(truth.job.job_score_percentage);
      expect(row.location_code).toBe(truth.job.location.location_code);
      expect(row.is_competitor).toBe(truth.job.location.is_competitor);
      expect(row.survey_name).toBe(truth.job.report.survey_name);
      expect(row.report_campaign_id === null ? null : Number(row.report_campaign_id)).toBe(
        truth.job.campaign.id,
      );
    }
  });

  it(`writes the campaigns and jobs snapshots and ${evolve ? 'quarantines no' : 'quarantines the invalid'} body`, async () => {
    const [campaigns] = await db.all(
      `SELECT count(*) AS n FROM read_parquet(${glob(out, 'parquet/campaigns/*/*.parquet')})`,
    );
    const [listed] = await db.all(
      `SELECT count(*) AS n FROM read_parquet(${glob(out, 'parquet/jobs/*/*.parquet')})`,
    );
    expect(Number(campaigns?.n)).toBe(3);
    expect(Number(listed?.n)).toBe(60);
    if (evolve) {
      await expect(readdir(join(out, 'quarantine'))).rejects.toMatchObject({ code: 'ENOENT' });
      return;
    }
    const quarantined = await db.all(`SELECT * FROM read_json(${glob(out, 'quarantine/*/*/*.json')})`);
    expect(quarantined).toHaveLength(1);
    expect(quarantined[0]?.issues).not.toHaveLength(0);
  });

  it('asks again, on an incremental re-run, only for the reports that did not get exported', async () => {
    simulator.resetStats();
    const manifest = await run();
    const retried = jobs().filter((j) => j.state !== 'published' || (!evolve && j.invalid) || j.forbidden);
    expect(manifest.counts.reports_unchanged).toBe(60 - retried.length);
    expect(simulator.stats.byEndpoint.report).toBe(retried.length);
    expect([...simulator.stats.reportRequestsByJob.keys()].sort()).toEqual(retried.map((j) => j.id).sort());
  });

  it('fetches a job again when its list item changed or it got published', async () => {
    const [touched, unpublished] = [
      jobs().find((j) => j.state === 'published' && !j.invalid && !j.forbidden)!,
      jobs().find((j) => j.state === 'unpublished')!,
    ];
    simulator.dataset.touch(touched.id);
    simulator.dataset.publish(unpublished.id);
    simulator.resetStats();
    const manifest = await run();
    expect(simulator.stats.reportRequestsByJob.get(touched.id)).toBe(1);
    expect(simulator.stats.reportRequestsByJob.get(unpublished.id)).toBe(1);
    expect(manifest.counts.reports_exported).toBe(2);
  });

  it('fetches every report again with --full', async () => {
    simulator.resetStats();
    const manifest = await run({ mode: 'full' });
    expect(manifest.mode).toBe('full');
    expect(manifest.counts.reports_unchanged).toBe(0);
    expect(simulator.stats.byEndpoint.report).toBeGreaterThanOrEqual(60);
  });
});
