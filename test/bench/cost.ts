/**
 * AWS cost per 100,000 reports at the stack's default settings, from counts measured here:
 * - S3 requests of a run with the Lambda unit size (the steps called in process on a folder,
 *   which counts each request S3 would bill); SQS requests derived from the units and batches;
 * - Lambda GB-seconds as billed: a run at the default `rateCeiling` is rate-bound (100,000
 *   report requests at 18 req/s, the leasers' share of 20, take ~5,600 s), and every
 *   export-reports invocation the event source keeps alive is billed while it waits for the
 *   request budget. Measured on the loopback topology (the topology bench's `defaults` variant:
 *   the real handlers, `reportMaxConcurrency` workers of which `reportFetchers` fetch at once, the shared budget on dynalite, an API
 *   200 ms away), scaled by reports; the rate-bound model beside it for a check;
 * - DynamoDB requests of the request budget and the fetcher slots in that same run, counted per
 *   operation; the units that waited for a fetcher slot, and their SQS requests.
 */
import { rm } from 'node:fs/promises';
import { EXAMPLE_API_BASE_URL, parseConfig, reportFetchersOf } from '../../infra/config.js';
import { FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import { leasingCeiling } from '../../shared/api/request-budget.js';
import { exportUnit } from '../../shared/export/run/export-unit.js';
import { finishRun } from '../../shared/export/run/finish-run.js';
import { planCampaign } from '../../shared/export/run/plan-campaign.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { exporter, tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';
import { benchTopology } from './topology.js';

/** The stack's defaults (infra/config.ts, infra/constructs/functions.ts). */
const STACK = parseConfig({ apiBaseUrl: EXAMPLE_API_BASE_URL });
const UNIT_SIZE = STACK.unitSize;
const REPORT_BATCH_SIZE = STACK.reportBatchSize;
const REPORT_CONCURRENCY = STACK.reportConcurrency;
const memoryGb = (name: keyof typeof FUNCTION_SETTINGS) => FUNCTION_SETTINGS[name].memorySize / 1024;
/** Every container that may call the API (the stack's API_CONTAINERS). */
const API_CONTAINERS = STACK.reportMaxConcurrency + STACK.planMaxConcurrency + 1;

/** us-east-1 list prices, 2026 (DynamoDB on demand since its cut of November 2024). */
const PRICE = {
  s3Put: 0.005 / 1000,
  s3Get: 0.0004 / 1000,
  sqsRequest: 0.4 / 1e6,
  lambdaGbSecondArm: 0.0000133334,
  lambdaRequest: 0.2 / 1e6,
  /** A PutItem of an item under 1 KB: one write request unit. */
  dynamoWrite: 0.625 / 1e6,
  /** A strongly consistent GetItem of an item under 4 KB: one read request unit. */
  dynamoRead: 0.125 / 1e6,
};

/** Reports of the storage run (S3 requests, CPU per unit). */
const REPORTS = 2_000;
/** Jobs per campaign per worker of the topology run (3 campaigns): 1,200 reports with 2 workers. */
const TOPOLOGY_JOBS = 200;
const PER = 100_000;

/**
 * S3 requests and CPU of a run's steps, called in process on a folder; the requests counted
 * after each step (`StorageStats` are cumulative): start-run, planning and units, finish-run.
 */
async function storageRun() {
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
    const afterStart = deps.storage.stats();
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
    const afterUnits = deps.storage.stats();
    const t = performance.now();
    await finishRun(deps, started.run.run_id, { force: true });
    const finishSeconds = (performance.now() - t) / 1000;
    return { afterStart, afterUnits, stats: deps.storage.stats(), units, unitSeconds, finishSeconds };
  } finally {
    await simulator.close();
    await rm(out, { recursive: true, force: true });
  }
}

export async function benchCost(): Promise<Record<string, number>> {
  const { afterStart, afterUnits, stats: s, units, unitSeconds, finishSeconds } = await storageRun();
  const scale = PER / REPORTS;
  const unitsPer = units * scale;
  const s3Requests = (s.reads + s.writes + s.lists + s.deletes) * scale;
  const s3AllScaled = ((s.writes + s.lists + s.deletes) * PRICE.s3Put + s.reads * PRICE.s3Get) * scale;
  // What grows with the reports: the units' and plans' requests (500 jobs a campaign here), and
  // finish-run's reads (each staged file and record once). What a run makes once, whatever its
  // size, is not scaled: start-run's, and finish-run's writes, lists and deletes (an output per
  // 256 MB of staged input and a closing piece per 2,000 files: 13 outputs at 100,000 reports,
  // BENCHMARKS.md Publish; a listing or a delete is 1,000 keys).
  const planned = { reads: afterUnits.reads - afterStart.reads, other: 0 };
  planned.other =
    afterUnits.writes +
    afterUnits.lists +
    afterUnits.deletes -
    afterStart.writes -
    afterStart.lists -
    afterStart.deletes;
  const finishReads = s.reads - afterUnits.reads;
  const onceOther =
    afterStart.writes +
    afterStart.lists +
    afterStart.deletes +
    (s.writes + s.lists + s.deletes - afterUnits.writes - afterUnits.lists - afterUnits.deletes);
  const s3PutClass = planned.other * scale + onceOther;
  const s3GetClass = (planned.reads + finishReads) * scale + afterStart.reads;
  const s3RequestsGrown = s3PutClass + s3GetClass;
  const s3 = s3PutClass * PRICE.s3Put + s3GetClass * PRICE.s3Get;
  // Per unit: 1/10 SendMessageBatch, and per Lambda batch one ReceiveMessage and one DeleteMessageBatch.
  const sqsBase = unitsPer * (0.1 + 2 / REPORT_BATCH_SIZE);

  const workers = STACK.reportMaxConcurrency;
  const topo = await benchTopology({
    variants: ['defaults'],
    workerCounts: [workers],
    jobsPerCampaignPerWorker: TOPOLOGY_JOBS,
  });
  const figure = (name: string) => topo[`defaults_n${workers}_${name}`] ?? Number.NaN;
  const topoScale = PER / figure('reports');
  const reportGbS = figure('report_billed_s') * topoScale * memoryGb('export-reports');
  const planGbS = figure('plan_billed_s') * topoScale * memoryGb('plan-campaign');
  const finishGbS = finishSeconds * scale * memoryGb('finish-run');
  // Units that waited for a fetcher slot (the topology's delays are the stack's, scaled as the
  // run), and the busy invocations that sent them on: each sends its batch's units in one
  // SendMessageBatch, after its batch's receive, and before its delete.
  const waits = figure('units_waiting_for_fetcher') * topoScale;
  const waitBatches = figure('batches_waiting_for_fetcher') * topoScale;
  const invocations = unitsPer / REPORT_BATCH_SIZE + waitBatches;
  const lambda =
    (reportGbS + planGbS + finishGbS) * PRICE.lambdaGbSecondArm + invocations * PRICE.lambdaRequest;
  // The rate-bound model: every fetcher alive while the run's requests go at the leasers' rate.
  const leasingRate = leasingCeiling({ ceiling: STACK.rateCeiling, containers: API_CONTAINERS });
  const modelGbS = (reportFetchersOf(STACK) * PER * memoryGb('export-reports')) / leasingRate;
  const sqsRequests = sqsBase + 3 * waitBatches;
  const sqs = sqsRequests * PRICE.sqsRequest;
  const dynamoGets = figure('dynamodb_get_item') * topoScale;
  // A failed conditional write is billed as a write; a delete is a write.
  const dynamoPuts = figure('dynamodb_put_item') * topoScale;
  const dynamoDeletes = figure('dynamodb_delete_item') * topoScale;
  const dynamo = dynamoGets * PRICE.dynamoRead + (dynamoPuts + dynamoDeletes) * PRICE.dynamoWrite;
  return {
    unit_size: UNIT_SIZE,
    units_measured: units,
    cpu_seconds_per_unit_measured: unitSeconds / units,
    s3_requests_per_100k_all_scaled: s3Requests,
    usd_s3_per_100k_all_scaled: s3AllScaled,
    s3_requests_per_100k: s3RequestsGrown,
    s3_writes_per_unit_planning_and_units: (afterUnits.writes - afterStart.writes) / units,
    sqs_requests_per_100k: sqsRequests,
    topology_reports: figure('reports'),
    topology_seconds: figure('seconds'),
    export_reports_gb_s_per_100k: reportGbS,
    export_reports_gb_s_rate_bound_model: modelGbS,
    plan_campaign_gb_s_per_100k: planGbS,
    finish_run_gb_s_per_100k: finishGbS,
    dynamodb_get_item_per_100k: dynamoGets,
    dynamodb_put_item_per_100k: dynamoPuts,
    dynamodb_delete_item_per_100k: dynamoDeletes,
    units_waiting_for_fetcher_per_100k: waits,
    batches_waiting_for_fetcher_per_100k: waitBatches,
    usd_s3_per_100k: s3,
    usd_sqs_per_100k: sqs,
    usd_lambda_per_100k: lambda,
    usd_dynamodb_per_100k: dynamo,
    usd_total_per_100k: s3 + sqs + lambda + dynamo,
  };
}
