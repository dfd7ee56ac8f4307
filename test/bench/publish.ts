/**
 * Publishing a run (shared/export/run/publish.ts): objects per run, throughput of concatenating
 * Parquet against a plain copy of the same bytes (folder and S3 on fauxqs, rounds interleaved),
 * peak memory of publishing 10k and 100k-report runs in a child process, the S3 requests a
 * run's staging and publishing cost, and the time to publish a 100k run.
 *
 * Staged files: 20 units of 100 realistic reports are staged once with `stageStep`, as
 * export-reports does; a run of N reports is those units' bytes put again under the keys of
 * N / 100 units (campaigns of 500 jobs, one jobs snapshot each, one campaigns snapshot), so a
 * 100k run takes minutes to prepare rather than the encoding of 100,000 reports.
 * `tsx test/bench/publish.ts child <config.json>` (child) publishes one run and prints one JSON
 * line; it loads only what publishing needs, so the modules of the rest (simulator, CDK, fauxqs)
 * are imported on demand by the parent. Longer than the house's ~400 lines: its parts (the
 * staged-run builder, the child, the request accounting) serve only this section.
 */

import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { LAMBDA_MB_PER_VCPU } from '../../infra/function-sizes.js';
import { appendReportRows, campaignRow, jobRow } from '../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import { mapPool } from '../../shared/export/run/pool.js';
import { DEFAULT_MAX_FILE_BYTES, planPublish, publishRun } from '../../shared/export/run/publish.js';
import { stageStep } from '../../shared/export/run/staging.js';
import type { FileEntry, RunRef, StagedFile } from '../../shared/export/state/records.js';
import type { RawEntity, TableName } from '../../shared/export/tables.js';
import { stagedParquetKey, stagedRawKey } from '../../shared/layout.js';
import { ParquetConcat } from '../../shared/parquet/concat.js';
import { LocalStorage } from '../../shared/storage/local.js';
import { S3Storage, STREAM_PART_BYTES } from '../../shared/storage/s3.js';
import { readRange, type Storage } from '../../shared/storage/storage.js';
import type { LocalAws, LoggedRequest } from '../helpers/fauxqs.js';
import { loopbackS3Client } from '../helpers/loopback-s3.js';
import { realisticReports } from '../helpers/realistic-reports.js';

const tempDir = (prefix: string): Promise<string> => mkdtemp(join(tmpdir(), `${prefix}-`));

export const RUN: RunRef = { run_id: '20261122T031500Z-b0b0b0', dt: '2026-11-22', mode: 'full' };
const UNIT_REPORTS = 100;
const JOBS_PER_CAMPAIGN = 500;
/** Distinct encoded units; larger runs repeat their bytes under other keys. */
const TEMPLATE_UNITS = 20;
/** publish.ts's PUBLISH_CONCURRENCY and READ_AHEAD (not exported): the copy baseline uses the same. */
const OUTPUTS_IN_PARALLEL = 2;
const READ_AHEAD = 4;
const PUT_CONCURRENCY = 16;
const ROUNDS = 5;
const BUCKET = 'bench-publish';
const MB = 1e6;
/** Real S3 latency per request assumed for sizing finish-run (loopback answers in microseconds). */
const ASSUMED_S3_LATENCY_S = 0.02;
/** us-east-1 list prices, as in cost.ts; DELETE (DeleteObjects) is free. */
const PRICE = { s3Put: 0.005 / 1000, s3Get: 0.0004 / 1000, lambdaGbSecondArm: 0.0000133334 };
const COST_REPORTS = 2_000;
const PER = 100_000;

interface StagedBytes {
  entry: FileEntry;
  body: Uint8Array;
}
export interface Templates {
  units: StagedBytes[][];
  jobs: StagedBytes[];
}

/** Stages TEMPLATE_UNITS units of realistic reports and one campaign's jobs snapshot with `stageStep`. */
export async function stageTemplates(): Promise<Templates> {
  const dir = await tempDir('bench-publish-templates');
  const storage = new LocalStorage(dir);
  const gen = realisticReports(20261122);
  const exportedAt = new Date('2026-11-22T03:15:00Z');
  const ctx = { runId: RUN.run_id, exportedAt };
  // Each file's bytes of the step's object; the bench stages them again as objects of their own.
  const read = async (entries: StagedFile[]) =>
    Promise.all(
      entries.map(async ({ offset = 0, ...entry }) => ({
        entry,
        body: (await readRange(storage, entry.key, offset, offset + entry.bytes))!,
      })),
    );
  try {
    const units: StagedBytes[][] = [];
    for (let u = 0; u < TEMPLATE_UNITS; u++) {
      const rows = new TableBuffer();
      const lines = new JsonLinesBuffer();
      for (let i = 0; i < UNIT_REPORTS; i++) {
        const jobId = 3_000_000_000 + u * UNIT_REPORTS + i;
        const report = gen.report(jobId, 1);
        lines.add({
          run_id: RUN.run_id,
          fetched_at: exportedAt.toISOString(),
          campaign_id: 1,
          job_id: jobId,
          data: report,
        });
        appendReportRows(rows, report, { campaignId: 1, jobId }, ctx);
      }
      units.push(await read(await stageStep(storage, RUN.run_id, 'reports', `t${u}`, rows, lines)));
    }
    const rows = new TableBuffer();
    const lines = new JsonLinesBuffer();
    for (let i = 0; i < JOBS_PER_CAMPAIGN; i++) {
      const item = { id: 3_000_000_000 + i, job_status: 4, job_score_percentage: '87.5' };
      lines.add({ run_id: RUN.run_id, fetched_at: exportedAt.toISOString(), data: item });
      rows.add('jobs', jobRow(item, 1, ctx));
    }
    return { units, jobs: await read(await stageStep(storage, RUN.run_id, 'jobs', 'c1', rows, lines)) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const copyKey = ({ entry }: StagedBytes, stem: string): string =>
  entry.format === 'parquet'
    ? stagedParquetKey(RUN.run_id, entry.table_or_entity as TableName, stem)
    : stagedRawKey(RUN.run_id, entry.table_or_entity as RawEntity, stem);

/** Stages a run of `reports` reports in `storage` from the templates; returns its staged files. */
export async function stageRun(storage: Storage, reports: number, t: Templates): Promise<FileEntry[]> {
  const campaigns = Math.ceil(reports / JOBS_PER_CAMPAIGN);
  const puts: Array<{ key: string; from: StagedBytes }> = [];
  for (let c = 1; c <= campaigns; c++) {
    for (const from of t.jobs) puts.push({ key: copyKey(from, `c${c}`), from });
  }
  for (let u = 0; u < reports / UNIT_REPORTS; u++) {
    const c = 1 + Math.floor((u * UNIT_REPORTS) / JOBS_PER_CAMPAIGN);
    const stem = `c${c}-u${u % (JOBS_PER_CAMPAIGN / UNIT_REPORTS)}-a1`;
    for (const from of t.units[u % TEMPLATE_UNITS]!) puts.push({ key: copyKey(from, stem), from });
  }
  const files = await mapPool(puts, PUT_CONCURRENCY, async ({ key, from }) => {
    await storage.put(key, from.body);
    return { ...from.entry, key };
  });
  // The campaigns snapshot is small: encoded and staged for real.
  const rows = new TableBuffer();
  const lines = new JsonLinesBuffer();
  const ctx = { runId: RUN.run_id, exportedAt: new Date('2026-11-22T03:15:00Z') };
  for (let c = 1; c <= campaigns; c++) {
    const item = {
      id: c,
      campaign_name: `Campaign ${c}`,
      campaign_status: 'active',
      start_date: '2026-01-01',
      end_date: null,
      completed_at: null,
      created_at: '2025-12-01T10:00:00Z',
    };
    lines.add({ run_id: RUN.run_id, fetched_at: ctx.exportedAt.toISOString(), data: item });
    rows.add('campaigns', campaignRow(item, ctx));
  }
  return [...(await stageStep(storage, RUN.run_id, 'campaigns', 'campaigns', rows, lines)), ...files];
}

const sum = (files: readonly FileEntry[]) => files.reduce((n, f) => n + f.bytes, 0);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, digits = 3) => Number(x.toFixed(digits));
const timed = async (action: () => Promise<unknown>): Promise<number> => {
  const t = performance.now();
  await action();
  return (performance.now() - t) / 1000;
};

async function countPublished(storage: Storage): Promise<number> {
  let n = 0;
  for (const prefix of ['parquet/', 'raw/']) for await (const _ of storage.list(prefix)) n++;
  return n;
}

/** The baseline: each output's staged objects read (same read-ahead) and written as they are, one putStream each. */
async function plainCopy(storage: Storage, staged: readonly FileEntry[]): Promise<void> {
  await mapPool(planPublish(RUN, staged, DEFAULT_MAX_FILE_BYTES), OUTPUTS_IN_PARALLEL, async (plan) => {
    async function* bodies(): AsyncGenerator<Uint8Array> {
      const ahead: Promise<Uint8Array>[] = [];
      const read = (f: FileEntry) => storage.get(f.key).then((o) => o!.body);
      let next = 0;
      while (next < plan.inputs.length && ahead.length < READ_AHEAD) ahead.push(read(plan.inputs[next++]!));
      while (ahead.length > 0) {
        const body = await ahead.shift()!;
        if (next < plan.inputs.length) ahead.push(read(plan.inputs[next++]!));
        yield body;
      }
    }
    await storage.putStream(`copy/${plan.key}`, bodies());
  });
}

/** The folder floor: every staged file copied by the kernel to a file of its own. */
async function fileCopy(root: string, staged: readonly FileEntry[]): Promise<void> {
  await mapPool(staged, OUTPUTS_IN_PARALLEL * READ_AHEAD, async (f) => {
    const to = join(root, 'copyfile', ...f.key.split('/'));
    await mkdir(dirname(to), { recursive: true });
    await copyFile(join(root, ...f.key.split('/')), to);
  });
}

interface ChildConfig {
  target: { kind: 'folder'; root: string } | { kind: 's3'; endpoint: string; prefix: string };
  staged: FileEntry[];
  /** Instead of publishing: concatenate this table's staged Parquet and report the heap the concat holds. */
  heldBy?: TableName;
}
interface ChildFigures {
  seconds: number;
  cpu_seconds: number;
  rss_before_mb: number;
  peak_rss_mb: number;
  peak_heap_mb: number;
  peak_external_mb: number;
  files: number;
  reads: number;
  writes: number;
}

function childStorage(target: ChildConfig['target']): Storage {
  if (target.kind === 'folder') return new LocalStorage(target.root);
  const client = loopbackS3Client(target.endpoint);
  return new S3Storage({ bucket: BUCKET, prefix: target.prefix, client });
}

/**
 * The process's RSS high-water mark (VmHWM). Not `resourceUsage().maxRSS`: Linux carries that
 * over from the forked copy of the parent, whose RSS (fauxqs holding the runs) it would show.
 */
async function rssHighWaterMb(): Promise<number> {
  const status = await readFile('/proc/self/status', 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
}

/** Heap held (after GC; run with --expose-gc) by a ParquetConcat that has taken every staged file of `table`. */
async function heldByConcat(
  storage: Storage,
  staged: readonly FileEntry[],
  table: TableName,
): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  gc();
  const before = process.memoryUsage().heapUsed;
  const concat = new ParquetConcat();
  concat.start();
  for (const f of staged.filter((e) => e.format === 'parquet' && e.table_or_entity === table)) {
    concat.append((await storage.get(f.key))!.body);
  }
  gc();
  const held = process.memoryUsage().heapUsed - before;
  concat.finish(); // keeps `concat` alive through the measurement
  return held / 2 ** 20;
}

async function child(configPath: string): Promise<void> {
  const config = JSON.parse(await readFile(configPath, 'utf8')) as ChildConfig;
  const storage = childStorage(config.target);
  if (config.heldBy) {
    process.stdout.write(
      `${JSON.stringify({ held_mb: await heldByConcat(storage, config.staged, config.heldBy) })}\n`,
    );
    return;
  }
  let heap = 0;
  let external = 0;
  const sample = () => {
    const m = process.memoryUsage();
    heap = Math.max(heap, m.heapUsed);
    external = Math.max(external, m.external);
  };
  const sampler = setInterval(sample, 5);
  const before = await rssHighWaterMb();
  const cpu = process.cpuUsage();
  const t = performance.now();
  const files = await publishRun(storage, RUN, config.staged);
  const seconds = (performance.now() - t) / 1000;
  const used = process.cpuUsage(cpu);
  clearInterval(sampler);
  sample();
  const figures: ChildFigures = {
    seconds,
    cpu_seconds: (used.user + used.system) / 1e6,
    rss_before_mb: before,
    peak_rss_mb: await rssHighWaterMb(),
    peak_heap_mb: heap / 2 ** 20,
    peak_external_mb: external / 2 ** 20,
    files: files.length,
    ...storage.stats(),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
}

async function inChild<T = ChildFigures>(config: ChildConfig, scratch: string): Promise<T> {
  const path = join(scratch, `child-${Date.now()}.json`);
  await writeFile(path, JSON.stringify(config));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...(config.heldBy ? ['--expose-gc'] : []), '--import', 'tsx', 'test/bench/publish.ts', 'child', path],
    { maxBuffer: 1 << 20 },
  );
  return JSON.parse(stdout) as T;
}

type RequestClass = 'put' | 'get' | 'list' | 'delete';
/** What S3 bills a logged request as, and whether its key is staged, published or other. */
function classify(r: LoggedRequest): { kind: RequestClass; area: 'staged' | 'published' | 'other' } {
  const url = new URL(r.url, 'http://x');
  const key = decodeURIComponent(url.pathname).split('/').slice(2).join('/');
  const area = key.includes('/staged/') ? 'staged' : /^(parquet|raw)\//.test(key) ? 'published' : 'other';
  if (url.searchParams.has('list-type')) return { kind: 'list', area };
  if (r.method === 'GET' || r.method === 'HEAD') return { kind: 'get', area };
  if (r.method === 'DELETE' || url.searchParams.has('delete')) return { kind: 'delete', area };
  return { kind: 'put', area };
}

/** Requests of one object written by putStream at `bytes`: one PutObject, or create + parts + complete. */
const streamRequests = (bytes: number) =>
  bytes <= STREAM_PART_BYTES ? 1 : Math.ceil(bytes / STREAM_PART_BYTES) + 2;

/**
 * S3 requests of a whole run at the stack's defaults on fauxqs (every request counted as S3
 * received it), 2,000 simulator reports scaled to 100,000; the published files' writes are
 * recomputed for files 50 times larger (more parts, split at 256 MB), not scaled.
 */
async function runRequests(aws: LocalAws): Promise<Record<string, number>> {
  const { EXAMPLE_API_BASE_URL, parseConfig } = await import('../../infra/config.js');
  const { exporter } = await import('../helpers/export.js');
  const { startSimulator } = await import('../simulator/index.js');
  const { startRun } = await import('../../shared/export/run/start-run.js');
  const { planCampaign } = await import('../../shared/export/run/plan-campaign.js');
  const { exportUnit } = await import('../../shared/export/run/export-unit.js');
  const { finishRun } = await import('../../shared/export/run/finish-run.js');
  const stack = parseConfig({ apiBaseUrl: EXAMPLE_API_BASE_URL });
  const simulator = await startSimulator({
    seed: 9,
    campaigns: 4,
    jobsPerCampaign: COST_REPORTS / 4,
    reportSize: 'mixed',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
  });
  const out = await tempDir('bench-publish-cost');
  try {
    const storage = new S3Storage({ bucket: BUCKET, prefix: 'cost', client: aws.s3Client() });
    const { deps } = exporter(simulator, out, { storage });
    aws.clearRequests();
    const started = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
    for (const campaignId of started.record.campaign_ids) {
      const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId }, stack.unitSize);
      for (const unit of planned.units) {
        await exportUnit(deps, unit, { resume: true, concurrency: stack.reportConcurrency });
      }
    }
    // As finish-run does: a run the queues carried is announced by its closer, or not closed here.
    const manifest = await finishRun(deps, started.run.run_id, { force: true, announce: async () => {} });
    if (!manifest) throw new Error('the cost run wrote no manifest');
    const scale = PER / COST_REPORTS;
    const n = { put: 0, get: 0, list: 0, delete: 0, staged_put: 0, staged_get: 0, published_put: 0 };
    for (const r of aws.requests()) {
      const { kind, area } = classify(r);
      n[kind]++;
      if (area === 'staged' && (kind === 'put' || kind === 'get')) n[`staged_${kind}`]++;
      if (area === 'published' && kind === 'put') n.published_put++;
    }
    // The same tables at 100k: input bytes × 50, cut at 256 MB like planPublish, each file streamed.
    let publishedPut100k = 0;
    for (const file of manifest.files) {
      let left = file.bytes * scale;
      for (; left > DEFAULT_MAX_FILE_BYTES; left -= DEFAULT_MAX_FILE_BYTES) {
        publishedPut100k += streamRequests(DEFAULT_MAX_FILE_BYTES);
      }
      publishedPut100k += streamRequests(left);
    }
    const put = (n.put - n.published_put) * scale + publishedPut100k;
    const billed = (put + n.list * scale) * PRICE.s3Put + n.get * scale * PRICE.s3Get;
    return {
      measured_reports: manifest.counts.reports_exported,
      s3_requests_per_100k: put + (n.get + n.list + n.delete) * scale,
      s3_put_per_100k: put,
      s3_get_per_100k: n.get * scale,
      s3_list_per_100k: n.list * scale,
      s3_delete_requests_per_100k_free: n.delete * scale,
      staged_put_per_100k: n.staged_put * scale,
      staged_get_per_100k: n.staged_get * scale,
      published_put_per_100k: publishedPut100k,
      usd_s3_per_100k: round(billed, 4),
    };
  } finally {
    await simulator.close();
    await rm(out, { recursive: true, force: true });
  }
}

/** Time of publishing a 100k run on real S3 at ASSUMED_S3_LATENCY_S per request, 2 outputs at once, 4 requests in flight each. */
function latencyEstimate(staged: readonly FileEntry[]): { requests: number; seconds: number } {
  const plans = planPublish(RUN, staged, DEFAULT_MAX_FILE_BYTES);
  const workers = Array.from({ length: OUTPUTS_IN_PARALLEL }, () => 0);
  let requests = 0;
  for (const plan of plans) {
    const perOutput = plan.inputs.length + streamRequests(sum(plan.inputs));
    requests += perOutput;
    // mapPool hands the next output to the worker that frees first.
    const i = workers.indexOf(Math.min(...workers));
    workers[i]! += Math.ceil(perOutput / READ_AHEAD) * ASSUMED_S3_LATENCY_S;
  }
  return { requests, seconds: Math.max(...workers) };
}

export async function benchPublish(): Promise<Record<string, number>> {
  const { startLocalAws } = await import('../helpers/fauxqs.js');
  const { FUNCTION_SETTINGS } = await import('../../infra/constructs/functions.js');
  const { benchCost } = await import('./cost.js');
  const scratch = await tempDir('bench-publish');
  const aws = await startLocalAws();
  const f: Record<string, number> = {};
  try {
    await aws.createBucket(BUCKET);
    const templates = await stageTemplates();
    const folder = (name: string) => new LocalStorage(join(scratch, name));
    const s3 = (prefix: string) => new S3Storage({ bucket: BUCKET, prefix, client: aws.s3Client() });

    // 1. Objects per run.
    const small = folder('r2k');
    const staged2k = await stageRun(small, 2_000, templates);
    await publishRun(small, RUN, staged2k);
    f.staged_files_2k = staged2k.length;
    f.objects_per_run_2k = (await countPublished(small)) + 1; // + the manifest
    const big = folder('r100k');
    const staged100k = await stageRun(big, 100_000, templates);
    const staged10k = await stageRun(folder('r10k'), 10_000, templates);
    f.folder_publish_seconds_100k = round(await timed(() => publishRun(big, RUN, staged100k)), 2);
    f.staged_files_100k = staged100k.length;
    f.staged_mb_100k = round(sum(staged100k) / MB, 1);
    f.objects_per_run_100k = (await countPublished(big)) + 1;

    // The S3 runs: the same staged bytes in fauxqs.
    const s3Big = s3('r100k');
    const s3Small = s3('r10k');
    const small10k = folder('r10k');
    for (const [from, to, files] of [
      [big, s3Big, staged100k],
      [small10k, s3Small, staged10k],
    ] as const) {
      await mapPool(files, PUT_CONCURRENCY, async (e) => {
        await to.put(e.key, (await from.get(e.key))!.body);
      });
    }

    // 2. Throughput: the 10k run's Parquet, concatenated vs copied, folder and S3, rounds interleaved.
    const parquet = staged10k.filter((e) => e.format === 'parquet');
    const cases: Record<string, () => Promise<unknown>> = {
      folder_publish: () => publishRun(small10k, RUN, parquet),
      folder_copy: () => plainCopy(small10k, parquet),
      folder_copyfile: () => fileCopy(join(scratch, 'r10k'), parquet),
      s3_publish: () => publishRun(s3Small, RUN, parquet),
      s3_copy: () => plainCopy(s3Small, parquet),
    };
    const times = Object.fromEntries(Object.keys(cases).map((name): [string, number[]] => [name, []]));
    aws.clearRequests();
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, action] of Object.entries(cases)) times[name]!.push(await timed(action));
    }
    const mbPerS = (name: string) => sum(parquet) / MB / median(times[name]!);
    f.parquet_mb_10k = round(sum(parquet) / MB, 1);
    for (const name of Object.keys(cases)) f[`${name}_mb_per_s`] = round(mbPerS(name), 1);
    f.folder_publish_over_copy = round(mbPerS('folder_publish') / mbPerS('folder_copy'));
    f.folder_publish_over_copyfile = round(mbPerS('folder_publish') / mbPerS('folder_copyfile'));
    f.s3_publish_over_copy = round(mbPerS('s3_publish') / mbPerS('s3_copy'));

    // 3. Peak memory of a whole publish (Parquet + raw), each in a fresh process; 4. its S3 requests and time.
    const runs = {
      folder_10k: { target: { kind: 'folder', root: join(scratch, 'r10k') }, staged: staged10k },
      folder_100k: { target: { kind: 'folder', root: join(scratch, 'r100k') }, staged: staged100k },
      s3_10k: { target: { kind: 's3', endpoint: aws.endpoint, prefix: 'r10k' }, staged: staged10k },
      s3_100k: { target: { kind: 's3', endpoint: aws.endpoint, prefix: 'r100k' }, staged: staged100k },
    } satisfies Record<string, ChildConfig>;
    const memory: Record<string, ChildFigures> = {};
    for (const [name, config] of Object.entries(runs)) {
      aws.clearRequests();
      memory[name] = await inChild(config, scratch);
      f[`${name}_peak_rss_mb`] = round(memory[name].peak_rss_mb, 1);
      f[`${name}_rss_before_mb`] = round(memory[name].rss_before_mb, 1);
      f[`${name}_peak_heap_mb`] = round(memory[name].peak_heap_mb, 1);
      f[`${name}_peak_external_mb`] = round(memory[name].peak_external_mb, 1);
      f[`${name}_seconds`] = round(memory[name].seconds, 2);
      f[`${name}_cpu_seconds`] = round(memory[name].cpu_seconds, 2);
      if (name.startsWith('s3')) f[`${name}_s3_requests`] = aws.requests().length;
    }
    for (const kind of ['folder', 's3']) {
      f[`${kind}_peak_rss_ratio_100k_over_10k`] = round(
        memory[`${kind}_100k`]!.peak_rss_mb / memory[`${kind}_10k`]!.peak_rss_mb,
      );
    }
    // Why memory grows: the heap a concat holds once it has taken every staged file of the largest table.
    for (const [name, config] of [
      ['10k', runs.folder_10k],
      ['100k', runs.folder_100k],
    ] as const) {
      const { held_mb } = await inChild<{ held_mb: number }>({ ...config, heldBy: 'questions' }, scratch);
      f[`questions_concat_held_heap_mb_${name}`] = round(held_mb, 1);
    }
    const finish = FUNCTION_SETTINGS['finish-run'];
    const estimate = latencyEstimate(staged100k);
    const cpuAtLambda = memory.s3_100k!.cpu_seconds * (LAMBDA_MB_PER_VCPU / finish.memorySize);
    f.real_s3_requests_100k = estimate.requests;
    f.real_s3_latency_seconds_100k = round(estimate.seconds, 1);
    f.lambda_cpu_seconds_100k = round(cpuAtLambda, 1);
    f.finish_estimate_seconds_100k = round(estimate.seconds + cpuAtLambda, 1);
    f.finish_memory_mb = finish.memorySize;
    f.finish_timeout_seconds = finish.timeout.toSeconds();

    // 4. Cost per 100k reports: S3 measured here, SQS and Lambda from the cost section's method.
    Object.assign(f, await runRequests(aws));
    const cost = await benchCost();
    const finishSeconds = Math.max(memory.s3_100k!.seconds, f.finish_estimate_seconds_100k);
    const finishLambda = finishSeconds * (finish.memorySize / 1024) * PRICE.lambdaGbSecondArm;
    f.usd_sqs_per_100k = round(cost.usd_sqs_per_100k ?? 0, 4);
    f.cost_cpu_seconds_per_unit = round(cost.cpu_seconds_per_unit_measured ?? 0);
    f.lambda_export_gb_s_per_100k = Math.round(cost.lambda_gb_s_per_100k ?? 0);
    f.usd_lambda_export_per_100k = round(cost.usd_lambda_per_100k ?? 0, 4);
    f.usd_lambda_finish_publish_per_100k = round(finishLambda, 4);
    f.usd_total_per_100k = round(
      f.usd_s3_per_100k! + f.usd_sqs_per_100k + f.usd_lambda_export_per_100k + finishLambda,
      4,
    );
    f.cost_section_usd_s3_per_100k = round(cost.usd_s3_per_100k ?? 0, 4);
    return f;
  } finally {
    await aws.close();
    await rm(scratch, { recursive: true, force: true });
  }
}

const [mode, configPath] = process.argv.slice(2);
if (mode === 'child' && configPath && process.argv[1]?.endsWith('publish.ts')) {
  child(configPath).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
