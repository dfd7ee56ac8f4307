/**
 * Peak memory of one export-reports unit of 100 large reports (50 sections × 30 questions),
 * measured in a child process running exactly `exportUnit` as the Lambda does.
 * `tsx test/bench/unit-memory.ts <base_url> <api_key> <out>` (child) prints one JSON line.
 */
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { cliDeps } from '../../functions/cli/deps.js';
import { exportUnit } from '../../shared/export/run/export-unit.js';
import { planCampaign } from '../../shared/export/run/plan-campaign.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { silentLog } from '../../shared/log.js';
import { tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';

const REPORTS = 100;

async function child(baseUrl: string, apiKey: string, out: string): Promise<void> {
  const deps = cliDeps({ baseUrl, apiKey, out, concurrency: 8, maxRate: 10_000, log: silentLog });
  const started = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
  const [campaignId] = started.record.campaign_ids;
  const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId! }, REPORTS);
  const before = process.resourceUsage().maxRSS / 1024;
  const t = performance.now();
  const summary = await exportUnit(deps, planned.units[0]!, { resume: true, concurrency: 8 });
  const exported = Object.values(summary.jobs).filter((r) => r.outcome === 'exported').length;
  process.stdout.write(
    `${JSON.stringify({ exported, seconds: (performance.now() - t) / 1000, rss_before_mb: before, peak_rss_mb: process.resourceUsage().maxRSS / 1024 })}\n`,
  );
}

export async function benchUnitMemory(): Promise<Record<string, number>> {
  const simulator = await startSimulator({
    seed: 13,
    campaigns: 1,
    jobsPerCampaign: REPORTS,
    reportSize: 'large',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
  });
  const out = await tempDir('bench-unit');
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'test/bench/unit-memory.ts', simulator.url, simulator.keys.valid, out],
      { maxBuffer: 1 << 20 },
    );
    const r = JSON.parse(stdout) as Record<string, number>;
    return {
      large_reports: r.exported ?? 0,
      unit_seconds: r.seconds ?? 0,
      rss_before_unit_mb: r.rss_before_mb ?? 0,
      peak_rss_mb: r.peak_rss_mb ?? 0,
    };
  } finally {
    await simulator.close();
    await rm(out, { recursive: true, force: true });
  }
}

const [baseUrl, apiKey, out] = process.argv.slice(2);
if (baseUrl && apiKey && out && process.argv[1]?.endsWith('unit-memory.ts')) {
  child(baseUrl, apiKey, out).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
