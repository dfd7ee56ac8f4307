import { fileURLToPath } from 'node:url';
import { Duration } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type ExporterConfig, InfraConfigError, reportFetchersOf } from '../config.js';
import { FUNCTION_SIZES } from '../function-sizes.js';
import type { ApiKeySecret } from './api-key-secret.js';
import type { DataLake } from './data-lake.js';
import { dataLakeAccess } from './data-lake-access.js';
import { ExporterFunction, type RequestBudget } from './exporter-function.js';
import type { ExporterQueues } from './queues.js';

/** Powertools' service name: the `service` dimension of every metric and the logs' service field. */
export const SERVICE_NAME = 'campaign-report-exporter';

export const FUNCTION_NAMES = ['start-run', 'plan-campaign', 'export-reports', 'finish-run'] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];
/** The functions that call the Integration API: the only readers of the key. */
export const API_FUNCTIONS = ['start-run', 'plan-campaign', 'export-reports'] as const;

export interface FunctionSettings {
  readonly id: string;
  readonly description: string;
  readonly timeout: Duration;
  /** Lambda gives CPU in proportion to memory; export-reports encodes Parquet. */
  readonly memorySize: number;
}

/** Each function's id, description, and memory and timeout by default (infra/function-sizes.ts). */
export const FUNCTION_SETTINGS: Readonly<Record<FunctionName, FunctionSettings>> = {
  'start-run': {
    id: 'StartRun',
    description: 'Starts an export run: verifies the key, lists campaigns, fans out to the plan queue',
    ...defaultSize('start-run'),
  },
  'plan-campaign': {
    id: 'PlanCampaign',
    description: "Lists a campaign's jobs and queues the reports to fetch",
    ...defaultSize('plan-campaign'),
  },
  'export-reports': {
    id: 'ExportReports',
    description: "Fetches a batch of reports and stages raw JSON Lines and Parquet in the run's staging area",
    ...defaultSize('export-reports'),
  },
  'finish-run': {
    id: 'FinishRun',
    description:
      'Closes drained runs: publishes their files, manifest, state, metrics, ExportRunFinished event',
    ...defaultSize('finish-run'),
  },
};

/**
 * The settings that size each function: its memory, and its timeout where a user may need to
 * raise it (start-run's is RUN_START_GRACE_MS, which finish-run relies on: not a setting).
 */
export const SIZE_KEYS = {
  'start-run': { memory: 'startRunMemoryMb' },
  'plan-campaign': { memory: 'planCampaignMemoryMb', timeout: 'planCampaignTimeoutSeconds' },
  'export-reports': { memory: 'exportReportsMemoryMb', timeout: 'exportReportsTimeoutSeconds' },
  'finish-run': { memory: 'finishRunMemoryMb', timeout: 'finishRunTimeoutSeconds' },
} as const satisfies Record<
  FunctionName,
  { readonly memory: keyof ExporterConfig; readonly timeout?: keyof ExporterConfig }
>;

/** A function's memory and timeout as `config` sets them. */
export function sizeOf(
  name: FunctionName,
  config: ExporterConfig,
): Pick<FunctionSettings, 'timeout' | 'memorySize'> {
  const keys: { memory: keyof ExporterConfig; timeout?: keyof ExporterConfig } = SIZE_KEYS[name];
  return {
    memorySize: config[keys.memory] as number,
    timeout: keys.timeout
      ? Duration.seconds(config[keys.timeout] as number)
      : FUNCTION_SETTINGS[name].timeout,
  };
}

function defaultSize(name: FunctionName): Pick<FunctionSettings, 'timeout' | 'memorySize'> {
  return {
    timeout: Duration.seconds(FUNCTION_SIZES[name].timeoutSeconds),
    memorySize: FUNCTION_SIZES[name].memoryMb,
  };
}

/**
 * A batch must fit in a third of the timeout at the rate ceiling; the rest absorbs latency and
 * retries. At the 300 s default that is the time export-reports sends requests for
 * (`exportSendMs`, which keeps an invocation within half its timeout): a batch at the configured
 * pace is not cut short; a slower API's is, and goes on in a new message.
 */
const EXPORT_TIME_SHARE = 3;
/**
 * How many times over an answer is held while it is read and parsed (the chunks, their
 * concatenation, the string, the parsed values): measured, a 64 MiB report took 280 MiB of RSS.
 */
const BODY_COPIES_IN_MEMORY = 4;
/** Each plan message is one campaign, whose job listing may span many pages. */
const PLAN_BATCH_SIZE = 1;
/** The stage named in ExportRunFinished events unless the stack says otherwise. */
const DEFAULT_STAGE = 'prod';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The handler module of a function (each exports `handler`). */
export const entryOf = (name: FunctionName): string =>
  fileURLToPath(new URL(`../../functions/aws/${name}.ts`, import.meta.url));

/**
 * Set by the package's build (test/tools/build-package.ts) to the folder of the prebuilt handler
 * bundles, relative to the construct's bundle: the installed package deploys them as they are,
 * so a CDK app that uses it needs no esbuild, Docker or sources at synth. Unset in the
 * repository, where synth bundles the sources.
 */
declare const PREBUILT_LAMBDA_DIR: string | undefined;

/** The folder of a function's prebuilt bundle in the installed package; undefined in the repository. */
const prebuiltOf = (name: FunctionName): string | undefined =>
  typeof PREBUILT_LAMBDA_DIR === 'string'
    ? fileURLToPath(new URL(`${PREBUILT_LAMBDA_DIR}${name}/`, import.meta.url))
    : undefined;

export interface ExporterFunctionsProps {
  readonly config: ExporterConfig;
  readonly dataLake: DataLake;
  readonly apiKey: ApiKeySecret;
  readonly queues: ExporterQueues;
  /** With a fixed egress IP: the VPC and subnets the API functions run in. */
  readonly network?: { readonly vpc: ec2.IVpc; readonly subnets: ec2.SubnetSelection } | undefined;
  /** The deployment's shared request budget, used by every function that calls the API. */
  readonly requestBudget?: RequestBudget | undefined;
  /** Powertools' service name (default {@link SERVICE_NAME}). */
  readonly serviceName?: string | undefined;
  /** The deployment's stage, named in the ExportRunFinished event (default `prod`). */
  readonly stage?: string | undefined;
}

/** The four Lambda functions, and what each one gets: its variables with their grants. */
export class ExporterFunctions extends Construct {
  readonly byName: Readonly<Record<FunctionName, ExporterFunction>>;
  readonly logGroups: Readonly<Record<FunctionName, logs.LogGroup>>;

  constructor(scope: Construct, id: string, props: ExporterFunctionsProps) {
    super(scope, id);
    const { config, dataLake, apiKey, queues } = props;
    checkExportBatchFitsTimeout(config);
    checkBodyLimitFitsMemory(config);
    const access = dataLakeAccess(config.tableFormat);

    const make = (name: FunctionName): ExporterFunction => {
      const settings = FUNCTION_SETTINGS[name];
      const size = sizeOf(name, config);
      const callsApi = (API_FUNCTIONS as readonly string[]).includes(name);
      const fn = new ExporterFunction(this, settings.id, {
        name,
        entry: entryOf(name),
        description: settings.description,
        timeout: size.timeout,
        memorySize: size.memorySize,
        oldSpaceShare: FUNCTION_SIZES[name].oldSpaceShare,
        projectRoot: REPO_ROOT,
        prebuilt: prebuiltOf(name),
        logRetentionDays: config.logRetentionDays,
        logLevel: config.logLevel,
        serviceName: props.serviceName ?? SERVICE_NAME,
        stage: props.stage ?? DEFAULT_STAGE,
        network: callsApi ? props.network : undefined,
      });
      fn.bindDataLake(dataLake, access[name]);
      // Every function: the core's steps may write differently per format (staging, publishing).
      fn.configure('TABLE_FORMAT', config.tableFormat);
      if (callsApi) {
        fn.bindApiKey(apiKey, config);
        if (props.requestBudget) fn.bindRequestBudget(props.requestBudget);
        // Every container that may call the API at once: the share each keeps to while the
        // budget table fails.
        fn.configure('API_CONTAINERS', config.reportMaxConcurrency + config.planMaxConcurrency + 1);
      }
      return fn;
    };
    // start-run announces the runs it closes for interrupted ones, as finish-run does.
    const bus = events.EventBus.fromEventBusName(this, 'DefaultBus', 'default');

    const startRun = make('start-run')
      .bindPlanQueue(queues.plan.queue, 'send')
      .bindEventBus(bus)
      // A backfill dated before the partition projection's start would land where Athena does not look.
      .configure('PROJECTION_START_DATE', config.projectionStartDate)
      // Its lock outlives the run's deadline; a full run's estimate says what the deadline leaves.
      .configure('RUN_DEADLINE_MINUTES', config.runDeadlineMinutes)
      // The run record carries it to every later step: the other functions never read it.
      .configure('SCHEMA_CONTRACT', config.schemaContract);

    const planCampaign = make('plan-campaign')
      .bindPlanQueue(queues.plan.queue, {
        // Each campaign lists its jobs on the API: bound that load too.
        consume: { batchSize: PLAN_BATCH_SIZE, maxConcurrency: config.planMaxConcurrency },
      })
      // A listing longer than one invocation hands on to a new message of its own.
      .bindPlanQueue(queues.plan.queue, 'send')
      .bindReportQueue(queues.report.queue, 'send')
      .configure('UNIT_SIZE', config.unitSize)
      .configure('MAX_RECEIVE_COUNT', config.maxReceiveCount);

    const exportReports = make('export-reports')
      .bindReportQueue(queues.report.queue, {
        // The lever that bounds the load on the API: at most this many concurrent batches.
        consume: { batchSize: config.reportBatchSize, maxConcurrency: config.reportMaxConcurrency },
      })
      // A unit cut short by the invocation's time goes on in a new message of its own.
      .bindReportQueue(queues.report.queue, 'send')
      // The last delivery keeps its message: pending jobs end the run failed, not in the DLQ.
      .configure('MAX_RECEIVE_COUNT', config.maxReceiveCount);
    // Fewer fetchers than invocations: each takes a slot in the budget's table first.
    const fetchers = reportFetchersOf(config);
    if (props.requestBudget && fetchers < config.reportMaxConcurrency) {
      exportReports.bindFetcherSlots(props.requestBudget).configure('REPORT_FETCHERS', fetchers);
    }

    const finishRun = make('finish-run')
      // finish-run tells a drained run by the queues' ApproximateNumberOfMessages*.
      .bindPlanQueue(queues.plan.queue, 'watch')
      .bindReportQueue(queues.report.queue, 'watch')
      .bindEventBus(bus)
      .configure('RUN_DEADLINE_MINUTES', config.runDeadlineMinutes);

    this.byName = {
      'start-run': startRun,
      'plan-campaign': planCampaign,
      'export-reports': exportReports,
      'finish-run': finishRun,
    };
    this.logGroups = Object.fromEntries(
      FUNCTION_NAMES.map((name) => [name, this.byName[name].functionLogs]),
    ) as Record<FunctionName, logs.LogGroup>;
  }

  /** The functions in {@link FUNCTION_NAMES} order. */
  get all(): readonly ExporterFunction[] {
    return FUNCTION_NAMES.map((n) => this.byName[n]);
  }
}

/**
 * Rejects a body size limit that an API function could not read an answer of even when idle:
 * the limit is there to keep a hostile answer from exhausting the memory.
 */
function checkBodyLimitFitsMemory(config: ExporterConfig): void {
  for (const name of API_FUNCTIONS) {
    const { memorySize } = sizeOf(name, config);
    const most = Math.floor(memorySize / BODY_COPIES_IN_MEMORY);
    if (config.maxBodyMiB > most) {
      throw new InfraConfigError(
        `context "maxBodyMiB" ${config.maxBodyMiB}: reading and parsing an answer that large takes about ` +
          `${BODY_COPIES_IN_MEMORY} times its size, more than the ${memorySize} MB of ${name} ` +
          `("${SIZE_KEYS[name].memory}"): give at most ${most}, or more memory`,
      );
    }
  }
}

/** Rejects a batch too large for export-reports' timeout, naming the keys to change. */
function checkExportBatchFitsTimeout(config: ExporterConfig): void {
  const reports = config.reportBatchSize * config.unitSize;
  // The fetchers share the deployment's ceiling: each gets its part of it.
  const fetchers = reportFetchersOf(config);
  const seconds = Math.ceil(reports / (config.rateCeiling / fetchers));
  const budget = sizeOf('export-reports', config).timeout.toSeconds() / EXPORT_TIME_SHARE;
  if (seconds > budget) {
    throw new InfraConfigError(
      `context "reportBatchSize" x "unitSize" = ${reports} reports per invocation need ${seconds} s at ` +
        `"rateCeiling" ${config.rateCeiling} req/s shared by ${fetchers} fetchers ("reportFetchers"), ` +
        `more than ${budget} s (a third of export-reports' timeout): ` +
        'lower reportBatchSize, unitSize or reportFetchers, or raise rateCeiling or exportReportsTimeoutSeconds',
    );
  }
}
