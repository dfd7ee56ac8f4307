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
import { promisify } from 'node:util';
import { tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';

const run = promisify(execFile);
const JOBS_PER_CAMPAIGN = 500;

/** The V8 flags `npm run export` gives the CLI (package.json), so the benchmark measures the same process. */
function cliNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return (pkg.scripts.export ?? '').split(/\s+/).filter((token) => token.startsWith('--'));
}

interface ChildFigures {
  reports_exported: number;
  reports_per_s: number;
  seconds: number;
  finish_seconds: number;
  peak_rss_mb: number;
  fetch_peak_rss_mb: number;
  finish_peak_rss_mb: number;
  storage_requests_per_1000_reports: number;
}

async function exportReports(reports: number, reportSize: 'mixed' | 'small'): Promise<ChildFigures> {
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
        ...cliNodeFlags(),
        '--import',
        'tsx',
        'test/bench/export.ts',
        simulator.url,
        simulator.keys.valid,
        out,
      ],
      { maxBuffer: 1 << 20 },
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

export async function benchCliMemory(): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  for (const reports of CLI_MEMORY_REPORTS) {
    const run = await exportReports(reports, 'mixed');
    const k = `${reports / 1000}k`;
    Object.assign(figures, {
      [`peak_rss_mb_${k}`]: run.peak_rss_mb,
      [`fetch_peak_rss_mb_${k}`]: run.fetch_peak_rss_mb,
      [`finish_peak_rss_mb_${k}`]: run.finish_peak_rss_mb,
      [`reports_per_s_${k}`]: run.reports_per_s,
      [`finish_seconds_${k}`]: run.finish_seconds,
      [`within_target_${k}`]: run.peak_rss_mb <= CLI_RSS_TARGET_MB ? 1 : 0,
    });
  }
  figures.rss_ratio_100k_over_20k = figures.peak_rss_mb_100k! / figures.peak_rss_mb_20k!;
  return figures;
}
