/**
 * The API request rate the AWS topology achieves with N concurrent export-reports workers
 * (the report queue's maxConcurrency) against an API that allows 50 req/s (token bucket,
 * burst 10), and the share of 429s. Runs the loopback topology (fauxqs, the simulator, the real
 * handlers fed by the test poller) at the stack's default settings: each worker is a container
 * of its own (own adaptive limiter, capped at rateCeiling), loaded in its own tsx namespace.
 *
 *     npx tsx test/bench/topology.ts          # prints a table
 */
import { pathToFileURL } from 'node:url';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type AwsClientStub, mockClient } from 'aws-sdk-client-mock';
import { register } from 'tsx/esm/api';
import { startLocalAws } from '../helpers/fauxqs.js';
import {
  asContainer,
  type Container,
  type Containers,
  LoopbackTopology,
  quietMetricsWarnings,
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

export interface TopologyBenchOptions {
  workerCounts?: readonly number[];
  /** Jobs per campaign for each worker (default 100; 3 campaigns). */
  jobsPerCampaignPerWorker?: number;
}

/** One row per N: `n<N>_<figure>`. */
export async function benchTopology(options: TopologyBenchOptions = {}): Promise<Record<string, number>> {
  const secrets = mockClient(SecretsManagerClient);
  const events = mockClient(EventBridgeClient);
  events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'bench' }] });
  const restoreWarn = quietMetricsWarnings();
  const aws = await startLocalAws();
  const figures: Record<string, number> = {};
  try {
    for (const n of options.workerCounts ?? WORKER_COUNTS) {
      Object.assign(
        figures,
        prefixed(
          `n${n}`,
          await benchOne(
            aws,
            n,
            n * (options.jobsPerCampaignPerWorker ?? JOBS_PER_CAMPAIGN_PER_WORKER),
            secrets,
          ),
        ),
      );
    }
  } finally {
    await aws.close();
    restoreWarn();
    secrets.restore();
    events.restore();
  }
  return figures;
}

async function benchOne(
  aws: Awaited<ReturnType<typeof startLocalAws>>,
  workers: number,
  jobsPerCampaign: number,
  secrets: AwsClientStub<SecretsManagerClient>,
): Promise<Record<string, number>> {
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
  });
  const unregister: Array<() => Promise<void>> = [];
  const caches: Array<{ clearCache(): void }> = [];
  try {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: sim.keys.valid });
    const settings = stackSettings();
    const topo = await LoopbackTopology.create({
      aws,
      apiBaseUrl: sim.url,
      bucket: 'bench-lake',
      name: `bench-n${workers}`,
      settings,
    });
    topo.applyEnv();
    let loaded = 0;
    const load = async (): Promise<Container> => {
      const api = register({ namespace: `bench-n${workers}-c${++loaded}` });
      unregister.push(api.unregister);
      const container = asContainer(await api.import('../integration/aws/container.ts', import.meta.url));
      // The @middy/util that @middy/secrets-manager uses in this namespace: its secret cache keeps a
      // refresh timer that re-arms itself for ever, and would hold the process open.
      caches.push(await api.import('@middy/util', import.meta.resolve('@middy/secrets-manager')));
      return container;
    };
    const containers: Containers = {
      start: await load(),
      plan: await sequence(settings.plan.maxConcurrency, load),
      report: await sequence(workers, load),
      finish: await load(),
    };
    topo.attachAll(containers);

    const started = performance.now();
    const run = await topo.run(containers, { mode: 'full' });
    const seconds = (performance.now() - started) / 1000;
    const manifest = run.manifest;
    if (!manifest) throw new Error(`run ${run.runId} wrote no manifest`);
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
      share_429: round(throttled / Math.max(1, total), 4),
      units_handed_back: topo.handBacks.length,
      report_invocations: run.poll.invocations['export-reports'] ?? 0,
    };
  } finally {
    await sim.close();
    for (const cache of caches) cache.clearCache();
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
  const workerCounts = WORKER_COUNTS;
  benchTopology({ workerCounts })
    .then((figures) => {
      const columns = [
        'workers',
        'seconds',
        'api_requests',
        'api_req_per_s',
        'api_ok_per_s',
        'steady_ok_per_s',
        'share_429',
        'units_handed_back',
        'reports',
        'reports_not_exported',
      ];
      const rows = workerCounts.map((n) => columns.map((c) => String(figures[`n${n}_${c}`])));
      const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]?.length ?? 0)));
      const line = (cells: readonly string[]) =>
        cells.map((cell, i) => cell.padStart(widths[i] ?? 0)).join('  ');
      process.stdout.write(
        `API limit ${API_LIMIT.ratePerSecond} req/s (burst ${API_LIMIT.burst}); stack defaults: rateCeiling ${stackSettings().rateCeiling} req/s per container, ` +
          `unitSize ${stackSettings().unitSize}, reportBatchSize ${stackSettings().report.batchSize}\n${line(columns)}\n${rows.map(line).join('\n')}\n`,
      );
    })
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    });
}
