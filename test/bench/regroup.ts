/**
 * Regrouping at publish (shared/parquet/regroup.ts): per table, the size of the published file
 * against DuckDB's re-encode of the same rows (`COPY … (FORMAT parquet, COMPRESSION zstd)`),
 * for the old concatenation (`ParquetConcat`, the staged row groups copied) and for
 * `publishRun` (small groups re-encoded), with row groups and a full-scan aggregate; then the
 * CPU and wall time of publishing a run of many reports into a folder, both ways.
 *
 * Sizes come from a run of distinct realistic reports (`sizeReports`, default 10,000), staged
 * in units of 100 with `stageStep` as export-reports does. Times come from the publish bench's
 * synthesized run (`timeReports`, default 100,000: its 20 staged units' bytes repeated under
 * the keys of 1,000 units). `npx tsx test/bench/regroup.ts [sizeReports] [timeReports]`.
 */

import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LAMBDA_MB_PER_VCPU } from '../../infra/function-sizes.js';
import { appendReportRows, campaignRow, jobRow } from '../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import { rawLine } from '../../shared/export/raw-lines.js';
import { planPublish, publishRun } from '../../shared/export/run/publish.js';
import { stageStep } from '../../shared/export/run/staging.js';
import type { FileEntry } from '../../shared/export/state/records.js';
import { TABLE_NAMES } from '../../shared/export/tables.js';
import { ParquetConcat } from '../../shared/parquet/concat.js';
import { LocalStorage } from '../../shared/storage/local.js';
import type { Storage } from '../../shared/storage/storage.js';
import { openDuckDb } from '../helpers/duckdb.js';
import { realisticReports } from '../helpers/realistic-reports.js';
import { RUN, stageRun, stageTemplates } from './publish.js';

const UNIT_REPORTS = 100;
const REPORTS_PER_CAMPAIGN = 500;
/** Scan rounds per layout, after one warm-up; the median counts. */
const ROUNDS = 5;
const round = (x: number, digits = 3) => Number(x.toFixed(digits));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Stages `reports` distinct realistic reports in units of 100, as export-reports does. */
async function stageDistinct(storage: Storage, reports: number): Promise<FileEntry[]> {
  const gen = realisticReports(20261123);
  const exportedAt = new Date('2026-11-23T03:15:00Z');
  const staged: FileEntry[] = [];
  for (let u = 0; u * UNIT_REPORTS < reports; u++) {
    const rows = new TableBuffer();
    const lines = new JsonLinesBuffer();
    for (let i = u * UNIT_REPORTS; i < Math.min(reports, (u + 1) * UNIT_REPORTS); i++) {
      const jobId = 3_000_000_000 + i;
      const campaignId = 1 + Math.floor(i / REPORTS_PER_CAMPAIGN);
      const report = gen.report(jobId, campaignId);
      appendReportRows(rows, report, { campaignId, jobId }, { runId: RUN.run_id, exportedAt });
      lines.add(
        rawLine(RUN.run_id, exportedAt.toISOString(), report, { campaign_id: campaignId, job_id: jobId }),
      );
    }
    staged.push(
      ...(await stageStep(storage, RUN.run_id, 'reports', `u${String(u).padStart(5, '0')}`, rows, lines)),
    );
  }
  // Each campaign's jobs snapshot and the run's campaigns snapshot, as plan-campaign and start-run stage them.
  const ctx = { runId: RUN.run_id, exportedAt };
  const campaignRows = new TableBuffer();
  const campaignLines = new JsonLinesBuffer();
  for (let c = 1; (c - 1) * REPORTS_PER_CAMPAIGN < reports; c++) {
    const rows = new TableBuffer();
    const lines = new JsonLinesBuffer();
    for (let i = (c - 1) * REPORTS_PER_CAMPAIGN; i < Math.min(reports, c * REPORTS_PER_CAMPAIGN); i++) {
      const item = { id: 3_000_000_000 + i, job_status: 1 + (i % 4), job_score_percentage: `${i % 101}.5` };
      lines.add({ run_id: RUN.run_id, fetched_at: exportedAt.toISOString(), data: item });
      rows.add('jobs', jobRow(item, c, ctx));
    }
    staged.push(...(await stageStep(storage, RUN.run_id, 'jobs', `c${c}`, rows, lines)));
    const campaign = {
      id: c,
      campaign_name: `Campaign ${c}`,
      campaign_status: c % 3 ? 'active' : 'closed',
      start_date: '2026-01-01',
      end_date: null,
      completed_at: null,
      created_at: '2025-12-01T10:00:00Z',
    };
    campaignLines.add({ run_id: RUN.run_id, fetched_at: exportedAt.toISOString(), data: campaign });
    campaignRows.add('campaigns', campaignRow(campaign, ctx));
  }
  staged.push(
    ...(await stageStep(storage, RUN.run_id, 'campaigns', 'campaigns', campaignRows, campaignLines)),
  );
  return staged;
}

/** The old publish of one table: its staged files concatenated as they are. */
async function concatenated(storage: Storage, inputs: readonly FileEntry[]): Promise<Uint8Array> {
  const concat = new ParquetConcat();
  const chunks = [concat.start()];
  for (const f of inputs) chunks.push(concat.append((await storage.get(f.key))!.body));
  chunks.push(concat.finish());
  return Buffer.concat(chunks);
}

/** The old publish of every Parquet table, as publishRun did it before regrouping. */
async function concatAll(storage: Storage, staged: readonly FileEntry[]): Promise<void> {
  for (const plan of planPublish(RUN, staged, Number.POSITIVE_INFINITY)) {
    if (plan.format !== 'parquet') continue;
    await storage.put(`concat/${plan.key}`, await concatenated(storage, plan.inputs));
  }
}

/** CPU (user + system) and wall seconds of `action` in this process. */
async function measured(action: () => Promise<unknown>): Promise<{ cpu: number; wall: number }> {
  const cpu = process.cpuUsage();
  const t = performance.now();
  await action();
  const used = process.cpuUsage(cpu);
  return { cpu: (used.user + used.system) / 1e6, wall: (performance.now() - t) / 1000 };
}

export async function benchRegroup(
  sizeReports = 10_000,
  timeReports = 100_000,
): Promise<Record<string, number>> {
  const scratch = await mkdtemp(join(tmpdir(), 'bench-regroup-'));
  const db = await openDuckDb();
  const f: Record<string, number> = { size_reports: sizeReports, time_reports: timeReports };
  try {
    // 1. Sizes per table: concat and regroup against DuckDB's re-encode of the same rows.
    const storage = new LocalStorage(join(scratch, 'sizes'));
    const staged = await stageDistinct(storage, sizeReports);
    const published = await publishRun(storage, RUN, staged, { maxFileBytes: Number.POSITIVE_INFINITY });
    let totals = { concat: 0, regroup: 0, duckdb: 0 };
    for (const table of TABLE_NAMES) {
      const file = published.find((p) => p.format === 'parquet' && p.table_or_entity === table);
      if (!file) continue;
      const inputs = staged.filter((s) => s.format === 'parquet' && s.table_or_entity === table);
      const regroup = join(scratch, `${table}-regroup.parquet`);
      const concat = join(scratch, `${table}-concat.parquet`);
      const duck = join(scratch, `${table}-duckdb.parquet`);
      await writeFile(regroup, (await storage.get(file.key))!.body);
      const concatBytes = await concatenated(storage, inputs);
      await writeFile(concat, concatBytes);
      await db.all(
        `COPY (SELECT * FROM read_parquet('${concat}')) TO '${duck}' (FORMAT parquet, COMPRESSION zstd)`,
      );
      const groups = async (path: string) =>
        Number(
          (await db.all(`SELECT count(DISTINCT row_group_id)::INT AS n FROM parquet_metadata('${path}')`))[0]
            ?.n,
        );
      const bytes = {
        concat: (await stat(concat)).size,
        regroup: (await stat(regroup)).size,
        duckdb: (await stat(duck)).size,
      };
      f[`${table}_rows`] = file.rows;
      f[`${table}_concat_kb`] = Math.round(bytes.concat / 1024);
      f[`${table}_regroup_kb`] = Math.round(bytes.regroup / 1024);
      f[`${table}_duckdb_kb`] = Math.round(bytes.duckdb / 1024);
      f[`${table}_concat_over_duckdb`] = round(bytes.concat / bytes.duckdb);
      f[`${table}_regroup_over_duckdb`] = round(bytes.regroup / bytes.duckdb);
      f[`${table}_row_groups_concat`] = await groups(concat);
      f[`${table}_row_groups_regroup`] = await groups(regroup);
      totals = {
        concat: totals.concat + bytes.concat,
        regroup: totals.regroup + bytes.regroup,
        duckdb: totals.duckdb + bytes.duckdb,
      };
      // A full-scan aggregate over every column, rounds interleaved.
      const times: Record<'concat' | 'regroup' | 'duckdb', number[]> = {
        concat: [],
        regroup: [],
        duckdb: [],
      };
      for (let r = 0; r <= ROUNDS; r++) {
        for (const [name, path] of [
          ['concat', concat],
          ['regroup', regroup],
          ['duckdb', duck],
        ] as const) {
          const t = performance.now();
          const key = table === 'campaigns' ? 'campaign_id' : 'job_id';
          await db.all(`SELECT count(*), count(DISTINCT ${key}), max(run_id) FROM read_parquet('${path}')`);
          if (r > 0) times[name].push(performance.now() - t);
        }
      }
      f[`${table}_scan_concat_over_regroup`] = round(median(times.concat) / median(times.regroup), 2);
    }
    f.all_concat_over_duckdb = round(totals.concat / totals.duckdb);
    f.all_regroup_over_duckdb = round(totals.regroup / totals.duckdb);

    // 2. Time to publish a synthesized run of timeReports reports into a folder, concat vs regroup.
    const templates = await stageTemplates();
    const big = new LocalStorage(join(scratch, 'time'));
    const stagedBig = await stageRun(big, timeReports, templates);
    const parquet = stagedBig.filter((e) => e.format === 'parquet');
    f.time_parquet_mb = round(parquet.reduce((n, e) => n + e.bytes, 0) / 1e6, 1);
    const old = await measured(() => concatAll(big, parquet));
    const now = await measured(() => publishRun(big, RUN, parquet));
    f.publish_parquet_concat_cpu_s = round(old.cpu, 2);
    f.publish_parquet_concat_wall_s = round(old.wall, 2);
    f.publish_parquet_regroup_cpu_s = round(now.cpu, 2);
    f.publish_parquet_regroup_wall_s = round(now.wall, 2);
    f.publish_regroup_over_concat_cpu = round(now.cpu / old.cpu, 1);
    // finish-run's share of a vCPU: Lambda gives one at 1,769 MB, in proportion below.
    const { FUNCTION_SETTINGS } = await import('../../infra/constructs/functions.js');
    const finish = FUNCTION_SETTINGS['finish-run'];
    f.finish_memory_mb = finish.memorySize;
    f.finish_timeout_s = finish.timeout.toSeconds();
    f.lambda_regroup_cpu_s = round((now.cpu * LAMBDA_MB_PER_VCPU) / finish.memorySize, 1);
    f.lambda_regroup_added_cpu_s = round(((now.cpu - old.cpu) * LAMBDA_MB_PER_VCPU) / finish.memorySize, 1);
    return f;
  } finally {
    await db.close();
    await rm(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.table(await benchRegroup(Number(process.argv[2] ?? 10_000), Number(process.argv[3] ?? 100_000)));
}
