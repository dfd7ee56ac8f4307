/**
 * The API request rate the AWS topology achieves with N concurrent export-reports workers
 * (the report queue's maxConcurrency) against an API that allows 50 req/s (token bucket,
 * burst 10), and the share of 429s. Runs the loopback topology (fauxqs, the simulator, the real
 * handlers fed by the test poller) at the stack's default settings, each worker a container of
 * its own, loaded in its own tsx namespace. Variants:
 * - `per-container`: no request budget table: each container's own adaptive limiter, capped at
 *   rateCeiling 20 (the stack before the shared budget).
 * - `budget-50`, `budget-100`: the deployment's shared request budget on a local DynamoDB
 *   (dynalite; each container its own client, one table), rateCeiling 50 (the API's limit) and
 *   100 (above it: the shared rate must find the limit from 429s). Every worker fetches
 *   (`reportFetchers` = the workers): what the budget shares among containers, not the fetcher
 *   slots' one invocation at a time (`defaults` measures those).
 * - `budget-100-warm`: budget-100 measured on the second of two runs on the same table.
 * - `defaults`: the stack's defaults (rateCeiling 20 under the API's 50, the shared budget, the
 *   API 200 ms away), run at the default reportMaxConcurrency only: what a run costs, as
 *   export-reports' billed seconds (every invocation alive, waiting for the budget included) and
 *   the budget's DynamoDB requests per operation (`npm run bench cost` scales these). Of the
 *   workers, `reportFetchers` (1 at the default rate) fetch at once, as the stack sets it; the
 *   others' units wait for a fetcher slot in delayed messages (`units_waiting_for_fetcher`), the
 *   stack's delay scaled as the run is (`delayScale`).
 *
 *     npx tsx test/bench/topology.ts [variant ...] [workers=1,2,4] [jobs=100]
 *
 * prints a table per variant; `jobs` is jobs per campaign per worker (3 campaigns).
 */
import { pathToFileURL } from 'node:url';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type AwsClientStub, mockClient } from 'aws-sdk-client-mock';
import { register } from 'tsx/esm/api';
import { type LocalDynamo, startDynalite } from '../helpers/dynalite.js';
import { startLocalAws } from '../helpers/fauxqs.js';
import {
  asContainer,
  type Container,
  type Containers,
  LoopbackTopology,
  stackSettings,
} from '../integration/aws/loopback.js';
import { startSimulator } from '../simulator/index.js';

/** The API's limit in this benchmark (the figure). */
const API_LIMIT = { ratePerSecond: 50, burst: 10 };
const WORKER_COUNTS = [1, 2, 4];
/**
 * Reports per run grow with N, 300 per worker (at the default unit size 50 and batch size 2: three
 * batches per worker), so that every worker stays busy through the measured window.
 */
const CAMPAIGNS = 3;
const JOBS_PER_CAMPAIGN_PER_WORKER = 100;
/** The middle of the run (by 200 answers) measures the steady rate, without ramp-up and tail. */
const STEADY_FROM = 0.1;
const STEADY_TO = 0.9;
/** An API in another region answers in about this, ms (the simulator otherwise at once). */
export const ASSUMED_API_LATENCY_MS = 200;

/** How the containers are limited: rateCeiling, and whether they share a request budget. */
export const VARIANTS = {
  'per-container': { rateCeiling: 20, budget: false },
  'budget-50': { rateCeiling: 50, budget: true, everyWorkerFetches: true },
  'budget-100': { rateCeiling: 100, budget: true, everyWorkerFetches: true },
  /** The same, measured on a second run: the shared rate starts where the first run left it. */
  'budget-100-warm': { rateCeiling: 100, budget: true, warm: true, everyWorkerFetches: true },
  defaults: { rateCeiling: stackSettings().rateCeiling, budget: true, latencyMs: ASSUMED_API_LATENCY_MS },
} as const satisfies Record<
  string,
  { rateCeiling: number; budget: boolean; warm?: boolean; latencyMs?: number; everyWorkerFetches?: boolean }
>;
export type Variant = keyof typeof VARIANTS;

export interface TopologyBenchOptions {
  workerCounts?: readonly number[];
  variants?: readonly Variant[];
  /** Jobs per campaign for each worker (default 100; 3 campaigns). */
  jobsPerCampaignPerWorker?: number;
}

/** One row per variant and N: `<variant>_n<N>_<figure>`. */
export async function benchTopology(options: TopologyBenchOptions = {}): Promise<Record<string, number>> {
  const secrets = mockClient(SecretsManagerClient);
  const events = mockClient(EventBridgeClient);
  events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'bench' }] });
  const aws = await startLocalAws();
  const dynamo = await startDynalite();
  const figures: Record<string, number> = {};
  try {
    for (const variant of options.variants ?? (Object.keys(VARIANTS) as Variant[])) {
      for (const n of options.workerCounts ?? WORKER_COUNTS) {
        const jobs = n * (options.jobsPerCampaignPerWorker ?? JOBS_PER_CAMPAIGN_PER_WORKER);
        const run = { aws, dynamo, variant, workers: n, jobsPerCampaign: jobs, secrets };
        Object.assign(figures, prefixed(`${variant}_n${n}`, await benchOne(run)));
      }
    }
  } finally {
    await dynamo.close();
    await aws.close();
    secrets.restore();
    events.restore();
  }
  return figures;
}

interface BenchRun {
  aws: Awaited<ReturnType<typeof startLocalAws>>;
  dynamo: LocalDynamo;
  variant: Variant;
  workers: number;
  jobsPerCampaign: number;
  secrets: AwsClientStub<SecretsManagerClient>;
}

async function benchOne(run: BenchRun): Promise<Record<string, number>> {
  const { aws, dynamo, workers, jobsPerCampaign, secrets } = run;
  const variant = VARIANTS[run.variant];
  const sim = await startSimulator({
    seed: 3,
    campaigns: CAMPAIGNS,
    jobsPerCampaign,
    reportSize: 'tiny',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
    rateLimit: API_LIMIT,
    ...('latencyMs' in variant && { latencyMs: variant.latencyMs }),
  });
  const unregister: Array<() => Promise<void>> = [];
  try {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: sim.keys.valid });
    const settings = stackSettings({
      rateCeiling: variant.rateCeiling,
      ...('everyWorkerFetches' in variant && {
        reportFetchers: workers,
        reportMaxConcurrency: Math.max(workers, stackSettings().report.maxConcurrency),
      }),
    });
    const name = `bench-${run.variant}-n${workers}`;
    const topo = await LoopbackTopology.create({
      aws,
      apiBaseUrl: sim.url,
      bucket: 'bench-lake',
      name,
      settings,
      // A run at the stack's 20 req/s takes a minute per 1,000 reports.
      pollTimeoutMs: 60_000 + (CAMPAIGNS * jobsPerCampaign * 1000) / (variant.rateCeiling * 0.5),
      // A batch waiting for a fetcher slot comes back as often per run as in a run of 100,000
      // reports: the stack's wait scaled as the run is (300 s → 4 s at 1,200 reports).
      delayScale: (CAMPAIGNS * jobsPerCampaign) / 100_000,
      ...(variant.budget && { requestBudget: { dynamo, tableName: `${name}-budget` } }),
    });
    topo.applyEnv();
    let loaded = 0;
    const load = async (): Promise<Container> => {
      const api = register({ namespace: `${name}-c${++loaded}` });
      unregister.push(api.unregister);
      return asContainer(await api.import('../integration/aws/container.ts', import.meta.url));
    };
    const containers: Containers = {
      start: await load(),
      plan: await sequence(settings.plan.maxConcurrency, load),
      report: await sequence(workers, load),
      finish: await load(),
    };
    topo.attachAll(containers);

    if ('warm' in variant) {
      await topo.run(containers, { mode: 'full' });
      sim.resetStats();
    }
    const dynamoBefore = dynamo.requests();
    const operationsBefore = dynamo.requestsByOperation();
    const started = performance.now();
    const result = await topo.run(containers, { mode: 'full' });
    const seconds = (performance.now() - started) / 1000;
    const dynamoRequests = dynamo.requests() - dynamoBefore;
    const operations = dynamo.requestsByOperation();
    const operation = (name: string) => (operations[name] ?? 0) - (operationsBefore[name] ?? 0);
    if (variant.budget && dynamoRequests === 0)
      throw new Error(
        'no container leased from the budget: functions/aws/runtime.ts must build its limiter with containerLimiter(env, ...)',
      );
    const manifest = result.manifest;
    if (!manifest) throw new Error(`run ${result.runId} wrote no manifest`);
    const lost = manifest.counts.jobs - manifest.counts.reports_exported;
    const total = sim.stats.total;
    const throttled = sim.stats.byStatus['429'] ?? 0;
    const ok = sim.stats.byStatus['200'] ?? 0;
    return {
      workers,
      reports: manifest.counts.reports_exported,
      reports_not_exported: lost,
      seconds: round(seconds, 2),
      api_requests: total,
      api_req_per_s: round(total / seconds, 1),
      api_ok_per_s: round(ok / seconds, 1),
      steady_ok_per_s: round(steadyRate(sim.stats.okTimes), 1),
      utilisation: round(ok / seconds / API_LIMIT.ratePerSecond, 3),
      steady_utilisation: round(steadyRate(sim.stats.okTimes) / API_LIMIT.ratePerSecond, 3),
      share_429: round(throttled / Math.max(1, total), 4),
      dynamodb_requests: dynamoRequests,
      dynamodb_req_per_s: round(dynamoRequests / seconds, 1),
      dynamodb_get_item: operation('GetItem'),
      dynamodb_put_item: operation('PutItem'),
      dynamodb_delete_item: operation('DeleteItem'),
      report_billed_s: round((result.poll.billedMs['export-reports'] ?? 0) / 1000, 1),
      plan_billed_s: round((result.poll.billedMs['plan-campaign'] ?? 0) / 1000, 1),
      units_handed_back: topo.handBacks.length,
      units_waiting_for_fetcher: topo.delayedSends.length,
      batches_waiting_for_fetcher: topo.delayedSendRequests,
      report_invocations: result.poll.invocations['export-reports'] ?? 0,
    };
  } finally {
    await sim.close();
    for (const u of unregister) await u();
  }
}

/** 200 answers per second between the STEADY_FROM and STEADY_TO quantiles of their times. */
function steadyRate(okTimes: readonly number[]): number {
  const times = [...okTimes].sort((a, b) => a - b);
  const from = Math.floor(times.length * STEADY_FROM);
  const to = Math.floor(times.length * STEADY_TO);
  const span = ((times[to] ?? 0) - (times[from] ?? 0)) / 1000;
  return span > 0 ? (to - from) / span : 0;
}

async function sequence<T>(count: number, make: () => Promise<T>): Promise<T[]> {
  const made: T[] = [];
  for (let i = 0; i < count; i++) made.push(await make());
  return made;
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

function prefixed(prefix: string, figures: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(figures).map(([k, v]) => [`${prefix}_${k}`, v]));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const setting = (name: string) =>
    process.argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
  const workerCounts = setting('workers')?.split(',').map(Number) ?? WORKER_COUNTS;
  const jobs = setting('jobs');
  const asked = process.argv.slice(2).filter((a) => !a.includes('='));
  for (const v of asked)
    if (!(v in VARIANTS)) throw new Error(`unknown variant ${v}: ${Object.keys(VARIANTS).join(', ')}`);
  const variants = (asked.length > 0 ? asked : Object.keys(VARIANTS)) as Variant[];
  benchTopology({ workerCounts, variants, ...(jobs && { jobsPerCampaignPerWorker: Number(jobs) }) })
    .then((figures) => {
      const columns = [
        'workers',
        'seconds',
        'api_requests',
        'api_ok_per_s',
        'utilisation',
        'steady_utilisation',
        'share_429',
        'dynamodb_req_per_s',
        'dynamodb_get_item',
        'dynamodb_put_item',
        'dynamodb_delete_item',
        'report_billed_s',
        'plan_billed_s',
        'units_handed_back',
        'units_waiting_for_fetcher',
        'batches_waiting_for_fetcher',
        'reports',
        'reports_not_exported',
      ];
      for (const variant of variants) {
        const rows = workerCounts.map((n) => columns.map((c) => String(figures[`${variant}_n${n}_${c}`])));
        const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]?.length ?? 0)));
        const line = (cells: readonly string[]) =>
          cells.map((cell, i) => cell.padStart(widths[i] ?? 0)).join('  ');
        const { rateCeiling, budget } = VARIANTS[variant];
        process.stdout.write(
          `${variant}: API limit ${API_LIMIT.ratePerSecond} req/s (burst ${API_LIMIT.burst}); rateCeiling ${rateCeiling} req/s ` +
            `${budget ? 'for the deployment (shared budget)' : 'per container'}, unitSize ${stackSettings().unitSize}, ` +
            `reportBatchSize ${stackSettings().report.batchSize}\n${line(columns)}\n${rows.map(line).join('\n')}\n\n`,
        );
      }
    })
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    });
}
