/**
 * `npm run bench iceberg-current`: the cost of keeping the current tables with position deletes
 * at 100,000 jobs (copy-on-write was measured against it by this script at commit 0c265a8,
 * then its code removed; the figures are in BENCHMARKS.md). Three runs: a full run of every job, an
 * incremental run that changes 1% of them (every 100th job), a full run replacing everything.
 * Per run: the commit's wall and CPU time (reports_current and sections_current, 5 sections a
 * report), the bytes it wrote (data files of the run excluded: both write the same), and a scan
 * of the current tables by icebird, deletes applied. Synthetic rows (`test/helpers/iceberg-rows.ts`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commitRun } from '../../shared/iceberg/commit.js';
import { supersedeJobs } from '../../shared/iceberg/current.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { LocalStorage } from '../../shared/storage/local.js';
import { syntheticRow, writeDataFile } from '../helpers/iceberg-rows.js';
import { readIcebergTable } from '../helpers/icebird.js';

const JOBS = Number(process.env.BENCH_ICEBERG_JOBS ?? 100_000);
/**
 * `BENCH_ICEBERG_LISTINGS=1`: every run also lists every job completely (as a real run does),
 * so that each commit reads every live data file's job_id and campaign_id to find deleted jobs
 * (none here; a synthetic row's campaign_id is its job_id).
 */
const LISTINGS = process.env.BENCH_ICEBERG_LISTINGS === '1';
const SECTIONS = 5;
const TABLES = ['reports_current', 'sections_current'] as const;

/** A storage that counts the bytes written through it while `counting`. */
class CountingStorage extends LocalStorage {
  written = 0;
  counting = false;
  override async put(key: string, body: Uint8Array | string, options?: Parameters<LocalStorage['put']>[2]) {
    if (this.counting) this.written += typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    return super.put(key, body, options);
  }
}

async function run(
  storage: CountingStorage,
  catalog: FileCatalog,
  runId: string,
  day: number,
  jobs: number[],
): Promise<Record<string, number>> {
  const dt = `2026-11-${String(20 + day).padStart(2, '0')}`;
  const files = {
    reports_current: await writeDataFile(
      storage,
      'reports_current',
      `${runId}-0`,
      dt,
      jobs.map((j) => syntheticRow('reports_current', runId, dt, j)),
    ),
    sections_current: await writeDataFile(
      storage,
      'sections_current',
      `${runId}-0`,
      dt,
      jobs.flatMap((j) =>
        Array.from({ length: SECTIONS }, (_, i) =>
          syntheticRow('sections_current', runId, dt, j, { section_index: i }),
        ),
      ),
    ),
  };
  storage.counting = true;
  storage.written = 0;
  const cpu = process.cpuUsage();
  const listings = new Map<number, Set<number>>(
    LISTINGS ? Array.from({ length: JOBS }, (_, i) => [i + 1, new Set([i + 1])]) : [],
  );
  const start = performance.now();
  for (const table of TABLES) {
    await commitRun(storage, catalog, {
      table,
      runId,
      files: [files[table]],
      now: new Date(`${dt}T10:00:00Z`),
      changeBase: supersedeJobs(storage, catalog, { jobs: new Set(jobs), listings }),
    });
  }
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  storage.counting = false;
  const scanStart = performance.now();
  let rows = 0;
  for (const table of TABLES) rows += (await readIcebergTable(catalog.tableLocation(table))).length;
  const scan = performance.now() - scanStart;
  if (rows !== JOBS * (1 + SECTIONS)) throw new Error(`${runId}: ${rows} current rows`);
  return {
    commit_wall_ms: Math.round(wall),
    commit_cpu_ms: Math.round((used.user + used.system) / 1000),
    commit_bytes_written: storage.written,
    scan_ms: Math.round(scan),
  };
}

export async function benchIcebergCurrent(): Promise<Record<string, number>> {
  const all = Array.from({ length: JOBS }, (_, i) => i + 1);
  const figures: Record<string, number> = {};
  const dir = await mkdtemp(join(tmpdir(), 'bench-current-'));
  try {
    const storage = new CountingStorage(dir);
    const catalog = new FileCatalog(storage);
    const runs = [
      ['full-1', 0, all],
      ['incremental-1pct', 1, all.filter((j) => j % 100 === 0)],
      ['full-2', 2, all],
    ] as const;
    for (const [name, day, jobs] of runs) {
      const result = await run(storage, catalog, `run-${name}`, day, [...jobs]);
      for (const [k, v] of Object.entries(result)) figures[`${name}.${k}`] = v;
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return figures;
}
