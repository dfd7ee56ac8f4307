/**
 * AWS request cost per 100,000 reports at the stack's default settings, from counts measured
 * here: storage requests of a run with the Lambda unit size, SQS requests derived from the
 * number of units and batches, and Lambda GB-seconds from the measured time per unit plus an
 * assumed API latency (the simulator answers in microseconds; a real API does not).
 */
import { rm } from 'node:fs/promises';
import { EXAMPLE_API_BASE_URL, parseConfig } from '../../infra/config.js';
import { FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import { exportUnit } from '../../shared/export/run/export-unit.js';
import { finishRun } from '../../shared/export/run/finish-run.js';
import { planCampaign } from '../../shared/export/run/plan-campaign.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { exporter, tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';

/** The stack's defaults (infra/config.ts, infra/constructs/functions.ts). */
const STACK = parseConfig({ apiBaseUrl: EXAMPLE_API_BASE_URL });
const UNIT_SIZE = STACK.unitSize;
const REPORT_BATCH_SIZE = STACK.reportBatchSize;
const REPORT_CONCURRENCY = STACK.reportConcurrency;
const EXPORT_MEMORY_GB = FUNCTION_SETTINGS['export-reports'].memorySize / 1024;
/** Assumed API latency per report request in AWS (not measurable here). */
const ASSUMED_API_LATENCY_S = 0.2;

/** us-east-1 list prices, 2026. */
const PRICE = {
  s3Put: 0.005 / 1000,
  s3Get: 0.0004 / 1000,
  sqsRequest: 0.4 / 1e6,
  lambdaGbSecondArm: 0.0000133334,
  lambdaRequest: 0.2 / 1e6,
};

const REPORTS = 2_000;
const PER = 100_000;

export async function benchCost(): Promise<Record<string, number>> {
  const simulator = await startSimulator({
    seed: 9,
    campaigns: 4,
    jobsPerCampaign: REPORTS / 4,
    reportSize: 'mixed',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
  });
  const out = await tempDir('bench-cost');
  try {
    const { deps } = exporter(simulator, out);
    const started = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
    let unitSeconds = 0;
    let units = 0;
    for (const campaignId of started.record.campaign_ids) {
      const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId }, UNIT_SIZE);
      for (const unit of planned.units) {
        const t = performance.now();
        // As in Lambda: every delivery first looks for an earlier delivery's summary.
        await exportUnit(deps, unit, { resume: true, concurrency: REPORT_CONCURRENCY });
        unitSeconds += (performance.now() - t) / 1000;
        units++;
      }
    }
    await finishRun(deps, started.run.run_id, { force: true });
    const s = deps.storage.stats();
    const scale = PER / REPORTS;
    const unitsPer = units * scale;
    const s3 = ((s.writes + s.lists + s.deletes) * PRICE.s3Put + s.reads * PRICE.s3Get) * scale;
    // Per unit: 1/10 SendMessageBatch, and per Lambda batch one ReceiveMessage and one DeleteMessageBatch.
    const sqsRequests = unitsPer * (0.1 + 2 / REPORT_BATCH_SIZE);
    const sqs = sqsRequests * PRICE.sqsRequest;
    const secondsPerUnit = unitSeconds / units + (UNIT_SIZE * ASSUMED_API_LATENCY_S) / REPORT_CONCURRENCY;
    const invocations = unitsPer / REPORT_BATCH_SIZE;
    const lambda =
      unitsPer * secondsPerUnit * EXPORT_MEMORY_GB * PRICE.lambdaGbSecondArm +
      invocations * PRICE.lambdaRequest;
    return {
      unit_size: UNIT_SIZE,
      units_measured: units,
      cpu_seconds_per_unit_measured: unitSeconds / units,
      s3_requests_per_100k: (s.reads + s.writes + s.lists + s.deletes) * scale,
      sqs_requests_per_100k: sqsRequests,
      lambda_gb_s_per_100k: unitsPer * secondsPerUnit * EXPORT_MEMORY_GB,
      usd_s3_per_100k: s3,
      usd_sqs_per_100k: sqs,
      usd_lambda_per_100k: lambda,
      usd_total_per_100k: s3 + sqs + lambda,
    };
  } finally {
    await simulator.close();
    await rm(out, { recursive: true, force: true });
  }
}
