/**
 * `npm run bench scale`: the finish step of runs of 100k-1M reports, through the real code, each
 * invocation in a fresh process with the heap finish-run's memory gives (issue 31, item 4).
 *
 * A run's complete state is synthesized in storage as start-run, plan-campaign and
 * export-reports leave it (scale-synth.ts), on a folder and on the local S3 server (fauxqs, in
 * this process), Hive and Iceberg. The finish step is then invoked as the scheduler would:
 * again and again, each time in a new process (scale-child.ts), until the run's tombstone
 * exists or SCALE_MAX_INVOCATIONS is reached. Per invocation: CPU (user + sys), wall time, peak
 * RSS (VmHWM; sampled from here too, so a process killed by its heap limit still counts), and
 * the storage requests of `Storage.stats()`. Iceberg adds the lake dimension: a second,
 * incremental run (SCALE_LAKE_SHARE of the jobs changed, every campaign listed) closed into a
 * lake whose `_current` tables hold the first run's reports. Each closed run is checked: its
 * manifest's counts against its records, the published rows per table against the staged rows,
 * and every published Parquet file's footer (`num_rows`, hyparquet) against the manifest.
 *
 * Each child runs as the Lambda runs its code (SCALE_LOADER=bundle, the default): scale-child.ts
 * bundled once per bench run with the functions' own esbuild options, started by `node` with
 * their NODE_OPTIONS (scale-bundle.ts); SCALE_LOADER=tsx loads the sources through tsx instead,
 * as the figures before 2026-11-26's bundle did (tsx costs ~85 MB of RSS). Before the cases, the
 * empty baselines (VmHWM of a process that loads its modules and exits): node alone, the child
 * under each loader, and finish-run's own handler bundled.
 *
 * Settings (environment): SCALE_LOADER (bundle or tsx, default bundle); SCALE_MALLOC (`default`: the child without the functions' glibc mmap threshold); SCALE_REPORTS (run sizes, default 100000,300000,1000000);
 * SCALE_CASES (default folder-hive,s3-hive,folder-iceberg,s3-iceberg); SCALE_S3_MAX_REPORTS
 * (default 300000: fauxqs holds every object in this process's memory); SCALE_ICEBERG_MAX_REPORTS
 * (default 300000: Iceberg's units are encoded one by one, ~45 ms each); SCALE_MAX_INVOCATIONS
 * (default 12); SCALE_TIMEOUT_S (kill an invocation after this many seconds, as Lambda does at
 * its timeout; default 0, never: this machine's CPU is not Lambda's); SCALE_VIA (`close-runs`,
 * as the Lambda, or `finish-run`); SCALE_LAKE_SHARE (default 0.01); SCALE_LAKE_RUN_REPORTS (the next
 * run changes this many reports whatever the lake's size, instead of a share: the lake's curve at a
 * constant run); SCALE_LAKE_RUN_PICK (which jobs the next run changes: `spread`, every n-th job of
 * every campaign, the default; `recent`, the newest ids, the last campaigns'); SCALE_DIR (default the OS
 * temp folder). Staged data is about 0.72 GB per 100k reports, deleted after each case.
 */

import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parquetMetadata } from 'hyparquet';
import { FUNCTION_SIZES, LAMBDA_MB_PER_VCPU } from '../../infra/function-sizes.js';
import { type Manifest, ManifestSchema } from '../../shared/export/state/manifest.js';
import { parseRecord, type RunRef } from '../../shared/export/state/records.js';
import { isClosed } from '../../shared/export/state/tombstone.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { currentTableName, manifestKey, STATE_KEYS } from '../../shared/layout.js';
import { LocalStorage } from '../../shared/storage/local.js';
import { S3Storage } from '../../shared/storage/s3.js';
import type { Storage } from '../../shared/storage/storage.js';
import type { LocalAws } from '../helpers/fauxqs.js';
import { LAMBDA_ENV } from './lambda.js';
import {
  bundleAsLambda,
  childCommand,
  functionNodeOptions,
  type Loader,
  loadedHighWaterMb,
  median,
} from './scale-bundle.js';
import type { ChildConfig, ChildFigures, Target } from './scale-child.js';
import {
  copyPrefix,
  type Encoding,
  fastFolder,
  makeTemplates,
  type Synthesized,
  synthesizeRun,
  type Templates,
} from './scale-synth.js';

const RUN1: RunRef = { run_id: '20261201T031500Z-5ca1e0', dt: '2026-12-01', mode: 'full' };
const RUN2: RunRef = { run_id: '20261202T031500Z-5ca1e1', dt: '2026-12-02', mode: 'incremental' };
const BUCKET = 'bench-scale';
/** S3's largest single PUT (5 GB): the closing record of a 100k run is over fauxqs's 11 MiB. */
const S3_BODY_LIMIT = 5 * 2 ** 30;
/** How often this process reads an invocation's RSS high-water mark and CPU from /proc. */
const SAMPLE_MS = 250;
/** Two invocations in a row that die (heap limit, kill) without closing: no progress to expect. */
const CRASHES_IN_A_ROW = 2;
const CLOCK_TICKS = 100;
const CHILD_SOURCE = fileURLToPath(new URL('./scale-child.ts', import.meta.url));
const FINISH_RUN_SOURCE = fileURLToPath(new URL('../../functions/aws/finish-run.ts', import.meta.url));
/** Processes per empty baseline (the median is reported). */
const BASELINE_SAMPLES = 3;

interface Settings {
  loader: Loader;
  sizes: number[];
  cases: string[];
  s3Max: number;
  icebergMax: number;
  maxInvocations: number;
  timeoutS: number;
  via: ChildConfig['via'];
  /** The share of a lake's jobs the next run changes, or how many it changes whatever the lake (`lakeRunReports`). */
  lakeShare: number;
  lakeRunReports: number | undefined;
  lakeRunPick: 'spread' | 'recent';
  dir: string;
}

function settings(env: NodeJS.ProcessEnv): Settings {
  const list = (v: string | undefined, d: string) =>
    (v ?? d)
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const via = env.SCALE_VIA ?? 'close-runs';
  if (via !== 'close-runs' && via !== 'finish-run')
    throw new Error(`SCALE_VIA: close-runs or finish-run, not ${via}`);
  const loader = env.SCALE_LOADER ?? 'bundle';
  if (loader !== 'bundle' && loader !== 'tsx') throw new Error(`SCALE_LOADER: bundle or tsx, not ${loader}`);
  return {
    loader,
    sizes: list(env.SCALE_REPORTS, '100000,300000,1000000').map(Number),
    cases: list(env.SCALE_CASES, 'folder-hive,s3-hive,folder-iceberg,s3-iceberg'),
    s3Max: Number(env.SCALE_S3_MAX_REPORTS ?? 300_000),
    icebergMax: Number(env.SCALE_ICEBERG_MAX_REPORTS ?? 300_000),
    maxInvocations: Number(env.SCALE_MAX_INVOCATIONS ?? 12),
    timeoutS: Number(env.SCALE_TIMEOUT_S ?? 0),
    via,
    lakeShare: Number(env.SCALE_LAKE_SHARE ?? 0.01),
    lakeRunReports: env.SCALE_LAKE_RUN_REPORTS ? Number(env.SCALE_LAKE_RUN_REPORTS) : undefined,
    lakeRunPick: lakeRunPick(env.SCALE_LAKE_RUN_PICK),
    dir: env.SCALE_DIR ?? tmpdir(),
  };
}

function lakeRunPick(v: string | undefined): Settings['lakeRunPick'] {
  if (v === undefined || v === 'spread' || v === 'recent') return v ?? 'spread';
  throw new Error(`SCALE_LAKE_RUN_PICK: spread or recent, not ${v}`);
}

/** One invocation as seen from here: the child's own figures, or what sampling saw of a process that died. */
type Invocation = Omit<ChildFigures, 'closed' | 'process_cpu_seconds' | 'rss_before_mb'> & {
  outcome: 'closed' | 'returned' | 'crashed' | 'killed';
  error?: string;
};

/** CPU seconds (user + sys) and VmHWM of a live process, from /proc. */
async function sampleProc(pid: number): Promise<{ cpu: number; hwm: number } | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpu = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return { cpu, hwm: Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024 };
  } catch {
    return undefined; // exited between two samples
  }
}

/** How a child is started: its loader, and the script it runs (the bundle, or the source under tsx). */
interface ChildScript {
  loader: Loader;
  script: string;
}

/** Runs one finish invocation in a fresh process with `nodeOptions` (its V8 heap among them). */
async function invokeOnce(
  config: ChildConfig,
  how: ChildScript,
  nodeOptions: string,
  timeoutS: number,
  scratch: string,
): Promise<Invocation> {
  const path = join(scratch, `child-${Date.now()}.json`);
  await writeFile(path, JSON.stringify(config));
  const { argv, env } = childCommand(how.loader, how.script, nodeOptions, [path]);
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const started = performance.now();
  let seen = { cpu: 0, hwm: 0 };
  const sampler = setInterval(() => {
    void sampleProc(child.pid!).then((s) => {
      // A zombie's status has no VmHWM: keep the highest figures seen alive.
      if (s) seen = { cpu: Math.max(seen.cpu, s.cpu), hwm: Math.max(seen.hwm, s.hwm || 0) };
    });
  }, SAMPLE_MS);
  let killed = false;
  const timer =
    timeoutS > 0
      ? setTimeout(() => {
          killed = true;
          child.kill('SIGKILL');
        }, timeoutS * 1000)
      : undefined;
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearInterval(sampler);
  if (timer) clearTimeout(timer);
  const seconds = (performance.now() - started) / 1000;
  const line = stdout.trim().split('\n').pop() ?? '';
  if (code === 0 && line.startsWith('{')) {
    const f = JSON.parse(line) as ChildFigures;
    return {
      outcome: f.closed ? 'closed' : 'returned',
      seconds: f.seconds,
      cpu_seconds: f.cpu_seconds,
      peak_rss_mb: f.peak_rss_mb,
      peak_heap_mb: f.peak_heap_mb,
      reads: f.reads,
      writes: f.writes,
      lists: f.lists,
      deletes: f.deletes,
    };
  }
  const reason = stderr.split('\n').find((l) => /heap limit|Error|error/.test(l)) ?? `exit ${code}`;
  return {
    outcome: killed ? 'killed' : 'crashed',
    seconds,
    cpu_seconds: seen.cpu,
    peak_rss_mb: seen.hwm,
    peak_heap_mb: Number.NaN,
    reads: Number.NaN,
    writes: Number.NaN,
    lists: Number.NaN,
    deletes: Number.NaN,
    error: reason.slice(0, 200),
  };
}

/** Invokes the finish step until the run's tombstone exists, or the bound; every invocation's figures. */
async function driveFinish(
  storage: Storage,
  config: ChildConfig,
  how: ChildScript,
  s: Settings,
  nodeOptions: string,
  scratch: string,
): Promise<{ invocations: Invocation[]; closed: boolean }> {
  const invocations: Invocation[] = [];
  let crashes = 0;
  while (invocations.length < s.maxInvocations) {
    const one = await invokeOnce(config, how, nodeOptions, s.timeoutS, scratch);
    invocations.push(one);
    process.stderr.write(`    invocation ${invocations.length}: ${JSON.stringify(one)}\n`);
    if (await isClosed(storage, config.runId)) return { invocations, closed: true };
    crashes = one.outcome === 'crashed' || one.outcome === 'killed' ? crashes + 1 : 0;
    if (crashes >= CRASHES_IN_A_ROW) break;
  }
  return { invocations, closed: false };
}

const nameOf = (f: { format: string; table_or_entity: string }) =>
  f.format === 'parquet' ? f.table_or_entity : `raw:${f.table_or_entity}`;

/**
 * Checks a closed run against what was staged: the manifest's counts against the records, the
 * published rows per table against the staged rows, each published Parquet file's footer
 * against its manifest entry, and the run's folder emptied. Returns the problems found.
 */
async function verifyRun(
  storage: Storage,
  run: RunRef,
  syn: Synthesized,
  liveReports: number | undefined,
): Promise<string[]> {
  const problems: string[] = [];
  const expect = (what: string, got: unknown, want: unknown) => {
    if (got !== want) problems.push(`${what}: ${String(got)}, expected ${String(want)}`);
  };
  const key = manifestKey(run.dt, run.run_id);
  const found = await storage.get(key);
  if (!found) return [`no manifest at ${key}`];
  const manifest: Manifest = parseRecord(ManifestSchema, found.body, key);
  expect('status', manifest.status, 'succeeded');
  expect('campaigns', manifest.counts.campaigns, syn.campaigns);
  expect('jobs', manifest.counts.jobs, syn.jobs);
  expect('reports_exported', manifest.counts.reports_exported, syn.exported);
  expect('reports_unchanged', manifest.counts.reports_unchanged, syn.unchanged);
  expect('reports_failed', manifest.counts.reports_failed, 0);
  expect('requests.total', manifest.requests.total, syn.requests);
  const published: Record<string, number> = {};
  for (const f of manifest.files) published[nameOf(f)] = (published[nameOf(f)] ?? 0) + f.rows;
  for (const name of new Set([...Object.keys(published), ...Object.keys(syn.rows)])) {
    expect(`rows of ${name}`, published[name], syn.rows[name]);
  }
  for (const f of manifest.files.filter((e) => e.format === 'parquet')) {
    const body = (await storage.get(f.key))?.body;
    if (!body) {
      problems.push(`published ${f.key} is missing`);
      continue;
    }
    const buffer = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
    expect(`footer num_rows of ${f.key}`, Number(parquetMetadata(buffer).num_rows), f.rows);
    expect(`bytes of ${f.key}`, body.byteLength, f.bytes);
  }
  if (liveReports !== undefined) {
    // Every job of the lake has exactly one live row in reports_current, whatever the run superseded.
    const { metadata } = await new FileCatalog(storage).load(currentTableName('reports'));
    const current = metadata?.snapshots?.find(
      (x) => BigInt(x['snapshot-id']) === BigInt(metadata['current-snapshot-id'] ?? -1),
    );
    const live =
      Number(current?.summary['total-records']) - Number(current?.summary['total-position-deletes'] ?? 0);
    expect('live rows of reports_current', live, liveReports);
  }
  const left = [];
  for await (const k of storage.list(STATE_KEYS.runPrefix(run.run_id))) left.push(k);
  const kept = [STATE_KEYS.closed(run.run_id), STATE_KEYS.closing(run.run_id)].sort();
  if (JSON.stringify(left.sort()) !== JSON.stringify(kept))
    problems.push(`run folder holds ${left.length} keys`);
  return problems;
}

/** Deletes every object of a prefix-rooted storage (fauxqs keeps them in this process's memory). */
async function clear(storage: Storage): Promise<void> {
  const keys: string[] = [];
  for await (const k of storage.list('')) keys.push(k);
  for (let i = 0; i < keys.length; i += 10_000) await storage.delete(keys.slice(i, i + 10_000));
}

interface CaseResult {
  name: string;
  reports: number;
  lake: number;
  invocations: Invocation[];
  closed: boolean;
  problems: string[];
  staged: Synthesized;
}

const max = (xs: number[]) => Math.max(...xs.filter((x) => !Number.isNaN(x)), 0);
const round = (x: number, digits = 1) => Number(x.toFixed(digits));

export async function benchScale(): Promise<Record<string, number>> {
  const s = settings(process.env);
  const { FUNCTION_SETTINGS } = await import('../../infra/constructs/functions.js');
  const finish = FUNCTION_SETTINGS['finish-run'];
  const nodeOptions = functionNodeOptions(finish.memorySize, FUNCTION_SIZES['finish-run'].oldSpaceShare);
  const timeoutS = finish.timeout.toSeconds();
  const scratch = await mkdtemp(join(s.dir, 'bench-scale-'));
  let aws: LocalAws | undefined;
  const results: CaseResult[] = [];
  const templates = new Map<string, Templates>();
  const templatesOf = async (run: RunRef) => {
    const key = `${run.run_id}-${run.table_format ?? 'hive'}`;
    if (!templates.has(key)) templates.set(key, await makeTemplates(run));
    return templates.get(key)!;
  };
  process.stderr.write(
    `scale: finish-run ${finish.memorySize} MB → NODE_OPTIONS ${nodeOptions}, timeout ${timeoutS} s, via ${s.via}, loader ${s.loader}, next run's jobs ${s.lakeRunPick}\n`,
  );
  let baselines: Baselines | undefined;
  try {
    const bundle = join(scratch, 'scale-child.js');
    await bundleAsLambda(CHILD_SOURCE, bundle);
    baselines = await measureBaselines(scratch, bundle, nodeOptions);
    process.stderr.write(`  empty baselines (VmHWM MB): ${JSON.stringify(baselines)}\n`);
    const how: ChildScript = { loader: s.loader, script: s.loader === 'bundle' ? bundle : CHILD_SOURCE };
    for (const size of s.sizes) {
      for (const name of s.cases) {
        const [where, format] = name.split('-') as ['folder' | 's3', 'hive' | 'iceberg'];
        if (where === 's3' && size > s.s3Max) continue;
        if (format === 'iceberg' && size > s.icebergMax) continue;
        const run1: RunRef = { ...RUN1, ...(format === 'iceberg' && { table_format: 'iceberg' as const }) };
        const encoding: Encoding =
          format === 'iceberg' || process.env.SCALE_DISTINCT_IDS ? 'per-unit' : 'repeat';
        const root = join(scratch, `${name}-${size}`);
        process.stderr.write(`  ${name} ${size}: staging (${encoding})\n`);
        const t0 = performance.now();
        const staged = await synthesizeRun(fastFolder(root), await templatesOf(run1), {
          reports: size,
          encoding,
          share: 1,
          startedAt: new Date(),
        });
        process.stderr.write(
          `  ${name} ${size}: staged ${staged.stagedFiles} files, ${round(staged.stagedBytes / 1e6)} MB, ${staged.records} records in ${round((performance.now() - t0) / 1000)} s\n`,
        );
        let storage: Storage = new LocalStorage(root);
        let target: Target = { kind: 'folder', root };
        if (where === 's3') {
          if (!aws) {
            const { startLocalAws } = await import('../helpers/fauxqs.js');
            aws = await startLocalAws({ bodyLimit: S3_BODY_LIMIT });
            await aws.createBucket(BUCKET);
          }
          const prefix = `${name}-${size}`;
          const s3 = new S3Storage({ bucket: BUCKET, prefix, client: aws.s3Client() });
          await copyPrefix(storage, s3, '');
          await rm(root, { recursive: true, force: true });
          storage = s3;
          target = { kind: 's3', endpoint: aws.endpoint, bucket: BUCKET, prefix };
        }
        const runCase = async (run: RunRef, lake: number, syn: Synthesized) => {
          const config: ChildConfig = { target, runId: run.run_id, via: s.via, timeoutMs: timeoutS * 1000 };
          const driven = await driveFinish(storage, config, how, s, nodeOptions, scratch);
          const live = format === 'iceberg' ? size : undefined;
          const problems = driven.closed ? await verifyRun(storage, run, syn, live) : ['not closed'];
          const result = { name, reports: syn.exported, lake, ...driven, problems, staged: syn };
          results.push(result);
          process.stderr.write(`  ${name} ${size}${lake ? ` lake ${lake}` : ''}: ${summaryLine(result)}\n`);
          return driven.closed;
        };
        try {
          const closed = await runCase(run1, 0, staged);
          if (format === 'iceberg' && closed) {
            const run2: RunRef = { ...RUN2, table_format: 'iceberg' };
            const syn2 = await synthesizeRun(
              where === 'folder' ? fastFolder(root) : storage,
              await templatesOf(run2),
              {
                reports: size,
                encoding,
                share: s.lakeRunReports ? s.lakeRunReports / size : s.lakeShare,
                pick: s.lakeRunPick,
                startedAt: new Date(),
              },
            );
            await runCase(run2, size, syn2);
          }
        } finally {
          if (where === 's3') await clear(storage);
          await rm(root, { recursive: true, force: true });
        }
      }
    }
  } finally {
    await aws?.close();
    await rm(scratch, { recursive: true, force: true });
  }
  printTable(results, nodeOptions, finish.memorySize, timeoutS, s.loader);
  return { ...figuresOf(results, finish.memorySize, timeoutS), ...baselineFigures(baselines) };
}

/** VmHWM (MB) of processes that load their modules and exit: what a child holds before any work. */
interface Baselines {
  /** `node` alone, with the functions' NODE_OPTIONS. */
  node: number;
  /** scale-child.ts under tsx (`--baseline`). */
  child_tsx: number;
  /** scale-child bundled as the functions are (`--baseline`). */
  child_bundle: number;
  /** finish-run's own handler (functions/aws/finish-run.ts) bundled the same way, required. */
  finish_run_bundle: number;
}

async function measureBaselines(scratch: string, bundle: string, nodeOptions: string): Promise<Baselines> {
  const childBaseline = async (loader: Loader, script: string) => {
    const figures: number[] = [];
    for (let i = 0; i < BASELINE_SAMPLES; i++) {
      const { argv, env } = childCommand(loader, script, nodeOptions, ['--baseline']);
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'], env });
        let text = '';
        child.stdout.on('data', (d: Buffer) => (text += d.toString()));
        child.on('error', reject);
        child.on('close', (code) =>
          code === 0 ? resolve(text) : reject(new Error(`baseline exit ${code}`)),
        );
      });
      figures.push((JSON.parse(out) as { baseline_rss_mb: number }).baseline_rss_mb);
    }
    return median(figures);
  };
  const handler = join(scratch, 'finish-run.js');
  await bundleAsLambda(FINISH_RUN_SOURCE, handler);
  return {
    node: await loadedHighWaterMb(undefined, LAMBDA_ENV, nodeOptions, BASELINE_SAMPLES),
    child_tsx: await childBaseline('tsx', CHILD_SOURCE),
    child_bundle: await childBaseline('bundle', bundle),
    finish_run_bundle: await loadedHighWaterMb(handler, LAMBDA_ENV, nodeOptions, BASELINE_SAMPLES),
  };
}

function baselineFigures(b: Baselines | undefined): Record<string, number> {
  if (!b) return {};
  return Object.fromEntries(Object.entries(b).map(([k, v]) => [`baseline_${k}_rss_mb`, Math.round(v)]));
}

function summaryLine(r: CaseResult): string {
  const inv = r.invocations;
  return `${inv.length} invocation(s), ${r.closed ? 'closed' : 'NOT closed'}, CPU max ${round(max(inv.map((i) => i.cpu_seconds)))} s, RSS max ${round(max(inv.map((i) => i.peak_rss_mb)))} MB, ${r.problems.length === 0 ? 'correct' : r.problems.join('; ')}`;
}

function printTable(
  results: CaseResult[],
  nodeOptions: string,
  memoryMb: number,
  timeoutS: number,
  loader: Loader,
): void {
  const rows = results.map((r) => {
    const inv = r.invocations;
    const cpu = max(inv.map((i) => i.cpu_seconds));
    return [
      r.name,
      String(r.reports),
      r.lake ? String(r.lake) : '-',
      `${inv.length} (${inv.map((i) => i.outcome[0]).join('')})`,
      r.closed ? 'yes' : 'NO',
      String(round(cpu)),
      String(round((cpu * LAMBDA_MB_PER_VCPU) / memoryMb)),
      String(round(max(inv.map((i) => i.seconds)))),
      String(Math.round(max(inv.map((i) => i.peak_rss_mb)))),
      String(Math.round(max(inv.map((i) => i.peak_heap_mb)))),
      `${max(inv.map((i) => i.reads))}/${max(inv.map((i) => i.writes))}/${max(inv.map((i) => i.lists))}/${max(inv.map((i) => i.deletes))}`,
      r.problems.length === 0 ? 'yes' : `NO (${r.problems.length})`,
    ];
  });
  const head = [
    'case',
    'reports',
    'lake',
    'invocations',
    'closed',
    'CPU s',
    `CPU at ${memoryMb} MB s`,
    'wall s',
    'RSS MB',
    'heap MB',
    'reads/writes/lists/deletes',
    'correct',
  ];
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(width[i]!)).join('  ')}\n`;
  process.stdout.write(
    `\n== scale: finish-run, ${memoryMb} MB, NODE_OPTIONS ${nodeOptions}, timeout ${timeoutS} s, loader ${loader}; per-invocation maxima\n`,
  );
  process.stdout.write(line(head));
  for (const r of rows) process.stdout.write(line(r));
  for (const r of results.filter((x) => x.problems.length > 0)) {
    process.stdout.write(`  ${r.name} ${r.reports}: ${r.problems.slice(0, 5).join('; ')}\n`);
  }
}

function figuresOf(results: CaseResult[], memoryMb: number, timeoutS: number): Record<string, number> {
  const f: Record<string, number> = { finish_memory_mb: memoryMb, finish_timeout_s: timeoutS };
  for (const r of results) {
    const inv = r.invocations;
    const p = `${r.name.replace('-', '_')}_${r.lake ? `lake${r.lake / 1000}k_run${r.reports}` : `${r.reports / 1000}k`}`;
    f[`${p}_invocations`] = inv.length;
    f[`${p}_closed`] = r.closed ? 1 : 0;
    f[`${p}_correct`] = r.problems.length === 0 ? 1 : 0;
    f[`${p}_cpu_s_max`] = round(max(inv.map((i) => i.cpu_seconds)));
    f[`${p}_wall_s_max`] = round(max(inv.map((i) => i.seconds)));
    f[`${p}_peak_rss_mb_max`] = Math.round(max(inv.map((i) => i.peak_rss_mb)));
    f[`${p}_peak_heap_mb_max`] = Math.round(max(inv.map((i) => i.peak_heap_mb)));
    f[`${p}_reads_max`] = max(inv.map((i) => i.reads));
    f[`${p}_writes_max`] = max(inv.map((i) => i.writes));
    f[`${p}_staged_files`] = r.staged.stagedFiles;
    f[`${p}_staged_mb`] = round(r.staged.stagedBytes / 1e6);
  }
  return f;
}
