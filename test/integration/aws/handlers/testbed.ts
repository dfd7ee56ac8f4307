/**
 * A testbed for the Lambda handlers: the simulator as the API, fauxqs as S3 (a real local
 * server), and the handlers' environment. SQS, Secrets Manager and EventBridge are mocked by
 * the test files (aws-sdk-client-mock) so that they can assert on the commands sent.
 *
 * The handlers read their environment, once per module registry, at their first invocation
 * (the runtime's `lambdaEnv()`), and the secret then too: call `startTestbed()` and set up the
 * mocks first, then `await import()` the handler.
 */
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ChangeMessageVisibilityCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { AwsClientStub } from 'aws-sdk-client-mock';
import { vi } from 'vitest';
import { FUNCTION_SIZES } from '../../../../infra/function-sizes.js';
import { encodeRecord } from '../../../../shared/export/state/records.js';
import { PARQUET_ROOT, RAW_ROOT, STATE_KEYS } from '../../../../shared/layout.js';
import { S3Storage } from '../../../../shared/storage/s3.js';
import type { Storage } from '../../../../shared/storage/storage.js';
import { type LocalAws, startLocalAws } from '../../../helpers/fauxqs.js';
import { runRecord } from '../../../helpers/records.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../../simulator/index.js';
import { fakeContext } from '../poller.js';

export const QUEUE_URLS = {
  plan: 'https://sqs.us-east-1.amazonaws.com/000000000000/exporter-plan',
  report: 'https://sqs.us-east-1.amazonaws.com/000000000000/exporter-report',
} as const;
/** The message bodies (parsed JSON) a mocked SQS client sent in batches, to `queueUrl` or to any queue. */
export function sentBodies(sqs: AwsClientStub<SQSClient>, queueUrl?: string): unknown[] {
  return sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((c) => queueUrl === undefined || c.args[0].input.QueueUrl === queueUrl)
    .flatMap((c) => c.args[0].input.Entries ?? [])
    .map((e) => JSON.parse(e.MessageBody ?? '') as unknown);
}

/** export-reports' handler as the tests call it. */
export type ExportReports = (event: SQSEvent, ctx: Context) => Promise<SQSBatchResponse>;

/**
 * export-reports' handler, its mocked AWS answering as it does when all goes well: the API key
 * from Secrets Manager, SQS's batches sent and messages handed back. Call after `startTestbed()`.
 */
export async function loadExportReports(
  bed: Testbed,
  secrets: AwsClientStub<SecretsManagerClient>,
  sqs: AwsClientStub<SQSClient>,
): Promise<ExportReports> {
  secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
  sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
  sqs.on(ChangeMessageVisibilityCommand).resolves({});
  return (await import('../../../../functions/aws/export-reports.js')).handler as unknown as ExportReports;
}

export const SECRET_ID = 'campaign-report-exporter/api-key';
export const BUCKET = 'handler-tests';
export const PREFIX = 'lake/';

export interface Testbed {
  aws: LocalAws;
  sim: Simulator;
  /** The data root the handlers write to, read with a client of the test's own. */
  storage: Storage;
  close(): Promise<void>;
}

/** Starts the simulator and fauxqs and sets the handlers' environment (`env` overrides). */
export async function startTestbed(
  options: { simulator?: SimulatorOptions; env?: Record<string, string> } = {},
): Promise<Testbed> {
  const sim = await startSimulator({
    seed: 5,
    campaigns: 2,
    jobsPerCampaign: 6,
    reportSize: 'tiny',
    ...options.simulator,
  });
  const aws = await startLocalAws();
  await aws.createBucket(BUCKET);
  Object.assign(process.env, {
    AWS_REGION: aws.region,
    AWS_ACCESS_KEY_ID: aws.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: aws.credentials.secretAccessKey,
    AWS_ENDPOINT_URL_S3: aws.endpoint,
    DATA_BUCKET: BUCKET,
    DATA_PREFIX: PREFIX,
    API_BASE_URL: sim.url,
    API_KEY_SECRET_ID: SECRET_ID,
    PLAN_QUEUE_URL: QUEUE_URLS.plan,
    REPORT_QUEUE_URL: QUEUE_URLS.report,
    UNIT_SIZE: '5',
    EVENT_BUS_NAME: 'exporter-bus',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_DEV: 'true',
    ...options.env,
  });
  const storage = new S3Storage({ bucket: BUCKET, prefix: PREFIX, client: aws.s3Client() });
  return {
    aws,
    sim,
    storage,
    async close() {
      await sim.close();
      await aws.close();
    },
  };
}

/** A Lambda context for a handler call, with the function's timeout by default (infra/function-sizes.ts). */
export const context = (functionName: string): Context =>
  fakeContext({
    functionName,
    timeoutMs:
      functionName in FUNCTION_SIZES
        ? FUNCTION_SIZES[functionName as keyof typeof FUNCTION_SIZES].timeoutSeconds * 1000
        : 300_000,
  });

/** An SQS event as Lambda delivers it: message ids `m0`, `m1`…, receipt handles `rh0`, `rh1`…. */
export function sqsEvent(
  messages: ReadonlyArray<{ body: unknown; receiveCount?: number }>,
  queueUrl: string = QUEUE_URLS.report,
): SQSEvent {
  const arn = `arn:aws:sqs:us-east-1:000000000000:${queueUrl.split('/').pop()}`;
  const records = messages.map(
    (m, i): SQSRecord => ({
      messageId: `m${i}`,
      receiptHandle: `rh${i}`,
      body: typeof m.body === 'string' ? m.body : JSON.stringify(m.body),
      attributes: {
        ApproximateReceiveCount: String(m.receiveCount ?? 1),
        SentTimestamp: String(Date.now()),
        SenderId: '000000000000',
        ApproximateFirstReceiveTimestamp: String(Date.now()),
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: arn,
      awsRegion: 'us-east-1',
    }),
  );
  return { Records: records };
}

/** Keys under the data root, relative to it. */
export async function keysUnder(storage: Storage, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storage.list(prefix)) keys.push(key);
  return keys;
}

/** The Parquet and raw files written so far. */
export async function dataFiles(storage: Storage): Promise<string[]> {
  return [...(await keysUnder(storage, `${PARQUET_ROOT}/`)), ...(await keysUnder(storage, `${RAW_ROOT}/`))];
}

/** A run id in the core's format. */
export const RUN_ID = '20261122T031500Z-a1b2c3';

/** Writes the run record of RUN_ID: the handlers drop messages of runs that have none (finished). */
export async function openRun(storage: Storage, runId: string = RUN_ID): Promise<void> {
  const record = runRecord({
    run_id: runId,
    mode: 'full',
    started_at: new Date().toISOString(),
    campaign_ids: [],
  });
  await storage.put(STATE_KEYS.runRecord(runId), encodeRecord(record));
}

/**
 * The handlers' environment with Powertools metrics on: with POWERTOOLS_DEV they go to the
 * global console as EMF lines, which `captureConsole()` reads.
 */
export const METRICS_ON = {
  POWERTOOLS_METRICS_DISABLED: 'false',
  POWERTOOLS_METRICS_NAMESPACE: 'CampaignReportExporter',
  POWERTOOLS_SERVICE_NAME: 'campaign-report-exporter',
} as const;

export interface ConsoleCapture {
  /** Every line written through console.log/info/warn/error/debug since the last clear. */
  lines: string[];
  /** The metrics of the EMF lines: name → values, in order. */
  metrics(): Record<string, number[]>;
  clear(): void;
}

/** Captures the global console (restore with `vi.restoreAllMocks()`). */
export function captureConsole(): ConsoleCapture {
  const lines: string[] = [];
  for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      lines.push(args.map(String).join(' '));
    });
  }
  return {
    lines,
    metrics() {
      const found: Record<string, number[]> = {};
      for (const line of lines) {
        if (!line.startsWith('{') || !line.includes('"_aws"')) continue;
        const emf = JSON.parse(line) as {
          _aws: { CloudWatchMetrics: { Metrics: { Name: string }[] }[] };
          [name: string]: unknown;
        };
        for (const { Metrics } of emf._aws.CloudWatchMetrics)
          for (const { Name } of Metrics) {
            const value = emf[Name];
            const values = (Array.isArray(value) ? value : [value]).map(Number);
            found[Name] = [...(found[Name] ?? []), ...values];
          }
      }
      return found;
    },
    clear() {
      lines.length = 0;
    },
  };
}
