/**
 * Benchmark: list items and reports → rows → Parquet (ours), against DuckDB converting the
 * same rows from NDJSON to Parquet (ZSTD), in the same process, rounds interleaved. Then the
 * encoders alone on the same columns: ours against hyparquet-writer's `parquetWriteBuffer`;
 * and concatenation (`ParquetConcat`) of per-unit files against a plain copy of their bytes.
 * Run directly: `npx tsx test/bench/encode.ts [reports]` (both data sources, one table).
 *
 * Sources: `simulator` (the API simulator's dataset, `mixed` report sizes: long and tricky
 * text) and `generator` (test/helpers/reports.ts: survey-shaped, repetitive text).
 */
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { constants as zlibConstants, zstdCompressSync } from 'node:zlib';
import { parquetWriteBuffer } from 'hyparquet-writer';
import {
  type CampaignItem,
  CampaignItemSchema,
  type JobItem,
  JobItemSchema,
  type Report,
  ReportSchema,
} from '../../shared/api/schemas.js';
import {
  appendReportRows,
  campaignRow,
  jobRow,
  type RowContext,
} from '../../shared/export/format/flatten.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import {
  type Cell,
  type Column,
  type ColumnType,
  FROZEN_TABLES,
  type Row,
  TABLE_NAMES,
  type TableDef,
  type TableName,
} from '../../shared/export/tables.js';
import { ParquetConcat } from '../../shared/parquet/concat.js';
import {
  encodeParquet,
  encodeParquetColumns,
  ROW_GROUP_ROWS,
  tableSchema,
} from '../../shared/parquet/encode.js';
import { openDuckDb } from '../helpers/duckdb.js';
import { realisticReports } from '../helpers/realistic-reports.js';
import { generateDataset } from '../simulator/index.js';

const DEFAULT_REPORTS = 1500;
const REPORTS_PER_CAMPAIGN = 50;
/** Timed rounds of each; the median counts. */
const ROUNDS = 7;
/** Reports per staged file, as export-reports batches them. */
const UNIT_REPORTS = 100;
/** Concatenations per timed round: one takes a few milliseconds, too short to time alone. */
const CONCAT_REPEATS = 20;

const DUCKDB_TYPES: Record<ColumnType, string> = {
  string: 'VARCHAR',
  int: 'INTEGER',
  bigint: 'BIGINT',
  boolean: 'BOOLEAN',
  timestamp: 'TIMESTAMPTZ',
  'array<string>': 'VARCHAR[]',
};

interface Input {
  campaigns: CampaignItem[];
  jobs: { item: JobItem; campaignId: number }[];
  reports: { report: Report; campaignId: number; jobId: number }[];
}

/** The simulator's dataset: published reports (parsed as the exporter would), their listings. */
function fromSimulator(count: number): Input {
  const campaigns = Math.ceil(count / (REPORTS_PER_CAMPAIGN * 0.85)); // ~15% of jobs have no report
  const dataset = generateDataset({
    seed: 20261122,
    campaigns,
    jobsPerCampaign: REPORTS_PER_CAMPAIGN,
    reportSize: 'mixed',
  });
  const input: Input = { campaigns: [], jobs: [], reports: [] };
  for (const campaign of dataset.campaigns) {
    input.campaigns.push(CampaignItemSchema.parse(campaign.item));
    for (const job of campaign.jobs) {
      input.jobs.push({ item: JobItemSchema.parse(job.item), campaignId: campaign.id });
      if (job.state !== 'published' || job.invalid || job.forbidden || input.reports.length >= count)
        continue;
      input.reports.push({
        report: ReportSchema.parse(dataset.reportOf(job.id)),
        campaignId: campaign.id,
        jobId: job.id,
      });
    }
  }
  return input;
}

function fromGenerator(count: number): Input {
  const gen = realisticReports(20261122);
  const input: Input = { campaigns: [], jobs: [], reports: [] };
  for (let i = 0; i < count; i++) {
    const campaignId = 1 + Math.floor(i / REPORTS_PER_CAMPAIGN);
    const jobId = 3_000_000_000 + i; // above 2^31: ids are BIGINT
    if (i % REPORTS_PER_CAMPAIGN === 0) {
      input.campaigns.push({
        id: campaignId,
        campaign_name: `Campaign ${campaignId}`,
        campaign_status: 'active',
        start_date: '2026-01-01',
        end_date: null,
        completed_at: null,
        created_at: '2025-12-01T10:00:00Z',
        budget: { amount: 1200, currency: 'EUR' },
      });
    }
    const report = gen.report(jobId, campaignId);
    input.jobs.push({
      item: {
        id: jobId,
        job_status: report.job.job_status,
        job_score_percentage: report.job.job_score_percentage,
      },
      campaignId,
    });
    input.reports.push({ report, campaignId, jobId });
  }
  return input;
}

/** Ours: flatten every item into a columnar buffer, then encode every table. */
function transformAndEncode(input: Input, ctx: RowContext): { rows: number; bytes: number } {
  const buffer = new TableBuffer();
  for (const c of input.campaigns) buffer.add('campaigns', campaignRow(c, ctx));
  for (const j of input.jobs) buffer.add('jobs', jobRow(j.item, j.campaignId, ctx));
  for (const r of input.reports) appendReportRows(buffer, r.report, r, ctx);
  let rows = 0;
  let bytes = 0;
  for (const table of TABLE_NAMES) {
    if (buffer.rowCount(table) === 0) continue; // a table without rows gets no file
    rows += buffer.rowCount(table);
    bytes += encodeParquetColumns(FROZEN_TABLES[table], buffer.columns(table)).byteLength;
  }
  return { rows, bytes };
}

/** The rows of `input` flattened once, column by column, per table. */
function flatten(input: Input, ctx: RowContext): TableBuffer {
  const buffer = new TableBuffer();
  for (const c of input.campaigns) buffer.add('campaigns', campaignRow(c, ctx));
  for (const j of input.jobs) buffer.add('jobs', jobRow(j.item, j.campaignId, ctx));
  for (const r of input.reports) appendReportRows(buffer, r.report, r, ctx);
  return buffer;
}

const ZSTD_LEVEL_3 = { params: { [zlibConstants.ZSTD_c_compressionLevel]: 3 } };

/**
 * hyparquet-writer's own encoder on the same columns and schema, with the same codec (ZSTD
 * level 3) and row group size, its other options at their defaults (statistics, offset
 * indexes, data page V2). INT64 cells become BigInt first, as its API requires.
 */
function hyparquetWriterEncode(table: TableDef, columns: readonly (readonly Cell[])[]): number {
  const bytes = parquetWriteBuffer({
    schema: tableSchema(table),
    columnData: table.columns.map((column, i) => ({
      name: column.name,
      data:
        column.type === 'bigint'
          ? columns[i]!.map((v) => (v === null ? null : BigInt(v as number)))
          : (columns[i] as Cell[]),
    })),
    codec: 'ZSTD',
    compressors: { ZSTD: (b: Uint8Array) => new Uint8Array(zstdCompressSync(b, ZSTD_LEVEL_3)) },
    rowGroupSize: ROW_GROUP_ROWS,
  });
  return bytes.byteLength;
}

/** Both encoders alone (rows already flattened), every table, rounds interleaved. */
function benchEncoders(buffer: TableBuffer): Record<string, number> {
  const tables = TABLE_NAMES.filter((t) => buffer.rowCount(t) > 0);
  const ours = () =>
    tables.reduce((n, t) => n + encodeParquetColumns(FROZEN_TABLES[t], buffer.columns(t)).length, 0);
  const theirs = () =>
    tables.reduce((n, t) => n + hyparquetWriterEncode(FROZEN_TABLES[t], buffer.columns(t)), 0);
  const oursBytes = ours();
  const theirBytes = theirs();
  const oursMs: number[] = [];
  const theirMs: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    let t = performance.now();
    ours();
    oursMs.push(performance.now() - t);
    t = performance.now();
    theirs();
    theirMs.push(performance.now() - t);
  }
  return {
    encode_only_ms: Math.round(median(oursMs)),
    hyparquet_writer_ms: Math.round(median(theirMs)),
    hyparquet_writer_vs_ours: Number((median(theirMs) / median(oursMs)).toFixed(2)),
    encode_only_kb: Math.round(oursBytes / 1024),
    hyparquet_writer_kb: Math.round(theirBytes / 1024),
  };
}

/**
 * Concatenation of per-unit files (one per table per {@link UNIT_REPORTS} reports, as staged)
 * into one output buffer per table, against `Buffer.concat` of the same files: the price of
 * reading the footers and writing one.
 */
function benchConcat(input: Input, ctx: RowContext): Record<string, number> {
  const files = new Map<TableName, Uint8Array[]>();
  for (let from = 0; from < input.reports.length; from += UNIT_REPORTS) {
    const unit = new TableBuffer();
    for (const r of input.reports.slice(from, from + UNIT_REPORTS)) appendReportRows(unit, r.report, r, ctx);
    for (const t of TABLE_NAMES) {
      if (unit.rowCount(t) > 0) files.set(t, [...(files.get(t) ?? []), unit.encode(t)]);
    }
  }
  let totalBytes = 0;
  for (const list of files.values()) for (const f of list) totalBytes += f.length;
  const concatenate = () => {
    for (const list of files.values()) {
      const concat = new ParquetConcat();
      const chunks = [concat.start(), ...list.map((f) => concat.append(f)), concat.finish()];
      Buffer.concat(chunks);
    }
  };
  const copy = () => {
    for (const list of files.values()) Buffer.concat(list);
  };
  concatenate();
  copy();
  const concatMs: number[] = [];
  const copyMs: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    let t = performance.now();
    for (let k = 0; k < CONCAT_REPEATS; k++) concatenate();
    concatMs.push((performance.now() - t) / CONCAT_REPEATS);
    t = performance.now();
    for (let k = 0; k < CONCAT_REPEATS; k++) copy();
    copyMs.push((performance.now() - t) / CONCAT_REPEATS);
  }
  const mbPerS = (ms: number) => Math.round(totalBytes / 1024 / 1024 / (ms / 1000));
  let count = 0;
  for (const list of files.values()) count += list.length;
  return {
    concat_files: count,
    concat_input_kb: Math.round(totalBytes / 1024),
    concat_ms: Number(median(concatMs).toFixed(2)),
    copy_ms: Number(median(copyMs).toFixed(2)),
    concat_mb_per_s: mbPerS(median(concatMs)),
    copy_mb_per_s: mbPerS(median(copyMs)),
  };
}

/** The rows DuckDB converts: the same rows, as NDJSON per table (Dates as ISO text). */
async function writeNdjson(input: Input, ctx: RowContext, dir: string): Promise<Map<TableName, string>> {
  const buffer = new TableBuffer();
  for (const c of input.campaigns) buffer.add('campaigns', campaignRow(c, ctx));
  for (const j of input.jobs) buffer.add('jobs', jobRow(j.item, j.campaignId, ctx));
  for (const r of input.reports) appendReportRows(buffer, r.report, r, ctx);
  const sources = new Map<TableName, string>();
  for (const table of TABLE_NAMES) {
    const names = FROZEN_TABLES[table].columns.map((c) => c.name);
    const columns = buffer.columns(table);
    const lines: string[] = [];
    for (let r = 0; r < buffer.rowCount(table); r++) {
      lines.push(JSON.stringify(Object.fromEntries(names.map((name, c) => [name, columns[c]![r]]))));
    }
    const path = join(dir, `${table}.ndjson`);
    await writeFile(path, `${lines.join('\n')}\n`);
    sources.set(table, path);
  }
  return sources;
}

/** Wall-clock and CPU milliseconds (all threads of the process: DuckDB's too) of `work`. */
async function timed(work: () => unknown): Promise<{ wall: number; cpu: number }> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - start, cpu: (used.user + used.system) / 1000 };
}

/** The same, with rows kept as objects per table and encoded by `encodeParquet` (writer.ts's path). */
function transformAndEncodeRows(input: Input, ctx: RowContext): void {
  const tables = new Map<TableName, Row[]>(TABLE_NAMES.map((t) => [t, []]));
  const sink = { add: (table: TableName, row: Row) => tables.get(table)!.push(row) };
  for (const c of input.campaigns) sink.add('campaigns', campaignRow(c, ctx));
  for (const j of input.jobs) sink.add('jobs', jobRow(j.item, j.campaignId, ctx));
  for (const r of input.reports) appendReportRows(sink, r.report, r, ctx);
  for (const [table, rows] of tables) if (rows.length > 0) encodeParquet(FROZEN_TABLES[table], rows);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const columnsClause = (columns: readonly Column[]) =>
  `{${columns.map((c) => `'${c.name}': '${DUCKDB_TYPES[c.type]}'`).join(', ')}}`;

export interface BenchOptions {
  /** How many reports (default 1500). */
  reports?: number;
  /** Where they come from (default the simulator). */
  source?: 'simulator' | 'generator';
}

/**
 * Times both pipelines on the same reports; returns the figures (rows/s of each, their ratio).
 */
export async function benchEncode(options: BenchOptions = {}): Promise<Record<string, number>> {
  const reportCount = options.reports ?? DEFAULT_REPORTS;
  const input = options.source === 'generator' ? fromGenerator(reportCount) : fromSimulator(reportCount);
  const ctx: RowContext = { runId: 'bench-run', exportedAt: new Date('2026-11-22T03:00:00.000Z') };

  const db = await openDuckDb();
  try {
    const sources = await writeNdjson(input, ctx, db.dir);
    const duckdbRound = async (round: number) => {
      for (const table of TABLE_NAMES) {
        await db.all(
          `COPY (SELECT * FROM read_json('${sources.get(table)}', format = 'newline_delimited',
             columns = ${columnsClause(FROZEN_TABLES[table].columns)}))
           TO '${join(db.dir, `${table}-${round}.parquet`)}' (FORMAT parquet, COMPRESSION zstd)`,
        );
      }
    };

    // Warm-up of both (JIT, DuckDB's caches), then rounds interleaved so both see the same load.
    let result = transformAndEncode(input, ctx);
    await duckdbRound(0);
    transformAndEncodeRows(input, ctx);
    const ours: { wall: number; cpu: number }[] = [];
    const oursRows: { wall: number; cpu: number }[] = [];
    const duck: { wall: number; cpu: number }[] = [];
    for (let i = 1; i <= ROUNDS; i++) {
      ours.push(
        await timed(() => {
          result = transformAndEncode(input, ctx);
        }),
      );
      duck.push(await timed(() => duckdbRound(i)));
      oursRows.push(await timed(() => transformAndEncodeRows(input, ctx)));
    }
    let duckBytes = 0;
    for (const table of TABLE_NAMES) duckBytes += (await stat(join(db.dir, `${table}-1.parquet`))).size;

    const oursMs = median(ours.map((t) => t.wall));
    const duckMs = median(duck.map((t) => t.wall));
    const oursRowsPerSec = result.rows / (oursMs / 1000);
    const duckRowsPerSec = result.rows / (duckMs / 1000);
    return {
      reports: input.reports.length,
      rows: result.rows,
      ours_ms: Math.round(oursMs),
      duckdb_ms: Math.round(duckMs),
      ours_rows_per_s: Math.round(oursRowsPerSec),
      duckdb_rows_per_s: Math.round(duckRowsPerSec),
      ratio: Number((oursRowsPerSec / duckRowsPerSec).toFixed(2)),
      ours_cpu_ms: Math.round(median(ours.map((t) => t.cpu))),
      ours_row_objects_ms: Math.round(median(oursRows.map((t) => t.wall))),
      duckdb_cpu_ms: Math.round(median(duck.map((t) => t.cpu))),
      ours_kb: Math.round(result.bytes / 1024),
      duckdb_kb: Math.round(duckBytes / 1024),
      ...benchEncoders(flatten(input, ctx)),
      ...benchConcat(input, ctx),
    };
  } finally {
    await db.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const reports = Number(process.argv[2] ?? DEFAULT_REPORTS);
  console.table({
    simulator: await benchEncode({ reports, source: 'simulator' }),
    generator: await benchEncode({ reports, source: 'generator' }),
  });
}
