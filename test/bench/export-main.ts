/**
 * End-to-end export at 5,000 and 20,000 reports with no rate limit: reports/s, the exporter's
 * peak RSS (measured in a child process, the simulator stays here), and storage requests per
 * 1,000 reports. Targets: RSS(20k) ≤ 1.1 × RSS(5k) and ≤ 300 MB; ≤ 100 requests per 1,000.
 * `cli-memory`: the CLI's peak RSS over a whole run of 20,000 and 100,000 reports, and of its
 * fetching and finishing (publish) parts. Target: ≤ 300 MB for a run of any size (issue 31).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';
import { buildCli } from '../tools/build-cli.js';
import { runCliProcess } from './cli-process.js';
import type { PhaseFigures } from './memory-phases.js';

const run = promisify(execFile);
const JOBS_PER_CAMPAIGN = 500;

/** The V8 flags `npm run export` gives the CLI (package.json), so the benchmark measures the same process. */
function cliNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return (pkg.scripts.export ?? '').split(/\s+/).filter((token) => token.startsWith('--'));
}

export interface ChildFigures {
  reports_exported: number;
  reports_per_s: number;
  seconds: number;
  finish_seconds: number;
  peak_rss_mb: number;
  fetch_peak_rss_mb: number;
  finish_peak_rss_mb: number;
  storage_requests_per_1000_reports: number;
  cpu_s: number;
  phases: Record<string, PhaseFigures>;
}

/** How a benchmark's exporter child runs: its Node flags (default `npm run export`'s), table format and environment. */
export interface ExportChildOptions {
  nodeFlags?: string[];
  tableFormat?: 'hive' | 'iceberg';
  env?: NodeJS.ProcessEnv;
}

export async function exportReports(
  reports: number,
  reportSize: 'mixed' | 'small',
  options: ExportChildOptions = {},
): Promise<ChildFigures> {
  const simulator = await startSimulator({
    seed: 5,
    campaigns: reports / JOBS_PER_CAMPAIGN,
    jobsPerCampaign: JOBS_PER_CAMPAIGN,
    reportSize,
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
  });
  const out = await tempDir('bench-export');
  try {
    const { stdout } = await run(
      process.execPath,
      [
        ...(options.nodeFlags ?? cliNodeFlags()),
        '--import',
        'tsx',
        'test/bench/export.ts',
        simulator.url,
        simulator.keys.valid,
        out,
        options.tableFormat ?? 'hive',
      ],
      { maxBuffer: 1 << 20, ...(options.env && { env: { ...process.env, ...options.env } }) },
    );
    return JSON.parse(stdout) as ChildFigures;
  } finally {
    await simulator.close();
    await rm(out, { recursive: true, force: true });
  }
}

export async function benchExport(): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  // 'mixed' is the realistic case (1% large reports); 'small' has no outliers, so its ratio
  // shows whether memory grows with the run or only with the heaviest unit.
  for (const size of ['mixed', 'small'] as const) {
    const small = await exportReports(5_000, size);
    const large = await exportReports(20_000, size);
    Object.assign(figures, {
      [`${size}_reports_per_s_5k`]: small.reports_per_s,
      [`${size}_peak_rss_mb_5k`]: small.peak_rss_mb,
      [`${size}_reports_per_s_20k`]: large.reports_per_s,
      [`${size}_peak_rss_mb_20k`]: large.peak_rss_mb,
      [`${size}_rss_ratio_20k_over_5k`]: large.peak_rss_mb / small.peak_rss_mb,
      [`${size}_storage_requests_per_1000_reports_20k`]: large.storage_requests_per_1000_reports,
    });
  }
  return figures;
}

/** Run sizes of `cli-memory`: the 20k, and 5× that to show the peak does not grow with the run. */
const CLI_MEMORY_REPORTS = [20_000, 100_000] as const;
const CLI_RSS_TARGET_MB = 300;

/**
 * `cli-memory`: for each run size, the run in-process (export.ts: the peak split by phase of the
 * finish), the packaged CLI as users run it (`node dist/cli.mjs export`, built here into a
 * temporary folder: it starts Node again in the same process with glibc's and V8's start-up
 * settings, functions/cli/reexec.ts) and `npm run export` (tsx, its process tree too; neither the
 * restart nor glibc's setting).
 */
export async function benchCliMemory(): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  const dir = await tempDir('bench-cli-memory');
  try {
    const { outfile } = await buildCli(join(dir, 'cli.mjs'));
    for (const reports of CLI_MEMORY_REPORTS) {
      const run = await exportReports(reports, 'mixed');
      const k = `${reports / 1000}k`;
      // The finish's heaviest phase: `publish:<outputs in flight>`, `close`, `state`, `cleanup`.
      const [heaviest, phase] = Object.entries(run.phases)
        .filter(([name]) => name !== 'fetch')
        .reduce((a, b) => (b[1].peak_rss_mb > a[1].peak_rss_mb ? b : a));
      process.stderr.write(`cli-memory ${k}: finish peak in ${heaviest}: ${JSON.stringify(phase)}\n`);
      const bundle = await runCliProcess(reports, { kind: 'bundle', entry: outfile });
      const tsx = await runCliProcess(reports, { kind: 'tsx' });
      Object.assign(figures, {
        [`peak_rss_mb_${k}`]: run.peak_rss_mb,
        [`fetch_peak_rss_mb_${k}`]: run.fetch_peak_rss_mb,
        [`finish_peak_rss_mb_${k}`]: run.finish_peak_rss_mb,
        [`finish_peak_heap_used_mb_${k}`]: phase.at_peak.heap_used,
        [`finish_peak_heap_total_mb_${k}`]: phase.at_peak.heap_total,
        [`finish_peak_external_mb_${k}`]: phase.at_peak.external,
        [`finish_peak_other_mb_${k}`]: phase.at_peak.other,
        [`cpu_s_${k}`]: run.cpu_s,
        [`reports_per_s_${k}`]: run.reports_per_s,
        [`finish_seconds_${k}`]: run.finish_seconds,
        [`packaged_peak_rss_mb_${k}`]: bundle.peak_rss_mb,
        [`packaged_cpu_s_${k}`]: bundle.cpu_s,
        [`npm_export_peak_rss_mb_${k}`]: tsx.peak_rss_mb,
        [`npm_export_tree_peak_rss_mb_${k}`]: tsx.tree_peak_rss_mb,
        [`npm_export_cpu_s_${k}`]: tsx.cpu_s,
        [`within_target_${k}`]: Math.max(run.peak_rss_mb, bundle.peak_rss_mb) <= CLI_RSS_TARGET_MB ? 1 : 0,
      });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  figures.rss_ratio_100k_over_20k = figures.peak_rss_mb_100k! / figures.peak_rss_mb_20k!;
  figures.packaged_rss_ratio_100k_over_20k =
    figures.packaged_peak_rss_mb_100k! / figures.packaged_peak_rss_mb_20k!;
  return figures;
}
