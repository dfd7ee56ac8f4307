/**
 * A run's complete state in storage, synthesized as the real steps leave it just before
 * finish-run: the run record (start-run), a plan record per campaign (plan-campaign), a unit
 * summary per unit of 100 reports (export-reports), and every file they staged, under the keys
 * `STATE_KEYS` and `stageStep` give them. For the scale bench (scale.ts).
 *
 * The publish bench's method: TEMPLATE_UNITS units of realistic reports are generated once.
 * - `repeat` (Hive's default): each template unit is encoded once with `stageStep` and its bytes
 *   are staged again under the keys of every unit that uses it. Cheap (a 1M run stages in
 *   minutes), but the rows carry the template's job ids: Hive's publish never reads them.
 * - `per-unit` (Iceberg's default): every unit's Parquet is encoded from the template reports
 *   with the unit's own job and campaign ids (~45 ms a unit), because the `_current` commit
 *   reads those ids and supersedes rows by them. Raw files are the template's bytes either way
 *   (nothing in finishing parses them), encoded for real only for a partial unit.
 * Jobs snapshots (one per campaign, every listed job) and the campaigns snapshot are encoded
 * for real. Campaigns hold 500-5,000 jobs, multiples of the unit size, drawn from a seeded
 * generator, so a size gives the same campaigns every time.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Report } from '../../shared/api/schemas.js';
import { appendReportRows, campaignRow, jobRow } from '../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import { mapPool } from '../../shared/export/run/pool.js';
import { stageStep, stageTables } from '../../shared/export/run/staging.js';
import { fingerprint } from '../../shared/export/state/fingerprint.js';
import {
  encodeRecord,
  type FileEntry,
  type PlanRecord,
  type RequestCounts,
  type RunRecord,
  type RunRef,
  type UnitJob,
  type UnitSummary,
} from '../../shared/export/state/records.js';
import { type RawEntity, REPORT_TABLES, type TableName } from '../../shared/export/tables.js';
import { STATE_KEYS, stagedParquetKey, stagedRawKey } from '../../shared/layout.js';
import { LocalStorage } from '../../shared/storage/local.js';
import type { Storage } from '../../shared/storage/storage.js';
import { realisticReports } from '../helpers/realistic-reports.js';

export const UNIT_REPORTS = 100;
/** Distinct template units; a run's unit g uses template g mod this. */
const TEMPLATE_UNITS = 20;
const MIN_CAMPAIGN_JOBS = 500;
const MAX_CAMPAIGN_JOBS = 5_000;
const FIRST_JOB_ID = 4_000_000_000;
/** Objects written at once while staging (the parent's writes, not measured). */
const PUT_CONCURRENCY = 16;
/** Campaigns staged at once (their units one after another). */
const CAMPAIGN_CONCURRENCY = 4;
/** Jobs listed per page of the API's job listing: a plan's requests. */
const LIST_PAGE = 100;

export type Encoding = 'repeat' | 'per-unit';

/** The reports of one template unit and its encoded staged files (for `repeat`), per table format. */
interface Template {
  reports: Report[];
  /** The raw JSON Lines file of the unit (100 lines), gzip, as export-reports stages it. */
  raw: Uint8Array;
  /** Rows per table of the unit. */
  rows: Partial<Record<TableName, number>>;
  /** `repeat`: the unit's staged Parquet files' bytes, by table. */
  parquet: Map<TableName, Uint8Array>;
}

export interface Templates {
  run: RunRef;
  units: Template[];
}

const requests = (n: number): RequestCounts => ({ total: n, retried: 0, by_status: { '200': n } });
const hex = (n: number, width: number) => n.toString(16).padStart(width, '0').slice(-width);

/** Generates and encodes the template units for `run` (its table format sets the Parquet schema). */
export async function makeTemplates(run: RunRef): Promise<Templates> {
  const gen = realisticReports(20261201);
  const exportedAt = new Date(`${run.dt}T03:15:00Z`);
  const units: Template[] = [];
  for (let u = 0; u < TEMPLATE_UNITS; u++) {
    const reports: Report[] = [];
    const rows = new TableBuffer(run);
    const lines = new JsonLinesBuffer();
    for (let i = 0; i < UNIT_REPORTS; i++) {
      const jobId = FIRST_JOB_ID + u * UNIT_REPORTS + i;
      const report = gen.report(jobId, 1);
      reports.push(report);
      lines.add({
        run_id: run.run_id,
        fetched_at: exportedAt.toISOString(),
        campaign_id: 1,
        job_id: jobId,
        data: report,
      });
      appendReportRows(rows, report, { campaignId: 1, jobId }, { runId: run.run_id, exportedAt });
    }
    const parquet = new Map<TableName, Uint8Array>();
    const counts: Template['rows'] = {};
    for (const table of REPORT_TABLES) {
      if (rows.rowCount(table) === 0) continue;
      counts[table] = rows.rowCount(table);
      parquet.set(table, rows.encode(table));
    }
    units.push({ reports, raw: lines.encodeGzip(), rows: counts, parquet });
  }
  return { run, units };
}

/** One campaign of a synthesized run: its id and its listed jobs' ids. */
export interface Campaign {
  id: number;
  jobs: number[];
}

/** The campaigns of a run of `reports` reports: 500-5,000 jobs each (multiples of 100), seeded. */
export function campaignsOf(reports: number): Campaign[] {
  let state = 0x5ca1e;
  const rand = () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const units = { min: MIN_CAMPAIGN_JOBS / UNIT_REPORTS, max: MAX_CAMPAIGN_JOBS / UNIT_REPORTS };
  const campaigns: Campaign[] = [];
  let next = 0;
  while (next < reports) {
    const size = Math.min(
      reports - next,
      UNIT_REPORTS * (units.min + Math.floor(rand() * (units.max - units.min + 1))),
    );
    campaigns.push({
      id: campaigns.length + 1,
      jobs: Array.from({ length: size }, (_, i) => FIRST_JOB_ID + next + i),
    });
    next += size;
  }
  return campaigns;
}

/** What a synthesized run holds: the figures its manifest and published files must show. */
export interface Synthesized {
  campaigns: number;
  jobs: number;
  exported: number;
  unchanged: number;
  units: number;
  /** Staged rows per table (Parquet) and per raw entity (`raw:<entity>`). */
  rows: Record<string, number>;
  stagedFiles: number;
  stagedBytes: number;
  /** API requests the records count (the manifest's `requests.total`). */
  requests: number;
  /** Records written: run, plans, units. */
  records: number;
}

export interface SynthesizeOptions {
  reports: number;
  encoding: Encoding;
  /**
   * Which listed jobs the run fetches (the rest are unchanged, in the plan's `unchanged`): every
   * job for a full run; every `1 / share`-th for an incremental run over a lake (`share` 0.01).
   */
  share: number;
  /**
   * Where an incremental run's changed jobs are (`share < 1`): `spread`, every `1 / share`-th job
   * of every campaign (the default); `recent`, the newest `share` of the job ids (the last
   * campaigns'), as when the jobs that change are the ones published since the last run.
   */
  pick?: 'spread' | 'recent';
  startedAt: Date;
}

/** Writes a run's records and staged files into `storage` as the steps before finish-run leave them. */
export async function synthesizeRun(
  storage: Storage,
  t: Templates,
  options: SynthesizeOptions,
): Promise<Synthesized> {
  const { run } = t;
  const exportedAt = new Date(`${run.dt}T03:15:00Z`);
  const ctx = { runId: run.run_id, exportedAt };
  const campaigns = campaignsOf(options.reports);
  const every = Math.round(1 / options.share);
  // `recent`: the jobs from this id on changed (ids are given in campaign order, FIRST_JOB_ID up).
  const newestFrom =
    options.pick === 'recent' && options.share < 1
      ? FIRST_JOB_ID + options.reports - Math.round(options.reports * options.share)
      : undefined;
  const isChanged = (id: number, i: number) =>
    newestFrom === undefined ? i % every === 0 : id >= newestFrom;
  const out: Synthesized = {
    campaigns: campaigns.length,
    jobs: 0,
    exported: 0,
    unchanged: 0,
    units: 0,
    rows: {},
    stagedFiles: 0,
    stagedBytes: 0,
    requests: 0,
    records: 0,
  };
  const count = (files: FileEntry[]) => {
    for (const f of files) {
      const name = f.format === 'parquet' ? f.table_or_entity : `raw:${f.table_or_entity}`;
      out.rows[name] = (out.rows[name] ?? 0) + f.rows;
      out.stagedFiles++;
      out.stagedBytes += f.bytes;
    }
    return files;
  };
  const putRecord = async (key: string, record: unknown) => {
    out.records++;
    await storage.put(key, encodeRecord(record));
  };
  // The fingerprint of a job's list item: an incremental run's changed jobs have a new status.
  const fp = (id: number, status: number) => fingerprint({ id, job_status: status });
  const status = options.share < 1 ? 5 : 4;

  // start-run: the campaigns snapshot and the run record.
  const campaignRows = new TableBuffer(run);
  const campaignLines = new JsonLinesBuffer();
  for (const c of campaigns) {
    const item = {
      id: c.id,
      campaign_name: `Campaign ${c.id}`,
      campaign_status: 'active',
      start_date: '2026-01-01',
      end_date: null,
      completed_at: null,
      created_at: '2025-12-01T10:00:00Z',
    };
    campaignLines.add({ run_id: run.run_id, fetched_at: exportedAt.toISOString(), data: item });
    campaignRows.add('campaigns', campaignRow(item, ctx));
  }
  const startRequests = 1 + Math.ceil(campaigns.length / LIST_PAGE);
  const record: RunRecord = {
    ...run,
    driver: 'queues',
    started_at: options.startedAt.toISOString(),
    campaign_ids: campaigns.map((c) => c.id),
    campaigns_invalid: 0,
    duplicates: 0,
    company_name: 'Scale Bench Co',
    staged: count(
      await stageStep(storage, run.run_id, 'campaigns', 'campaigns', campaignRows, campaignLines),
    ),
    requests: requests(startRequests),
  };
  out.requests += startRequests;

  // The run's units are numbered in campaign order; unit g uses template g mod TEMPLATE_UNITS,
  // whatever order the campaigns are staged in, so a size always stages the same rows.
  const firstUnit = new Map<number, number>();
  let units = 0;
  for (const c of campaigns) {
    firstUnit.set(c.id, units);
    units += Math.ceil(c.jobs.filter(isChanged).length / UNIT_REPORTS);
  }
  await mapPool(campaigns, CAMPAIGN_CONCURRENCY, async (c) => {
    let g = firstUnit.get(c.id)!;
    // plan-campaign: the jobs snapshot, the fetch list cut into units, the plan record.
    const rows = new TableBuffer(run);
    const lines = new JsonLinesBuffer();
    const fetch: UnitJob[] = [];
    const unchanged: UnitJob[] = [];
    c.jobs.forEach((id, i) => {
      const changed = isChanged(id, i);
      const item = { id, job_status: changed ? status : 4, job_score_percentage: '87.5' };
      lines.add({ run_id: run.run_id, fetched_at: exportedAt.toISOString(), data: item });
      rows.add('jobs', jobRow(item, c.id, ctx));
      (changed ? fetch : unchanged).push({ job_id: id, fp: fp(id, item.job_status) });
    });
    const jobsStaged = count(
      await stageStep(storage, run.run_id, 'jobs', `c${c.id}-${hex(c.id, 8)}`, rows, lines),
    );
    const units: string[] = [];
    for (let u = 0; u * UNIT_REPORTS < fetch.length; u++) {
      const jobs = fetch.slice(u * UNIT_REPORTS, (u + 1) * UNIT_REPORTS);
      const unit = `c${c.id}-u${u}`;
      units.push(unit);
      const template = t.units[g++ % TEMPLATE_UNITS]!;
      const staged = count(
        await stageUnit(storage, t, template, c.id, unit, jobs, options.encoding, exportedAt),
      );
      const summary: UnitSummary = {
        unit,
        campaign_id: c.id,
        attempt: 1,
        jobs: Object.fromEntries(
          jobs.map((j) => [String(j.job_id), { fp: j.fp, outcome: 'exported' as const }]),
        ),
        staged,
        requests: requests(jobs.length),
      };
      out.requests += jobs.length;
      await putRecord(STATE_KEYS.unit(run.run_id, unit), summary);
    }
    const planRequests = Math.ceil(c.jobs.length / LIST_PAGE);
    const plan: PlanRecord = {
      campaign_id: c.id,
      jobs: c.jobs.length,
      units,
      fetch,
      unit_size: UNIT_REPORTS,
      unchanged,
      jobs_invalid: 0,
      duplicates: 0,
      requests: requests(planRequests),
      campaign_gone: false,
      staged: jobsStaged,
    };
    out.requests += planRequests;
    out.jobs += c.jobs.length;
    out.exported += fetch.length;
    out.unchanged += unchanged.length;
    out.units += units.length;
    await putRecord(STATE_KEYS.plan(run.run_id, c.id), plan);
  });
  // Last, as start-run's whole record replaces its first one before any plan is written: the
  // order does not matter to finish-run, which reads them all.
  await putRecord(STATE_KEYS.runRecord(run.run_id), record);
  return out;
}

/** Stages one unit's files as export-reports would (stem `<unit>-a1-<hex>`); returns its file entries. */
async function stageUnit(
  storage: Storage,
  t: Templates,
  template: Template,
  campaignId: number,
  unit: string,
  jobs: readonly UnitJob[],
  encoding: Encoding,
  exportedAt: Date,
): Promise<FileEntry[]> {
  const { run } = t;
  const stem = `${unit}-a1-${hex(jobs[0]!.job_id, 8)}`;
  const files: FileEntry[] = [];
  const full = jobs.length === UNIT_REPORTS;
  if (full) {
    const key = stagedRawKey(run.run_id, 'reports' as RawEntity, stem);
    await storage.put(key, template.raw);
    files.push({
      key,
      table_or_entity: 'reports',
      format: 'jsonl',
      rows: UNIT_REPORTS,
      bytes: template.raw.byteLength,
    });
  } else {
    const lines = new JsonLinesBuffer();
    jobs.forEach((j, i) => {
      lines.add({
        run_id: run.run_id,
        fetched_at: exportedAt.toISOString(),
        campaign_id: campaignId,
        job_id: j.job_id,
        data: template.reports[i],
      });
    });
    const key = stagedRawKey(run.run_id, 'reports' as RawEntity, stem);
    const body = lines.encodeGzip();
    await storage.put(key, body);
    files.push({
      key,
      table_or_entity: 'reports',
      format: 'jsonl',
      rows: jobs.length,
      bytes: body.byteLength,
    });
  }
  if (encoding === 'repeat' && full) {
    const puts = [...template.parquet].map(async ([table, body]) => {
      const key = stagedParquetKey(run.run_id, table, stem);
      await storage.put(key, body);
      return {
        key,
        table_or_entity: table,
        format: 'parquet' as const,
        rows: template.rows[table]!,
        bytes: body.byteLength,
      };
    });
    return [...files, ...(await Promise.all(puts))];
  }
  const rows = new TableBuffer(run);
  jobs.forEach((j, i) => {
    const r = template.reports[i]!;
    const report = { ...r, job: { ...r.job, id: j.job_id, campaign: { ...r.job.campaign, id: campaignId } } };
    appendReportRows(rows, report, { campaignId, jobId: j.job_id }, { runId: run.run_id, exportedAt });
  });
  return [...files, ...(await stageTables(storage, run.run_id, stem, rows))];
}

/** Copies every object under `prefix` from one storage to another (a folder's run into S3). */
export async function copyPrefix(from: Storage, to: Storage, prefix: string): Promise<number> {
  const keys: string[] = [];
  for await (const key of from.list(prefix)) keys.push(key);
  await mapPool(keys, PUT_CONCURRENCY, async (key) => {
    const found = await from.get(key);
    if (found) await to.put(key, found.body);
  });
  return keys.length;
}

/**
 * A folder for staging a synthesized run fast: `put` writes the file without the local
 * adapter's fsync and key lock (nothing else writes it meanwhile, and nothing here must survive
 * a crash); everything else is `LocalStorage`'s. The finisher reads it with `LocalStorage`.
 */
export function fastFolder(root: string): Storage {
  const local = new LocalStorage(root);
  return {
    location: local.location,
    async put(key, body) {
      const path = join(local.location, ...key.split('/'));
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, body);
      return { etag: '' };
    },
    putStream: (key, chunks) => local.putStream(key, chunks),
    get: (key) => local.get(key),
    getStream: (key) => local.getStream(key),
    list: (prefix) => local.list(prefix),
    delete: (keys) => local.delete(keys),
    stats: () => local.stats(),
  };
}
