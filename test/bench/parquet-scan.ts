/**
 * Benchmark: what a run's published Parquet should look like for readers. A realistic run
 * (20,000 survey-shaped reports) is flattened and encoded in units of 100 reports, one file
 * per table per unit, as export-reports stages them. Then, per table:
 *   (a) concat   — the units' files concatenated (`ParquetConcat`: small row groups, copied);
 *   (b) reencode — all rows encoded again into one file with large row groups (≥ 131,072 rows);
 *   (c) units    — the staged files left as they are (a glob of many small files), for scale.
 * DuckDB runs the same queries over each (a full-scan aggregate, a selective filter on job_id,
 * a filter on run_id that matches nothing), rounds interleaved; medians are reported.
 * Run directly: `npx tsx test/bench/parquet-scan.ts [reports]`.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { zstdDecompressSync } from 'node:zlib';
import { parquetRead } from 'hyparquet';
import { appendReportRows, type RowContext } from '../../shared/export/format/flatten.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import { FROZEN_TABLES, REPORT_TABLES, type ReportTableName, type Row } from '../../shared/export/tables.js';
import { ParquetConcat } from '../../shared/parquet/concat.js';
import { ColumnBuffer, encodeParquetColumns, ROW_GROUP_ROWS } from '../../shared/parquet/encode.js';
import { type DuckDb, openDuckDb } from '../helpers/duckdb.js';
import { realisticReports } from '../helpers/realistic-reports.js';

const DEFAULT_REPORTS = 20_000;
/** Reports per staged file, as export-reports batches them. */
const UNIT_REPORTS = 100;
const REPORTS_PER_CAMPAIGN = 50;
/** Timed rounds of every query on every layout; the median counts. */
const ROUNDS = 7;
const FIRST_JOB_ID = 3_000_000_000; // above 2^31: ids are BIGINT
const RUN_ID = '20261122T031500Z-a1b2c3';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The staged unit files per table, and the same rows re-encoded in large row groups. */
interface Run {
  units: Map<ReportTableName, Uint8Array[]>;
  /** One-row-group files of ≥ ROW_GROUP_ROWS rows (the last one smaller), to concatenate. */
  large: Map<ReportTableName, Uint8Array[]>;
  unitEncodeMs: number;
  reencodeMs: number;
}

/** Flattens and encodes the run; rows also go to one large buffer per table, encoded when full. */
function buildRun(reports: number, ctx: RowContext): Run {
  const gen = realisticReports(20261122);
  const units = new Map<ReportTableName, Uint8Array[]>(REPORT_TABLES.map((t) => [t, []]));
  const large = new Map<ReportTableName, Uint8Array[]>(REPORT_TABLES.map((t) => [t, []]));
  const big = new Map(REPORT_TABLES.map((t) => [t, new ColumnBuffer(FROZEN_TABLES[t])]));
  let unitEncodeMs = 0;
  let reencodeMs = 0;
  const flush = (t: ReportTableName, min: number) => {
    const buffer = big.get(t)!;
    if (buffer.rowCount === 0 || buffer.rowCount < min) return;
    const start = performance.now();
    large
      .get(t)!
      .push(encodeParquetColumns(FROZEN_TABLES[t], buffer.columns, { rowGroupRows: buffer.rowCount }));
    reencodeMs += performance.now() - start;
    big.set(t, new ColumnBuffer(FROZEN_TABLES[t]));
  };
  for (let from = 0; from < reports; from += UNIT_REPORTS) {
    const unit = new TableBuffer();
    const sink = {
      add(table: ReportTableName | 'campaigns' | 'jobs', row: Row) {
        unit.add(table, row);
        if (table !== 'campaigns' && table !== 'jobs') big.get(table)!.add(row);
      },
    };
    for (let i = from; i < Math.min(reports, from + UNIT_REPORTS); i++) {
      const jobId = FIRST_JOB_ID + i;
      const campaignId = 1 + Math.floor(i / REPORTS_PER_CAMPAIGN);
      appendReportRows(sink, gen.report(jobId, campaignId), { campaignId, jobId }, ctx);
    }
    const start = performance.now();
    for (const t of REPORT_TABLES) if (unit.rowCount(t) > 0) units.get(t)!.push(unit.encode(t));
    unitEncodeMs += performance.now() - start;
    for (const t of REPORT_TABLES) flush(t, ROW_GROUP_ROWS);
  }
  for (const t of REPORT_TABLES) flush(t, 0);
  return { units, large, unitEncodeMs, reencodeMs };
}

function concatenate(files: readonly Uint8Array[]): Uint8Array {
  const concat = new ParquetConcat();
  return Buffer.concat([concat.start(), ...files.map((f) => concat.append(f)), concat.finish()]);
}

/** Milliseconds hyparquet takes to decode `files` (columns, not row objects): the read half of re-encoding at publish. */
async function decodeMs(files: readonly Uint8Array[]): Promise<number> {
  const start = performance.now();
  for (const f of files) {
    const file = f.buffer.slice(f.byteOffset, f.byteOffset + f.byteLength) as ArrayBuffer;
    await parquetRead({
      file,
      compressors: { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) },
      onChunk: () => undefined,
    });
  }
  return performance.now() - start;
}

async function rowGroups(db: DuckDb, path: string): Promise<number> {
  const rows = await db.all(`SELECT count(*)::INT AS n FROM parquet_metadata('${path}') WHERE column_id = 0`);
  return Number(rows[0]?.n);
}

/**
 * Builds the run, publishes it both ways, and times DuckDB's queries over each layout of the
 * questions table. Returns sizes, row groups, publish costs and median query times.
 */
export async function benchParquetScan(reports = DEFAULT_REPORTS): Promise<Record<string, number>> {
  const ctx: RowContext = { runId: RUN_ID, exportedAt: new Date('2026-11-22T03:15:00.000Z') };
  const run = buildRun(reports, ctx);
  const db = await openDuckDb();
  try {
    const figures: Record<string, number> = { reports, unit_encode_ms: Math.round(run.unitEncodeMs) };
    let concatMs = 0;
    const paths = new Map<ReportTableName, { concat: string; reencode: string; units: string[] }>();
    for (const t of REPORT_TABLES) {
      const units = run.units.get(t)!;
      const start = performance.now();
      const concatenated = concatenate(units);
      concatMs += performance.now() - start;
      const reencoded = concatenate(run.large.get(t)!);
      const p = {
        concat: join(db.dir, `${t}-concat.parquet`),
        reencode: join(db.dir, `${t}-reencode.parquet`),
        units: units.map((_, i) => join(db.dir, `${t}-unit-${i}.parquet`)),
      };
      await writeFile(p.concat, concatenated);
      await writeFile(p.reencode, reencoded);
      if (t === 'questions') await Promise.all(units.map((u, i) => writeFile(p.units[i]!, u)));
      paths.set(t, p);
      const rowCount = await db.all(`SELECT count(*)::INT AS n FROM read_parquet('${p.concat}')`);
      figures[`${t}_rows`] = Number(rowCount[0]?.n);
      figures[`${t}_units_kb`] = Math.round(units.reduce((n, u) => n + u.length, 0) / 1024);
      figures[`${t}_concat_kb`] = Math.round(concatenated.length / 1024);
      figures[`${t}_reencode_kb`] = Math.round(reencoded.length / 1024);
      figures[`${t}_concat_row_groups`] = await rowGroups(db, p.concat);
      figures[`${t}_reencode_row_groups`] = await rowGroups(db, p.reencode);
    }
    figures.publish_concat_ms = Math.round(concatMs);
    figures.publish_reencode_encode_ms = Math.round(run.reencodeMs);
    figures.publish_reencode_decode_questions_ms = Math.round(await decodeMs(run.units.get('questions')!));

    // Queries on questions, the largest table. The job sits mid-run; the run_id is another run's.
    const q = paths.get('questions')!;
    const layouts = {
      concat: `read_parquet('${q.concat}')`,
      reencode: `read_parquet('${q.reencode}')`,
      units: `read_parquet([${q.units.map((u) => `'${u}'`).join(', ')}])`,
    };
    const job = FIRST_JOB_ID + Math.floor(reports * 0.6173);
    const queries = {
      scan: (from: string) => `SELECT count(*), count(DISTINCT job_id), max(length(question)) FROM ${from}`,
      job: (from: string) => `SELECT count(*), max(length(comment)) FROM ${from} WHERE job_id = ${job}`,
      run: (from: string) => `SELECT count(*) FROM ${from} WHERE run_id = '20261121T031500Z-ffffff'`,
    };
    const times = new Map<string, number[]>();
    for (let round = 0; round <= ROUNDS; round++) {
      for (const [qName, sql] of Object.entries(queries)) {
        for (const [lName, from] of Object.entries(layouts)) {
          const start = performance.now();
          await db.all(sql(from));
          const ms = performance.now() - start;
          if (round === 0) continue; // warm-up: the OS page cache, DuckDB's first plans
          const key = `${qName}_${lName}_ms`;
          times.set(key, [...(times.get(key) ?? []), ms]);
        }
      }
    }
    for (const [key, ms] of times) figures[key] = Number(median(ms).toFixed(1));
    return figures;
  } finally {
    await db.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.table(await benchParquetScan(Number(process.argv[2] ?? DEFAULT_REPORTS)));
}
