import { fileURLToPath } from 'node:url';
import { Duration, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { STATE_KEYS } from '../../shared/export/layout.js';
import { METRICS_NAMESPACE } from '../../shared/metrics.js';
import { type ExporterConfig, InfraConfigError } from '../config.js';
import type { ApiKeySecret } from './api-key-secret.js';
import type { DataLake } from './data-lake.js';
import type { ExporterQueues } from './queues.js';

/** Powertools' service name: the `service` dimension of every metric and the logs' service field. */
export const SERVICE_NAME = 'campaign-report-exporter';

export const FUNCTION_NAMES = ['start-run', 'plan-campaign', 'export-reports', 'finish-run'] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];
/** The functions that call the Integration API: the only readers of the key. */
export const API_FUNCTIONS = ['start-run', 'plan-campaign', 'export-reports'] as const;

interface FunctionSettings {
  readonly id: string;
  readonly description: string;
  readonly timeout: Duration;
  /** Lambda gives CPU in proportion to memory; export-reports encodes Parquet. */
  readonly memorySize: number;
}

export const FUNCTION_SETTINGS: Readonly<Record<FunctionName, FunctionSettings>> = {
  'start-run': {
    id: 'StartRun',
    description: 'Starts an export run: verifies the key, lists campaigns, fans out to the plan queue',
    timeout: Duration.minutes(5),
    memorySize: 512,
  },
  'plan-campaign': {
    id: 'PlanCampaign',
    description: "Lists a campaign's jobs and queues the reports to fetch",
    timeout: Duration.minutes(5),
    memorySize: 512,
  },
  'export-reports': {
    id: 'ExportReports',
    description: "Fetches a batch of reports and stages raw JSON Lines and Parquet in the run's staging area",
    timeout: Duration.minutes(5),
    memorySize: 1024,
  },
  'finish-run': {
    id: 'FinishRun',
    description:
      'Closes drained runs: publishes their files, manifest, state, metrics, ExportRunFinished event',
    // Publishing streams a run's staged files into one file per table: a 100,000-report run
    // takes minutes against S3 (BENCHMARKS.md, "Publish"); Lambda's limit, and resumable if cut.
    timeout: Duration.minutes(15),
    // Network throughput and CPU grow with memory; publishing holds a few parts per file only.
    memorySize: 1024,
  },
};

/** A batch must fit in a third of the timeout at the rate ceiling; the rest absorbs latency and retries. */
const EXPORT_TIME_SHARE = 3;
/**
 * How many times over an answer is held while it is read and parsed (the chunks, their
 * concatenation, the string, the parsed values): measured, a 64 MiB report took 280 MiB of RSS.
 */
const BODY_COPIES_IN_MEMORY = 4;
/** Each plan message is one campaign, whose job listing may span many pages. */
const PLAN_BATCH_SIZE = 1;

/** Lets `require` work inside the ESM bundle for CommonJS dependencies that call it. */
const ESM_REQUIRE_BANNER =
  "import { createRequire as __crx_createRequire } from 'node:module'; const require = __crx_createRequire(import.meta.url);";

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The handler module of a function (each exports `handler`). */
export const entryOf = (name: FunctionName): string =>
  fileURLToPath(new URL(`../../functions/aws/${name}.ts`, import.meta.url));

export interface ExporterFunctionsProps {
  readonly config: ExporterConfig;
  readonly dataLake: DataLake;
  readonly apiKey: ApiKeySecret;
  readonly queues: ExporterQueues;
  /** With a fixed egress IP: the VPC and subnets the API functions run in. */
  readonly network?: { readonly vpc: ec2.IVpc; readonly subnets: ec2.SubnetSelection } | undefined;
}

/** The four Lambda functions, their log groups, roles, event sources and permissions. */
export class ExporterFunctions extends Construct {
  readonly byName: Readonly<Record<FunctionName, nodejs.NodejsFunction>>;
  readonly logGroups: Readonly<Record<FunctionName, logs.LogGroup>>;

  constructor(scope: Construct, id: string, props: ExporterFunctionsProps) {
    super(scope, id);
    const { config, dataLake, apiKey, queues } = props;
    checkExportBatchFitsTimeout(config);
    checkBodyLimitFitsMemory(config);

    const common: Record<string, string> = {
      DATA_BUCKET: dataLake.bucket.bucketName,
      DATA_PREFIX: config.dataPrefix,
      POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      POWERTOOLS_LOG_LEVEL: config.logLevel,
      NODE_OPTIONS: '--enable-source-maps',
    };
    // Every function that calls the API gets the limiter's settings: the ceiling bounds them all.
    const api: Record<string, string> = {
      API_BASE_URL: config.apiBaseUrl,
      API_KEY_SECRET_ID: apiKey.secretId,
      SECRET_CACHE_TTL_SECONDS: String(config.secretCacheTtlSeconds),
      REPORT_CONCURRENCY: String(config.reportConcurrency),
      RATE_CEILING: String(config.rateCeiling),
      MAX_BODY_MIB: String(config.maxBodyMiB),
    };
    const environment: Record<FunctionName, Record<string, string>> = {
      'start-run': { ...common, ...api, PLAN_QUEUE_URL: queues.plan.queue.queueUrl },
      'plan-campaign': {
        ...common,
        ...api,
        PLAN_QUEUE_URL: queues.plan.queue.queueUrl,
        REPORT_QUEUE_URL: queues.report.queue.queueUrl,
        UNIT_SIZE: String(config.unitSize),
        MAX_RECEIVE_COUNT: String(config.maxReceiveCount),
      },
      'export-reports': {
        ...common,
        ...api,
        // For ChangeMessageVisibility: a 429 sends the message back later instead of sleeping.
        REPORT_QUEUE_URL: queues.report.queue.queueUrl,
        // The last delivery keeps its message: pending jobs end the run failed, not in the DLQ.
        MAX_RECEIVE_COUNT: String(config.maxReceiveCount),
      },
      'finish-run': {
        ...common,
        EVENT_BUS_NAME: 'default',
        RUN_DEADLINE_MINUTES: String(config.runDeadlineMinutes),
        PLAN_QUEUE_URL: queues.plan.queue.queueUrl,
        REPORT_QUEUE_URL: queues.report.queue.queueUrl,
      },
    };

    const fns = {} as Record<FunctionName, nodejs.NodejsFunction>;
    const logGroups = {} as Record<FunctionName, logs.LogGroup>;
    for (const name of FUNCTION_NAMES) {
      const settings = FUNCTION_SETTINGS[name];
      const inVpc = props.network !== undefined && (API_FUNCTIONS as readonly string[]).includes(name);
      const logGroup = new logs.LogGroup(this, `${settings.id}Logs`, {
        retention: config.logRetentionDays as logs.RetentionDays,
      });
      const role = new iam.Role(this, `${settings.id}Role`, {
        assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
        description: `Execution role of ${name}`,
      });
      // Logs go to this function's own group only (no AWSLambdaBasicExecutionRole: logs:* on *).
      logGroup.grantWrite(role);
      if (inVpc) {
        role.addManagedPolicy(
          iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'),
        );
        Validations.of(role).acknowledge({
          id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
          reason:
            'Lambda needs ec2:CreateNetworkInterface/DescribeNetworkInterfaces/DeleteNetworkInterface to run in the fixed-egress VPC; these actions take no resource ARN, and the AWS managed policy is the documented minimal set.',
        });
      }
      fns[name] = new nodejs.NodejsFunction(this, settings.id, {
        description: settings.description,
        entry: entryOf(name),
        handler: 'handler',
        runtime: lambda.Runtime.NODEJS_24_X,
        architecture: lambda.Architecture.ARM_64,
        memorySize: settings.memorySize,
        timeout: settings.timeout,
        role,
        logGroup,
        loggingFormat: lambda.LoggingFormat.JSON,
        applicationLogLevelV2: lambda.ApplicationLogLevel[config.logLevel],
        systemLogLevelV2: lambda.SystemLogLevel.WARN,
        environment: environment[name],
        projectRoot: REPO_ROOT,
        depsLockFilePath: `${REPO_ROOT}package-lock.json`,
        bundling: {
          format: nodejs.OutputFormat.ESM,
          target: 'node24',
          mainFields: ['module', 'main'],
          minify: true,
          sourceMap: true,
          // Stack traces name files and lines; the sources themselves need not ship.
          sourcesContent: false,
          banner: ESM_REQUIRE_BANNER,
          forceDockerBundling: false,
          // The SDK clients the tests ran against, not whatever the runtime carries today.
          bundleAwsSDK: true,
        },
        ...(inVpc && props.network !== undefined
          ? { vpc: props.network.vpc, vpcSubnets: props.network.subnets }
          : {}),
      });
      logGroups[name] = logGroup;
    }
    this.byName = fns;
    this.logGroups = logGroups;

    // Deletes: finish-run clears a finished run's staging and records; start-run does the same
    // for runs it closes for interrupted ones. Nothing deletes published data.
    const runsPrefix = STATE_KEYS.runsPrefix.replace(/\/$/, '');
    const deleteUnder: Record<FunctionName, readonly string[]> = {
      'start-run': [runsPrefix],
      'plan-campaign': [],
      'export-reports': [],
      'finish-run': [runsPrefix],
    };
    for (const name of FUNCTION_NAMES)
      dataLake.grantDataReadWrite(fns[name].role!, { deleteUnder: deleteUnder[name] });
    for (const name of API_FUNCTIONS) apiKey.grantRead(fns[name]);

    queues.plan.queue.grantSendMessages(fns['start-run']);
    queues.report.queue.grantSendMessages(fns['plan-campaign']);
    fns['plan-campaign'].addEventSource(
      new SqsEventSource(queues.plan.queue, {
        batchSize: PLAN_BATCH_SIZE,
        // Each campaign lists its jobs on the API: bound that load too.
        maxConcurrency: config.planMaxConcurrency,
        reportBatchItemFailures: true,
      }),
    );
    fns['export-reports'].addEventSource(
      new SqsEventSource(queues.report.queue, {
        batchSize: config.reportBatchSize,
        // The lever that bounds the load on the API: at most this many concurrent batches.
        maxConcurrency: config.reportMaxConcurrency,
        reportBatchItemFailures: true,
      }),
    );
    // finish-run tells a drained run by the queues' ApproximateNumberOfMessages*.
    queues.plan.queue.grant(fns['finish-run'], 'sqs:GetQueueAttributes');
    queues.report.queue.grant(fns['finish-run'], 'sqs:GetQueueAttributes');
    // start-run announces the runs it closes for interrupted ones, as finish-run does.
    const bus = events.EventBus.fromEventBusName(this, 'DefaultBus', 'default');
    bus.grantPutEventsTo(fns['finish-run']);
    bus.grantPutEventsTo(fns['start-run']);
  }

  /** The functions in {@link FUNCTION_NAMES} order. */
  get all(): readonly nodejs.NodejsFunction[] {
    return FUNCTION_NAMES.map((n) => this.byName[n]);
  }
}

/**
 * Rejects a body size limit that an API function could not read an answer of even when idle:
 * the limit is there to keep a hostile answer from exhausting the memory.
 */
function checkBodyLimitFitsMemory(config: ExporterConfig): void {
  for (const name of API_FUNCTIONS) {
    const { memorySize } = FUNCTION_SETTINGS[name];
    const most = Math.floor(memorySize / BODY_COPIES_IN_MEMORY);
    if (config.maxBodyMiB > most) {
      throw new InfraConfigError(
        `context "maxBodyMiB" ${config.maxBodyMiB}: reading and parsing an answer that large takes about ` +
          `${BODY_COPIES_IN_MEMORY} times its size, more than the ${memorySize} MB of ${name}: ` +
          `give at most ${most}`,
      );
    }
  }
}

/** Rejects a batch too large for export-reports' timeout, naming the keys to change. */
function checkExportBatchFitsTimeout(config: ExporterConfig): void {
  const reports = config.reportBatchSize * config.unitSize;
  const seconds = Math.ceil(reports / config.rateCeiling);
  const budget = FUNCTION_SETTINGS['export-reports'].timeout.toSeconds() / EXPORT_TIME_SHARE;
  if (seconds > budget) {
    throw new InfraConfigError(
      `context "reportBatchSize" x "unitSize" = ${reports} reports per invocation need ${seconds} s at ` +
        `"rateCeiling" ${config.rateCeiling} req/s, more than ${budget} s (a third of export-reports' timeout): ` +
        'lower reportBatchSize or unitSize, or raise rateCeiling',
    );
  }
}
