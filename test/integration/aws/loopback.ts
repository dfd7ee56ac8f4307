/**
 * The AWS topology on loopback, for the topology test and benchmark: the stack's two queues
 * (each with its DLQ and redrive) on a local SQS, the data bucket on a local S3 (both fauxqs),
 * the real handlers fed by `EventSourcePoller`, and the run driven start-run → plan queue →
 * report queue → finish-run. The settings come from the stack's own definitions (infra/), with
 * durations scaled down so that a run takes seconds.
 *
 * Secrets Manager and EventBridge have no local server: the caller mocks them
 * (aws-sdk-client-mock) before loading the containers.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { S3Client } from '@aws-sdk/client-s3';
import {
  type ChangeMessageVisibilityCommandInput,
  CreateQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SendMessageBatchCommandInput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { EXAMPLE_API_BASE_URL, ExporterConfigSchema, reportFetchersOf } from '../../../infra/config.js';
import { FUNCTION_SETTINGS, type FunctionName } from '../../../infra/constructs/functions.js';
import { VISIBILITY_TO_TIMEOUT_RATIO } from '../../../infra/constructs/queues.js';
import { type Manifest, ManifestSchema } from '../../../shared/export/state/manifest.js';
import { RAW_ENTITIES, TABLE_NAMES } from '../../../shared/export/tables.js';
import { RUN_DEFAULTS } from '../../../shared/run-defaults.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import type { Storage } from '../../../shared/storage/storage.js';
import type { DuckDb } from '../../helpers/duckdb.js';
import type { LocalDynamo } from '../../helpers/dynalite.js';
import type { LocalAws } from '../../helpers/fauxqs.js';
import type { IamGuard } from '../../helpers/iam/guard.js';
import {
  EventSourcePoller,
  fakeContext,
  type PollerHooks,
  type PollResult,
  type SqsHandler,
} from './poller.js';

/** The queue, batch and function settings of the stack that shape the topology. */
export interface TopologySettings {
  maxReceiveCount: number;
  plan: ConsumerSettings;
  report: ConsumerSettings;
  unitSize: number;
  reportConcurrency: number;
  rateCeiling: number;
  /** export-reports invocations that fetch at once (`reportFetchersOf`: REPORT_FETCHERS with a budget). */
  fetchers: number;
}

export interface ConsumerSettings {
  batchSize: number;
  maxConcurrency: number;
  timeoutSeconds: number;
  /** The stack's visibility timeout: VISIBILITY_TO_TIMEOUT_RATIO × the consumer's timeout. */
  visibilitySeconds: number;
}

/** plan-campaign's batch size (infra/constructs/functions.ts PLAN_BATCH_SIZE, not exported). */
const PLAN_BATCH_SIZE = 1;

/** The stack's settings at its defaults (infra/config.ts, infra/constructs/), with optional changes. */
export function stackSettings(context: Record<string, unknown> = {}): TopologySettings {
  const config = ExporterConfigSchema.parse({ apiBaseUrl: EXAMPLE_API_BASE_URL, ...context });
  const consumer = (fn: 'plan-campaign' | 'export-reports', batchSize: number, maxConcurrency: number) => {
    const timeoutSeconds = FUNCTION_SETTINGS[fn].timeout.toSeconds();
    return {
      batchSize,
      maxConcurrency,
      timeoutSeconds,
      visibilitySeconds: timeoutSeconds * VISIBILITY_TO_TIMEOUT_RATIO,
    };
  };
  return {
    maxReceiveCount: config.maxReceiveCount,
    plan: consumer('plan-campaign', PLAN_BATCH_SIZE, config.planMaxConcurrency),
    report: consumer('export-reports', config.reportBatchSize, config.reportMaxConcurrency),
    unitSize: config.unitSize,
    reportConcurrency: config.reportConcurrency,
    rateCeiling: config.rateCeiling,
    fetchers: reportFetchersOf(config),
  };
}

/** One Lambda container: its handlers and the clients its runtime module built. */
export interface Container {
  startRun(event: unknown, context: Context): Promise<unknown>;
  planCampaign: SqsHandler;
  exportReports: SqsHandler;
  finishRun(event: unknown, context: Context): Promise<unknown>;
  sqs: SQSClient;
  s3: S3Client;
}

/**
 * The module test/integration/aws/container.ts as a Container (middy's handler types are wider).
 * With `iam`, each handler runs as its function: every AWS call it makes is evaluated against
 * that function's role in the synthesized stack, with the environment the container loaded with.
 */
export function asContainer(module: Record<string, unknown>, iam?: IamGuard): Container {
  const container = module as unknown as Container;
  if (iam === undefined) return container;
  const env = { ...process.env };
  const as =
    <A extends unknown[], R>(fn: FunctionName, handler: (...args: A) => R) =>
    (...args: A): R =>
      iam.as({ fn, env }, () => handler(...args));
  return {
    startRun: as('start-run', container.startRun),
    planCampaign: as('plan-campaign', container.planCampaign),
    exportReports: as('export-reports', container.exportReports),
    finishRun: as('finish-run', container.finishRun),
    sqs: container.sqs,
    s3: container.s3,
  };
}

/** The containers of one run: each function's workers are containers of their own in AWS. */
export interface Containers {
  start: Container;
  plan: readonly Container[];
  report: readonly Container[];
  finish: Container;
}

export interface WorkQueue {
  name: string;
  url: string;
  arn: string;
  dlqUrl: string;
  /** Seconds, scaled down from the stack's. */
  visibilitySeconds: number;
}

/** A ChangeMessageVisibility a handler sent (a unit handed back for later). */
export interface HandBack {
  receiptHandle: string;
  /** What the handler asked for, in the stack's seconds. */
  requestedSeconds: number;
  /** What the local queue got, scaled down. */
  scaledSeconds: number;
}

export interface TopologyOptions {
  aws: LocalAws;
  /** The Integration API's {base_url}: the simulator's. */
  apiBaseUrl: string;
  bucket: string;
  /** Unique per topology: names the queues and the data prefix. */
  name: string;
  settings?: TopologySettings;
  /** Stack seconds → local seconds (default 1/900: the stack's 1800 s visibility becomes 2 s). */
  timeScale?: number;
  /** Extra handler environment (overrides). */
  env?: Record<string, string>;
  /**
   * The deployment's request budget on a local DynamoDB (test/helpers/dynalite.ts): a table of
   * its own, created by `create()`. Without it each container has a limiter of its own.
   */
  requestBudget?: { dynamo: LocalDynamo; tableName: string };
  /**
   * The IAM guard the containers run under (see `asContainer`): the event source mappings'
   * receives and deletes then run as their function too, as Lambda makes them with its role.
   */
  iam?: IamGuard;
  /** How long a run's queues may take to drain, ms (the poller's default: 2 minutes). */
  pollTimeoutMs?: number;
  /** Stack DelaySeconds → local seconds (default `timeScale`; at least 1 s). */
  delayScale?: number;
}

export interface TopologyRun {
  runId: string;
  started: unknown;
  poll: PollResult;
  finished: unknown;
  manifest: Manifest | undefined;
}

/** The secret id the handlers read the key from (mocked). */
export const API_KEY_SECRET_ID = 'campaign-report-exporter/api-key';
const DEFAULT_TIME_SCALE = 1 / 900;
/** The environment that puts the containers on a shared request budget. */
const BUDGET_ENV = ['REQUEST_BUDGET_TABLE', 'AWS_ENDPOINT_URL_DYNAMODB', 'REPORT_FETCHERS'] as const;

export class LoopbackTopology {
  readonly settings: TopologySettings;
  readonly env: Readonly<Record<string, string>>;
  readonly plan: WorkQueue;
  readonly report: WorkQueue;
  readonly prefix: string;
  /** Every ChangeMessageVisibility the handlers sent, in order. */
  readonly handBacks: HandBack[] = [];
  /** Messages sent with a DelaySeconds (units waiting for a fetcher slot), as requested. */
  readonly delayedSends: number[] = [];
  /** SendMessageBatch requests that carried them (a busy invocation sends its batch in one). */
  delayedSendRequests = 0;
  readonly #options: TopologyOptions;
  readonly #sqs: SQSClient;
  readonly #timeScale: number;
  #poller: EventSourcePoller | undefined;

  private constructor(
    options: TopologyOptions,
    settings: TopologySettings,
    plan: WorkQueue,
    report: WorkQueue,
    sqs: SQSClient,
  ) {
    this.#options = options;
    this.settings = settings;
    this.plan = plan;
    this.report = report;
    this.#sqs = sqs;
    this.#timeScale = options.timeScale ?? DEFAULT_TIME_SCALE;
    this.prefix = `${options.name}/`;
    const { aws } = options;
    this.env = {
      AWS_REGION: aws.region,
      AWS_ACCESS_KEY_ID: aws.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: aws.credentials.secretAccessKey,
      // The SDK reads service endpoints from these (an IP endpoint makes S3 use path-style keys).
      AWS_ENDPOINT_URL_S3: aws.endpoint,
      AWS_ENDPOINT_URL_SQS: aws.endpoint,
      DATA_BUCKET: options.bucket,
      DATA_PREFIX: this.prefix,
      API_BASE_URL: options.apiBaseUrl,
      API_KEY_SECRET_ID,
      SECRET_CACHE_TTL_SECONDS: String(RUN_DEFAULTS.secretCacheTtlSeconds.value),
      PLAN_QUEUE_URL: plan.url,
      REPORT_QUEUE_URL: report.url,
      UNIT_SIZE: String(settings.unitSize),
      REPORT_CONCURRENCY: String(settings.reportConcurrency),
      RATE_CEILING: String(settings.rateCeiling),
      EVENT_BUS_NAME: 'default',
      RUN_DEADLINE_MINUTES: String(RUN_DEFAULTS.runDeadlineMinutes.value),
      POWERTOOLS_SERVICE_NAME: 'campaign-report-exporter',
      POWERTOOLS_METRICS_NAMESPACE: 'CampaignReportExporter',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      // Powertools then writes through the global console, not a Console of its own on stderr.
      POWERTOOLS_DEV: 'true',
      ...(options.requestBudget && {
        REQUEST_BUDGET_TABLE: options.requestBudget.tableName,
        AWS_ENDPOINT_URL_DYNAMODB: options.requestBudget.dynamo.endpoint,
        // As the stack sets it: fewer fetchers than invocations take slots in the table.
        ...(settings.fetchers < settings.report.maxConcurrency && {
          REPORT_FETCHERS: String(settings.fetchers),
        }),
      }),
      ...options.env,
    };
  }

  /** Creates the bucket and the queues (each with a DLQ and the stack's maxReceiveCount). */
  static async create(options: TopologyOptions): Promise<LoopbackTopology> {
    const settings = options.settings ?? stackSettings();
    const scale = options.timeScale ?? DEFAULT_TIME_SCALE;
    const sqs = options.aws.sqsClient();
    await options.aws.createBucket(options.bucket);
    const queue = async (kind: string, stackVisibility: number): Promise<WorkQueue> => {
      const name = `${options.name}-${kind}`;
      const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${name}-dlq` }));
      const dlqArn = await queueArn(sqs, dlq.QueueUrl);
      const visibilitySeconds = scaled(stackVisibility, scale);
      const created = await sqs.send(
        new CreateQueueCommand({
          QueueName: name,
          Attributes: {
            VisibilityTimeout: String(visibilitySeconds),
            RedrivePolicy: JSON.stringify({
              deadLetterTargetArn: dlqArn,
              maxReceiveCount: settings.maxReceiveCount,
            }),
          },
        }),
      );
      return {
        name,
        url: onEndpoint(created.QueueUrl, options.aws.endpoint),
        arn: await queueArn(sqs, created.QueueUrl),
        dlqUrl: onEndpoint(dlq.QueueUrl, options.aws.endpoint),
        visibilitySeconds,
      };
    };
    await options.requestBudget?.dynamo.createBudgetTable(options.requestBudget.tableName);
    const plan = await queue('plan', settings.plan.visibilitySeconds);
    const report = await queue('report', settings.report.visibilitySeconds);
    return new LoopbackTopology(options, settings, plan, report, sqs);
  }

  /** Sets the handlers' environment in this process (before loading containers). */
  applyEnv(): void {
    // An earlier topology's budget must not leak into one without.
    for (const name of BUDGET_ENV) if (!(name in this.env)) delete process.env[name];
    Object.assign(process.env, this.env);
  }

  /**
   * Scales the container's hand-backs (ChangeMessageVisibility) down like the queues' visibility,
   * records them, and tells the running poller to stop renewing those records.
   */
  attach(container: Container): void {
    container.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'SendMessageBatchCommand') {
          const entries = (args.input as SendMessageBatchCommandInput).Entries ?? [];
          if (entries.some((entry) => entry.DelaySeconds)) this.delayedSendRequests++;
          for (const entry of entries) {
            if (!entry.DelaySeconds) continue;
            this.delayedSends.push(entry.DelaySeconds);
            entry.DelaySeconds = scaled(entry.DelaySeconds, this.#options.delayScale ?? this.#timeScale);
          }
        }
        if (context.commandName === 'ChangeMessageVisibilityCommand') {
          const input = args.input as ChangeMessageVisibilityCommandInput;
          const requestedSeconds = input.VisibilityTimeout ?? 0;
          const scaledSeconds = scaled(requestedSeconds, this.#timeScale);
          input.VisibilityTimeout = scaledSeconds;
          if (input.ReceiptHandle) {
            this.handBacks.push({ receiptHandle: input.ReceiptHandle, requestedSeconds, scaledSeconds });
            this.#poller?.handedBack(input.ReceiptHandle);
          }
        }
        return next(args);
      },
      { step: 'initialize', name: 'loopbackTimeScale' },
    );
  }

  /** Attaches every container of a run (idempotent per container is not needed: attach once). */
  attachAll(containers: Containers): void {
    for (const c of new Set([containers.start, ...containers.plan, ...containers.report, containers.finish]))
      this.attach(c);
  }

  /** start-run → poll the plan and report queues until drained → finish-run; reads the manifest. */
  async run(
    containers: Containers,
    input: Record<string, unknown> = { mode: 'incremental' },
    hooks: PollerHooks = {},
    extraFinishers?: readonly Container[],
    /** Shorter invocations than the functions' timeouts: their listings hand on sooner. */
    timeouts: { startMs?: number; planMs?: number } = {},
  ): Promise<TopologyRun> {
    const { aws } = this.#options;
    const started = await containers.start.startRun(
      input,
      fakeContext({ functionName: 'start-run', timeoutMs: timeouts.startMs ?? 300_000 }),
    );
    const runId = (started as { run_id?: string }).run_id;
    if (!runId) throw new Error(`start-run returned no run id: ${JSON.stringify(started)}`);
    const { iam } = this.#options;
    const env = this.env;
    const poller = new EventSourcePoller({
      sqs: this.#sqs,
      region: aws.region,
      hooks,
      ...(this.#options.pollTimeoutMs !== undefined && { timeoutMs: this.#options.pollTimeoutMs }),
      ...(iam && {
        asFunction: <T>(fn: string, work: () => Promise<T>) => iam.as({ fn: fn as FunctionName, env }, work),
      }),
      mappings: [
        {
          functionName: 'plan-campaign',
          queueUrl: this.plan.url,
          queueArn: this.plan.arn,
          batchSize: this.settings.plan.batchSize,
          workers: containers.plan.map((c) => c.planCampaign),
          timeoutMs: timeouts.planMs ?? this.settings.plan.timeoutSeconds * 1000,
          visibilitySeconds: this.plan.visibilitySeconds,
        },
        {
          functionName: 'export-reports',
          queueUrl: this.report.url,
          queueArn: this.report.arn,
          batchSize: this.settings.report.batchSize,
          workers: containers.report.map((c) => c.exportReports),
          timeoutMs: this.settings.report.timeoutSeconds * 1000,
          visibilitySeconds: this.report.visibilitySeconds,
        },
      ],
    });
    this.#poller = poller;
    let poll: PollResult;
    try {
      poll = await poller.run();
    } finally {
      this.#poller = undefined;
    }
    // Scheduler delivers at least once: with `finishers`, finish-run is invoked in each at once.
    const finishers = [containers.finish, ...(extraFinishers ?? [])];
    const [finished] = await Promise.all(
      finishers.map((f) => f.finishRun({}, fakeContext({ functionName: 'finish-run', timeoutMs: 120_000 }))),
    );
    return { runId, started, poll, finished, manifest: await this.manifest(runId) };
  }

  /** The output root, read with a client of the test's own. */
  storage(): Storage {
    return new S3Storage({
      bucket: this.#options.bucket,
      prefix: this.prefix,
      client: this.#options.aws.s3Client(),
    });
  }

  /** The run's manifest, if finish-run wrote it. */
  async manifest(runId: string): Promise<Manifest | undefined> {
    const storage = this.storage();
    for await (const key of storage.list('runs/')) {
      if (!key.endsWith(`/${runId}.json`)) continue;
      const found = await storage.get(key);
      return found ? ManifestSchema.parse(JSON.parse(Buffer.from(found.body).toString('utf8'))) : undefined;
    }
    return undefined;
  }

  /** The messages in a work queue's DLQ (received with a short visibility, so they stay there). */
  async deadLetters(queue: WorkQueue): Promise<Message[]> {
    const answer = await this.#sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queue.dlqUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        AttributeNames: ['All'],
      }),
    );
    return answer.Messages ?? [];
  }
}

/**
 * fauxqs names queues `http://sqs.<region>.localhost:<port>/<account>/<name>`, a host that does not
 * resolve here; the SQS client sends to the queue URL's host unless its endpoint is set in code,
 * and the handlers set it only through AWS_ENDPOINT_URL_SQS. fauxqs finds a queue by its path, so
 * the same path on the endpoint's host names the same queue (and looks like a real queue URL).
 */
function onEndpoint(queueUrl: string | undefined, endpoint: string): string {
  if (!queueUrl) throw new Error('CreateQueue returned no QueueUrl');
  return new URL(new URL(queueUrl).pathname, endpoint).href;
}

/** Stack seconds to local seconds: at least 1 (SQS takes whole seconds). */
function scaled(seconds: number, scale: number): number {
  return Math.max(1, Math.ceil(seconds * scale));
}

async function queueArn(sqs: SQSClient, url: string | undefined): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  const arn = Attributes?.QueueArn;
  if (!arn) throw new Error(`no ARN for queue ${url}`);
  return arn;
}

/**
 * The output of a run, per table and raw entity: each row as canonical JSON (sorted keys, BigInt
 * and timestamps as text), without the fields that differ between runs of the same data
 * (run_id, exported_at, fetched_at) and without file names; sorted, so that multisets compare
 * with `toEqual`. Parquet is read back with DuckDB, raw JSON Lines with zlib.
 */
export type OutputSnapshot = Record<string, string[]>;

const RUN_FIELDS = new Set(['run_id', 'exported_at', 'fetched_at']);

export async function snapshotOutput(storage: Storage, db: DuckDb): Promise<OutputSnapshot> {
  const dir = await mkdtemp(join(tmpdir(), 'loopback-output-'));
  try {
    const present = new Set<string>();
    const snapshot: OutputSnapshot = {};
    for (const entity of RAW_ENTITIES) snapshot[`raw/${entity}`] = [];
    for await (const key of storage.list('')) {
      const [root, name] = key.split('/');
      if (root === 'raw' && key.endsWith('.jsonl.gz')) {
        const found = await storage.get(key);
        const lines = gunzipSync(found?.body ?? new Uint8Array())
          .toString('utf8')
          .split('\n');
        for (const line of lines)
          if (line.trim() !== '') snapshot[`raw/${name}`]?.push(canonical(JSON.parse(line)));
      } else if (root === 'parquet' && key.endsWith('.parquet')) {
        const found = await storage.get(key);
        const path = join(dir, key);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, found?.body ?? new Uint8Array());
        if (name) present.add(name);
      }
    }
    for (const table of TABLE_NAMES) {
      const rows = present.has(table)
        ? await db.all(`SELECT * FROM read_parquet('${join(dir, 'parquet', table)}/*/*.parquet')`)
        : [];
      snapshot[table] = rows.map((row) => canonical(row));
    }
    for (const rows of Object.values(snapshot)) rows.sort();
    return snapshot;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** JSON with sorted keys, without the per-run fields; BigInt as text, Date as ISO text. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (key, v: unknown) => {
    if (RUN_FIELDS.has(key)) return undefined;
    if (typeof v === 'bigint') return v.toString();
    if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Date) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}
