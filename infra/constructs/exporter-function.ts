import { type Duration, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type * as z from 'zod';
import type { EnvSchema } from '../../functions/aws/env.js';
import { MALLOC_MMAP_THRESHOLD_BYTES } from '../../shared/malloc.js';
import { METRICS_NAMESPACE } from '../../shared/metrics.js';
import type { ExporterConfig } from '../config.js';
import { V8_SEMI_SPACE_MB } from '../function-sizes.js';
import type { ApiKeySecret } from './api-key-secret.js';
import type { DataLake } from './data-lake.js';
import type { DataLakeAccess } from './data-lake-access.js';
import type { IcebergTables } from './iceberg-tables.js';

/** A variable the handlers read (functions/aws/env.ts): a misspelt name fails typecheck. */
export type HandlerVariable = keyof z.input<typeof EnvSchema>;

/** Variables that name a resource: set only by the bind… method that also grants its use. */
const RESOURCE_VARIABLES = [
  'DATA_BUCKET',
  'DATA_PREFIX',
  'API_BASE_URL',
  'API_KEY_SECRET_ID',
  'PLAN_QUEUE_URL',
  'REPORT_QUEUE_URL',
  'EVENT_BUS_NAME',
  'REQUEST_BUDGET_TABLE',
  'GLUE_DATABASE',
] as const satisfies readonly HandlerVariable[];

/** Variables that grant nothing (tuning): set with `configure`. */
export type SettingVariable = Exclude<HandlerVariable, (typeof RESOURCE_VARIABLES)[number]>;

/** Read by Powertools and Node, not by the handlers' schema; set by the construct itself. */
type RuntimeVariable =
  | 'POWERTOOLS_SERVICE_NAME'
  | 'POWERTOOLS_METRICS_NAMESPACE'
  | 'POWERTOOLS_LOG_LEVEL'
  | 'NODE_OPTIONS'
  | 'MALLOC_MMAP_THRESHOLD_';

export interface ExporterFunctionProps {
  /** The function's name in the exporter (`start-run`, ...): named in its role's description. */
  readonly name: string;
  /** The handler module (exports `handler`). */
  readonly entry: string;
  readonly description: string;
  readonly timeout: Duration;
  readonly memorySize: number;
  /** V8's old space as a share of `memorySize` (FunctionSize.oldSpaceShare). */
  readonly oldSpaceShare: number;
  /** Where `package-lock.json` is: the bundler's project root. */
  readonly projectRoot: string;
  /**
   * A folder holding the handler already bundled (`index.js` and its source map), as the
   * package ships it: deployed as it is, and `entry` is not bundled at synth.
   */
  readonly prebuilt?: string | undefined;
  readonly logRetentionDays: number;
  readonly logLevel: ExporterConfig['logLevel'];
  /** Powertools' `service`: a dimension of every metric and a field of every log line. */
  readonly serviceName: string;
  /** The deployment's stage, named in the ExportRunFinished event. */
  readonly stage: string;
  /** With a fixed egress IP: the VPC and subnets the function runs in. */
  readonly network?: { readonly vpc: ec2.IVpc; readonly subnets: ec2.SubnetSelection } | undefined;
}

/**
 * How every exporter function's code is bundled (NodejsFunction's esbuild options): exported so
 * that a bench can build the same bundle without synthesizing the stack (test/bench/scale-bundle.ts).
 */
export const EXPORTER_BUNDLING = {
  // CommonJS, not ESM: an ES module that imports node:http makes Node read every export of
  // it, and http's lazy fetch/WebSocket getters load undici; node:fs does the same. That
  // was a fifth of the cold import (BENCHMARKS.md, "lambda").
  format: nodejs.OutputFormat.CJS,
  target: 'node24',
  mainFields: ['module', 'main'],
  minify: true,
  sourceMap: true,
  // Stack traces name files and lines; the sources themselves need not ship.
  sourcesContent: false,
  forceDockerBundling: false,
  // The SDK clients the tests ran against, not whatever the runtime carries today.
  bundleAwsSDK: true,
  // esbuild's warnings and errors, not its table of file sizes at every synth (where a bundle
  // over 1 MB gets a warning sign, though nothing is wrong).
  logLevel: nodejs.LogLevel.WARNING,
} satisfies nodejs.BundlingOptions;

/**
 * The V8 flags of a function of `memoryMb` whose old space is `oldSpaceShare` of it. Set, not
 * left to the runtime: with neither flag in NODE_OPTIONS, Lambda's Node bootstrap gives V8 a
 * tenth of the memory as new space and the rest as old space (922 MB of old space at 1,024 MB),
 * and V8 lets garbage grow toward those limits for as long as an invocation runs
 * (function-sizes.ts: V8_SEMI_SPACE_MB, FunctionSize.oldSpaceShare).
 */
export const v8HeapFlags = (memoryMb: number, oldSpaceShare: number): string[] => [
  `--max-old-space-size=${Math.floor(memoryMb * oldSpaceShare)}`,
  `--max-semi-space-size=${V8_SEMI_SPACE_MB}`,
];

/**
 * A function's NODE_OPTIONS: stack traces name the source lines (BENCHMARKS.md, "lambda"), and
 * its V8 heap from its memory ({@link v8HeapFlags}).
 */
export const exporterNodeOptions = (memoryMb: number, oldSpaceShare: number): string =>
  ['--enable-source-maps', ...v8HeapFlags(memoryMb, oldSpaceShare)].join(' ');

/** Every exporter function's glibc `MALLOC_MMAP_THRESHOLD_` (bytes): see shared/malloc.ts. */
export const EXPORTER_MALLOC_MMAP_THRESHOLD = String(MALLOC_MMAP_THRESHOLD_BYTES);

/** What a function does with a work queue. */
export type QueueUse =
  /** Sends work to it (fans out). */
  | 'send'
  /** Reads its message counts (tells a drained run). */
  | 'watch'
  /** Is its event source; hands messages back for later through the queue URL. */
  | { readonly consume: { readonly batchSize: number; readonly maxConcurrency: number } };

/** The API settings a function that calls the Integration API gets with the key. */
export type ApiSettings = Pick<
  ExporterConfig,
  'apiBaseUrl' | 'secretCacheTtlSeconds' | 'reportConcurrency' | 'rateCeiling' | 'maxBodyMiB'
>;

/** The deployment's shared request budget (a DynamoDB table). */
export interface RequestBudget {
  readonly tableName: string;
  grantUse(grantee: iam.IGrantable): void;
  /** The fetcher slots' items: PutItem and DeleteItem on the table. */
  grantFetcherSlots(grantee: iam.IGrantable): void;
}

/**
 * One exporter Lambda: Node 24 on ARM64, a CommonJS bundle, JSON logs in a log group of its own,
 * a role of its own. Everything a handler reads from the environment comes through a `bind…`
 * method that sets the variable and grants what it names together, or through `configure`
 * for tuning that grants nothing: no function gets a variable without its permission, nor the
 * reverse.
 */
export class ExporterFunction extends nodejs.NodejsFunction {
  /** The function's own log group (retention set; the only one its role may write to). */
  readonly functionLogs: logs.LogGroup;
  readonly executionRole: iam.Role;
  readonly #set = new Map<string, string>();

  constructor(scope: Construct, id: string, props: ExporterFunctionProps) {
    // Siblings, not children: the log group's and the role's ids (hence logical ids) stay
    // those they had before this construct existed.
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: props.logRetentionDays as logs.RetentionDays,
    });
    const role = new iam.Role(scope, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${props.name}`,
    });
    // Logs go to this function's own group only (no AWSLambdaBasicExecutionRole: logs:* on *).
    logGroup.grantWrite(role);
    if (props.network) {
      role.addManagedPolicy(
        iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'),
      );
      Validations.of(role).acknowledge({
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
        reason:
          'Lambda needs ec2:CreateNetworkInterface/DescribeNetworkInterfaces/DeleteNetworkInterface to run in the fixed-egress VPC; these actions take no resource ARN, and the AWS managed policy is the documented minimal set.',
      });
    }
    super(scope, id, {
      description: props.description,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      role,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      // Powertools' EMF metric lines carry no "level", and Lambda's JSON log filtering gives a
      // line without one the level INFO: an application level of WARN or ERROR would drop every
      // metric, and no alarm could fire. So Lambda keeps INFO (DEBUG when asked for) and
      // Powertools' own POWERTOOLS_LOG_LEVEL sets the verbosity.
      applicationLogLevelV2:
        props.logLevel === 'DEBUG' ? lambda.ApplicationLogLevel.DEBUG : lambda.ApplicationLogLevel.INFO,
      // INFO keeps the platform's START and REPORT lines (duration, memory used, init duration).
      systemLogLevelV2: lambda.SystemLogLevel.INFO,
      ...(props.prebuilt !== undefined
        ? // NodejsFunction deploys `code` as given (no esbuild, no Docker); the file is index.js,
          // as its own bundling names it.
          { code: lambda.Code.fromAsset(props.prebuilt), handler: 'index.handler' }
        : {
            entry: props.entry,
            handler: 'handler',
            projectRoot: props.projectRoot,
            depsLockFilePath: `${props.projectRoot}package-lock.json`,
            bundling: EXPORTER_BUNDLING,
          }),
      ...(props.network ? { vpc: props.network.vpc, vpcSubnets: props.network.subnets } : {}),
    });
    this.functionLogs = logGroup;
    this.executionRole = role;
    this.#variable('POWERTOOLS_SERVICE_NAME', props.serviceName);
    this.#variable('POWERTOOLS_METRICS_NAMESPACE', METRICS_NAMESPACE);
    this.#variable('POWERTOOLS_LOG_LEVEL', props.logLevel);
    this.#variable('NODE_OPTIONS', exporterNodeOptions(props.memorySize, props.oldSpaceShare));
    this.#variable('MALLOC_MMAP_THRESHOLD_', EXPORTER_MALLOC_MMAP_THRESHOLD);
    this.configure('STAGE', props.stage);
  }

  /** Sets a tuning variable (one that names no resource and needs no permission). */
  configure(name: SettingVariable, value: string | number): this {
    this.#variable(name, String(value));
    return this;
  }

  /** DATA_BUCKET and DATA_PREFIX, and exactly the object operations `access` names. */
  bindDataLake(dataLake: DataLake, access: DataLakeAccess): this {
    this.#variable('DATA_BUCKET', dataLake.bucket.bucketName);
    this.#variable('DATA_PREFIX', dataLake.dataPrefix);
    dataLake.grantAccess(this.executionRole, access);
    return this;
  }

  /** The Integration API: its URL, the key secret (read grant) and the client's limits. */
  bindApiKey(apiKey: ApiKeySecret, settings: ApiSettings): this {
    this.#variable('API_BASE_URL', settings.apiBaseUrl);
    this.#variable('API_KEY_SECRET_ID', apiKey.secretId);
    apiKey.grantRead(this);
    // Every function that calls the API gets the limiter's settings: the ceiling bounds them all.
    this.configure('SECRET_CACHE_TTL_SECONDS', settings.secretCacheTtlSeconds);
    this.configure('REPORT_CONCURRENCY', settings.reportConcurrency);
    this.configure('RATE_CEILING', settings.rateCeiling);
    this.configure('MAX_BODY_MIB', settings.maxBodyMiB);
    return this;
  }

  /** The plan queue (one message per campaign), used as `use` says. */
  bindPlanQueue(queue: sqs.IQueue, use: QueueUse): this {
    return this.#bindQueue('PLAN_QUEUE_URL', queue, use);
  }

  /** The report queue (one message per unit of reports), used as `use` says. */
  bindReportQueue(queue: sqs.IQueue, use: QueueUse): this {
    return this.#bindQueue('REPORT_QUEUE_URL', queue, use);
  }

  /** Puts ExportRunFinished events on `bus`. */
  bindEventBus(bus: events.IEventBus): this {
    this.#variable('EVENT_BUS_NAME', bus.eventBusName);
    bus.grantPutEventsTo(this);
    return this;
  }

  /** The Iceberg tables' Glue database (GLUE_DATABASE) and the right to commit its tables. */
  bindIcebergTables(tables: IcebergTables): this {
    this.#variable('GLUE_DATABASE', tables.databaseName);
    tables.grantCommit(this.executionRole);
    return this;
  }

  /** The deployment's shared request budget: REQUEST_BUDGET_TABLE and the right to use it. */
  bindRequestBudget(budget: RequestBudget): this {
    this.#variable('REQUEST_BUDGET_TABLE', budget.tableName);
    budget.grantUse(this);
    return this;
  }

  /** Fetcher slots in the budget's table (the budget bound too): the right to take and release them. */
  bindFetcherSlots(budget: RequestBudget): this {
    this.bindRequestBudget(budget);
    budget.grantFetcherSlots(this);
    return this;
  }

  #bindQueue(name: 'PLAN_QUEUE_URL' | 'REPORT_QUEUE_URL', queue: sqs.IQueue, use: QueueUse): this {
    this.#variable(name, queue.queueUrl);
    if (use === 'send') {
      queue.grantSendMessages(this);
    } else if (use === 'watch') {
      queue.grant(this, 'sqs:GetQueueAttributes');
    } else {
      // The event source grants receive, delete and ChangeMessageVisibility (the hand-back).
      this.addEventSource(
        new SqsEventSource(queue, {
          batchSize: use.consume.batchSize,
          maxConcurrency: use.consume.maxConcurrency,
          reportBatchItemFailures: true,
        }),
      );
    }
    return this;
  }

  /** Sets a variable once: a second binding with another value is a mistake in the stack. */
  #variable(name: HandlerVariable | RuntimeVariable, value: string): void {
    const before = this.#set.get(name);
    if (before !== undefined && before !== value) {
      throw new Error(`${this.node.path}: ${name} is bound twice, to different values`);
    }
    this.#set.set(name, value);
    this.addEnvironment(name, value);
  }
}
