/**
 * `npm run bench iceberg-current-scale`: the second run's commit to the current tables of a lake
 * of 100,000 and 300,000 reports (`BENCH_CURRENT_LAKES=100000,300000`), each in a fresh process
 * with the heap a 1,024 MB Lambda gives (`--max-old-space-size=870`): peak RSS, CPU, and bytes
 * read through the storage. The lake is what a first full run leaves: `reports_current` (one row
 * a report) and `questions_current` (75 rows a report, the largest table), one file each as
 * publish writes them (row groups of 131,072 rows), reports in unit order: campaigns of 100
 * jobs in the string order of their unit keys (`c1`, `c10`, `c100`, … ), so a row group holds
 * neighbouring job ids and a file holds them all. Synthetic rows (every column filled, cheap to
 * make). The second run is one of:
 * - `incr-spread`: 1% of the jobs exported, every 100th (spread over every row group);
 * - `incr-recent`: 1% exported, the newest ids (the jobs a report system changes most);
 * - `incr-listed`: `incr-spread` with every campaign listed completely (what a real run does);
 * - `full`: every job exported again, every campaign listed.
 * `BENCH_CURRENT_ROOTS=before=<checkout>,after=.` runs each commit with each checkout's code on
 * the same lake (an export of the base commit's `shared/` gives the figures before).
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { dataFileMetrics } from '../../shared/iceberg/metrics.js';
import { type CurrentTableName, icebergParquetTable } from '../../shared/iceberg/schema.js';
import { ParquetConcat } from '../../shared/parquet/concat.js';
import { encodeParquetColumns, ROW_GROUP_ROWS } from '../../shared/parquet/encode.js';
import type { Cell } from '../../shared/parquet/schema.js';
import { LocalStorage } from '../../shared/storage/local.js';

const QUESTIONS_PER_REPORT = 75;
const JOBS_PER_CAMPAIGN = 100;
/** The heap limit Node sets for a 1,024 MB Lambda (about 85% of it). */
const LAMBDA_HEAP_MB = 870;
const TABLES = ['reports_current', 'questions_current'] as const;
const VARIANTS = ['incr-spread', 'incr-recent', 'incr-listed', 'full'] as const;
type Variant = (typeof VARIANTS)[number];

const campaignOf = (job: number) => Math.floor((job - 1) / JOBS_PER_CAMPAIGN) + 1;

/** Job ids in the order a run's units publish them: campaigns by unit key (`c<id>-u<n>`) order. */
function unitOrder(jobs: number): number[] {
  const campaigns = Array.from({ length: Math.ceil(jobs / JOBS_PER_CAMPAIGN) }, (_, i) => i + 1).sort(
    (a, b) => (`c${a}` < `c${b}` ? -1 : 1),
  );
  return campaigns.flatMap((c) =>
    Array.from({ length: JOBS_PER_CAMPAIGN }, (_, k) => (c - 1) * JOBS_PER_CAMPAIGN + k + 1).filter(
      (j) => j <= jobs,
    ),
  );
}

/** Column values of `table` for rows of `jobs` (`rowsPerJob` each), written by `runId`. */
function columnsOf(
  table: CurrentTableName,
  runId: string,
  dt: string,
  jobs: readonly number[],
  rowsPerJob: number,
) {
  const parquet = icebergParquetTable(table, 'freeze');
  const rows = jobs.length * rowsPerJob;
  const at = (i: number) => jobs[Math.floor(i / rowsPerJob)]!;
  const stamp = new Date(`${dt}T10:00:00Z`);
  return parquet.columns.map((c): Cell[] => {
    const out = new Array<Cell>(rows);
    for (let i = 0; i < rows; i++) {
      out[i] =
        c.name === 'job_id'
          ? at(i)
          : c.name === 'campaign_id'
            ? campaignOf(at(i))
            : c.name === 'run_id'
              ? runId
              : c.name === 'dt'
                ? dt
                : c.type === 'string'
                  ? `${c.name} of job ${at(i)}, row ${i % rowsPerJob}`
                  : c.type === 'int'
                    ? i % rowsPerJob
                    : c.type === 'bigint'
                      ? i % 1000
                      : c.type === 'boolean'
                        ? i % 2 === 0
                        : c.type === 'timestamp'
                          ? stamp
                          : [`${c.name}-${i % 13}`];
    }
    return out;
  });
}

const runFileKey = (table: string, dt: string, stem: string) =>
  `iceberg/${table}/data/dt=${dt}/${stem}.parquet`;
const SECOND_DT = '2026-11-21';
/** A file's last bytes, enough for any footer here. */
const TAIL_BYTES = 4 << 20;

/** The jobs the second run exports, and its complete listings. */
function secondRun(variant: Variant, count: number) {
  const all = Array.from({ length: count }, (_, i) => i + 1);
  const jobs =
    variant === 'full'
      ? all
      : variant === 'incr-recent'
        ? all.slice(-Math.ceil(count / 100))
        : all.filter((j) => j % 100 === 0);
  const listings = new Map<number, Set<number>>();
  if (variant === 'incr-listed' || variant === 'full') {
    for (const j of all) {
      const set = listings.get(campaignOf(j)) ?? new Set<number>();
      set.add(j);
      listings.set(campaignOf(j), set);
    }
  }
  return { jobs, listings };
}

/** Writes one data file of `table` for `jobs`, in row groups as publish makes them; returns it as commitRun takes it. */
async function writeTableFile(
  storage: LocalStorage,
  table: CurrentTableName,
  runId: string,
  dt: string,
  jobs: readonly number[],
  stem = `${runId}-0`,
) {
  const rowsPerJob = table === 'questions_current' ? QUESTIONS_PER_REPORT : 1;
  const perGroup = Math.max(1, Math.floor(ROW_GROUP_ROWS / rowsPerJob));
  const parquet = icebergParquetTable(table, 'freeze');
  const concat = new ParquetConcat();
  const key = runFileKey(table, dt, stem);
  let footer: Uint8Array = new Uint8Array(0);
  async function* chunks() {
    yield concat.start();
    for (let i = 0; i < jobs.length; i += perGroup) {
      const piece = encodeParquetColumns(
        parquet,
        columnsOf(table, runId, dt, jobs.slice(i, i + perGroup), rowsPerJob),
      );
      yield concat.append(piece);
    }
    const end = concat.finish();
    footer = end;
    yield end;
  }
  const { bytes } = await storage.putStream(key, chunks());
  return { key, dt, bytes, metrics: dataFileMetrics(footer, parquet) };
}

interface ChildConfig {
  root: string;
  lake: string;
  jobs: number;
  variant: Variant;
}

interface ChildFigures {
  commit_seconds: number;
  cpu_seconds: number;
  peak_rss_mb: number;
  bytes_read: number;
  reads: number;
}

async function rssHighWaterMb(): Promise<number> {
  const status = await readFile('/proc/self/status', 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
}

/** The child: the second run's commit to both tables, with the code of `config.root`. */
async function child(config: ChildConfig): Promise<void> {
  const code = (path: string) => import(join(config.root, path));
  const { commitRun } = await code('shared/iceberg/commit.ts');
  const { supersedeJobs } = await code('shared/iceberg/current.ts');
  const { FileCatalog } = await code('shared/iceberg/file-catalog.ts');
  const { LocalStorage: Local } = (await code('shared/storage/local.ts')) as {
    LocalStorage: typeof LocalStorage;
  };
  class Counting extends Local {
    bytesRead = 0;
    override async get(key: string) {
      const found = await super.get(key);
      this.bytesRead += found?.body.length ?? 0;
      return found;
    }
    override async getRange(key: string, start: number, end: number) {
      const body = await super.getRange(key, start, end);
      this.bytesRead += body?.length ?? 0;
      return body;
    }
  }
  const storage = new Counting(config.lake);
  const catalog = new FileCatalog(storage);
  const { jobs, listings } = secondRun(config.variant, config.jobs);
  // The run's files were written by the parent: here only their footers are read, for metrics.
  const files = [];
  for (const table of TABLES) {
    const key = runFileKey(table, SECOND_DT, `run-2-${config.variant}`);
    const handle = await open(join(config.lake, key), 'r');
    const { size } = await handle.stat();
    const tail = Buffer.alloc(Math.min(size, TAIL_BYTES));
    await handle.read(tail, 0, tail.length, size - tail.length);
    await handle.close();
    files.push({
      key,
      dt: SECOND_DT,
      bytes: size,
      metrics: dataFileMetrics(tail, icebergParquetTable(table, 'freeze')),
    });
  }
  const dt = SECOND_DT;
  const before = storage.bytesRead;
  const readsBefore = storage.stats().reads;
  const cpu = process.cpuUsage();
  const t = performance.now();
  for (const [i, table] of TABLES.entries()) {
    await commitRun(storage, catalog, {
      table,
      runId: 'run-2',
      files: [files[i]],
      now: new Date(`${dt}T10:00:00Z`),
      changeBase: supersedeJobs(storage, catalog, { jobs: new Set(jobs), listings }),
    });
  }
  const used = process.cpuUsage(cpu);
  const figures: ChildFigures = {
    commit_seconds: (performance.now() - t) / 1000,
    cpu_seconds: (used.user + used.system) / 1e6,
    peak_rss_mb: await rssHighWaterMb(),
    bytes_read: storage.bytesRead - before,
    reads: storage.stats().reads - readsBefore,
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
}

/** A lake after a first full run of `jobs` reports: both tables, one snapshot each. */
async function setup(lake: string, jobs: number, variants: readonly Variant[]): Promise<number> {
  const { commitRun } = await import('../../shared/iceberg/commit.js');
  const { FileCatalog } = await import('../../shared/iceberg/file-catalog.js');
  const storage = new LocalStorage(lake);
  const catalog = new FileCatalog(storage);
  const order = unitOrder(jobs);
  const dt = '2026-11-20';
  let bytes = 0;
  for (const table of TABLES) {
    const file = await writeTableFile(storage, table, 'run-1', dt, order);
    bytes += file.bytes;
    await commitRun(storage, catalog, {
      table,
      runId: 'run-1',
      files: [file],
      now: new Date(`${dt}T10:00:00Z`),
    });
  }
  // The second run's files, one set per variant, in no snapshot until its child commits them.
  // (`full` exports every job again: its files are the first run's, copied; the commit reads
  // only their footers.)
  for (const variant of variants) {
    const { jobs: exported } = secondRun(variant, jobs);
    for (const table of TABLES) {
      const key = runFileKey(table, SECOND_DT, `run-2-${variant}`);
      if (variant === 'full') {
        await mkdir(dirname(join(lake, key)), { recursive: true });
        await cp(join(lake, runFileKey(table, dt, 'run-1-0')), join(lake, key));
      } else await writeTableFile(storage, table, 'run-2', SECOND_DT, exported, `run-2-${variant}`);
    }
  }
  return bytes;
}

async function inChild(config: ChildConfig): Promise<ChildFigures | { error: string }> {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        `--max-old-space-size=${LAMBDA_HEAP_MB}`,
        '--import',
        'tsx',
        resolve('test/bench/iceberg-current-scale.ts'),
        'child',
        JSON.stringify(config),
      ],
      { maxBuffer: 1 << 20, cwd: config.root },
    );
    return JSON.parse(stdout) as ChildFigures;
  } catch (error) {
    const text = String((error as { stderr?: string }).stderr ?? error);
    return { error: /heap out of memory/.test(text) ? 'out of memory' : text.slice(-300) };
  }
}

export async function benchIcebergCurrentScale(): Promise<Record<string, number>> {
  const lakes = (process.env.BENCH_CURRENT_LAKES ?? '100000,300000').split(',').map(Number);
  const variants = (process.env.BENCH_CURRENT_VARIANTS?.split(',') ?? VARIANTS) as Variant[];
  // `label=checkout,…`: each variant's commit runs with each checkout's code, on the same lake.
  const roots = (process.env.BENCH_CURRENT_ROOTS ?? 'now=.').split(',').map((r) => {
    const [label, path] = r.split('=');
    return { label: label!, root: resolve(path!) };
  });
  const figures: Record<string, number> = {};
  const scratch = await mkdtemp(join(tmpdir(), 'bench-current-scale-'));
  try {
    for (const jobs of lakes) {
      const base = join(scratch, `lake-${jobs}`);
      await mkdir(base);
      const t = performance.now();
      figures[`${jobs}.lake_bytes`] = await setup(base, jobs, variants);
      figures[`${jobs}.setup_seconds`] = Math.round((performance.now() - t) / 1000);
      // Metadata names files by absolute path: each variant runs on the lake where it was made,
      // which is put back from a copy after.
      const copy = join(scratch, `lake-${jobs}-copy`);
      await cp(base, copy, { recursive: true });
      for (const variant of variants) {
        for (const { label, root } of roots) {
          const result = await inChild({ root, lake: base, jobs, variant });
          const at = `${jobs}.${label}.${variant}`;
          if ('error' in result) figures[`${at}.out_of_memory`] = result.error === 'out of memory' ? 1 : -1;
          else for (const [k, v] of Object.entries(result)) figures[`${at}.${k}`] = Math.round(v * 10) / 10;
          process.stderr.write(`${at}: ${JSON.stringify(result)}\n`);
          await rm(base, { recursive: true, force: true });
          await cp(copy, base, { recursive: true });
        }
      }
      await rm(copy, { recursive: true, force: true });
      await rm(base, { recursive: true, force: true });
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return figures;
}

const [mode, arg] = process.argv.slice(2);
if (mode === 'child' && arg && process.argv[1]?.endsWith('iceberg-current-scale.ts')) {
  child(JSON.parse(arg) as ChildConfig).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
