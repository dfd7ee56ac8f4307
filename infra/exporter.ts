/**
 * campaign-report-exporter as one construct: what `ExporterStack` deploys, for a team to add
 * to its own CDK app next to its own resources. Every physical name derives from `stage`
 * (infra/naming.ts); construct ids are scoped to the construct, and it creates no outputs
 * (see {@link CampaignReportExporter.outputs}).
 */
import { Stack } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { CONTEXT_KEYS, type ExporterConfig, parseConfig } from './config.js';
import { AnalystPolicy } from './constructs/analysts.js';
import { ApiKeySecret } from './constructs/api-key-secret.js';
import { ExporterAthena } from './constructs/athena.js';
import { ExporterCatalog } from './constructs/catalog.js';
import { DataLake } from './constructs/data-lake.js';
import { ICEBERG_COMMITTERS } from './constructs/data-lake-access.js';
import { FixedEgress } from './constructs/egress.js';
import { ExporterFunctions, FUNCTION_NAMES, FUNCTION_SETTINGS, sizeOf } from './constructs/functions.js';
import { IcebergTables } from './constructs/iceberg-tables.js';
import { ExporterMonitoring } from './constructs/monitoring.js';
import { ExporterQueues } from './constructs/queues.js';
import { RequestBudget } from './constructs/request-budget.js';
import { ExporterSchedules } from './constructs/schedule.js';
import { type ExporterNames, namesFor } from './naming.js';
import { checkApiBaseUrl } from './settings.js';

/**
 * The construct's props: the deployment configuration (the context keys of the app, typed),
 * every key optional but `apiBaseUrl`; defaults and checks are those of the app's context.
 */
export type CampaignReportExporterProps = { readonly apiBaseUrl: string } & Readonly<
  Partial<Omit<ExporterConfig, 'apiBaseUrl'>>
>;

/**
 * The feature flags the construct is built for, set on it so that it synthesizes the same in
 * any app: cdk.json's flags reach only this repository's app. An app without
 * `serverAccessLogsUseBucketPolicy` would give the access log bucket an ACL, which its
 * BUCKET_OWNER_ENFORCED ownership (no ACLs) refuses at synth.
 */
const FEATURE_FLAGS = { '@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy': true } as const;

/** One stack output: its plain name (the docs'), value and description. */
export interface ExporterOutput {
  readonly name: string;
  readonly value: string;
  readonly description?: string;
}

/** campaign-report-exporter: scheduled runs fanned out over SQS, landed in S3, queryable in Athena. */
export class CampaignReportExporter extends Construct {
  /** The validated configuration, defaults applied. */
  readonly config: ExporterConfig;
  /** The physical names of this stage. */
  readonly names: ExporterNames;
  readonly dataLake: DataLake;
  readonly apiKey: ApiKeySecret;
  readonly queues: ExporterQueues;
  readonly functions: ExporterFunctions;
  /** The request budget every function that calls the API leases from (rateCeiling in all). */
  readonly requestBudget: RequestBudget;
  readonly schedules: ExporterSchedules;
  readonly catalog: ExporterCatalog;
  /** The Iceberg tables (`tableFormat` iceberg). */
  readonly icebergTables: IcebergTables | undefined;
  readonly athena: ExporterAthena;
  readonly monitoring: ExporterMonitoring;
  readonly egress: FixedEgress | undefined;
  /** Attach to the people who query the data (Athena workgroup, Glue reads, S3 reads). */
  readonly analystPolicy: iam.ManagedPolicy;

  /** @throws InfraConfigError naming every bad prop. */
  constructor(scope: Construct, id: string, props: CampaignReportExporterProps) {
    super(scope, id);
    // Before any child: a construct's context reaches only what is added under it afterwards.
    for (const [flag, value] of Object.entries(FEATURE_FLAGS)) this.node.setContext(flag, value);
    const config = parseConfig({ ...props }, 'props');
    this.config = config;
    this.names = namesFor(config.stage, { databaseName: config.databaseName });
    const names = this.names;
    checkApiBaseUrl(config.apiBaseUrl, 'the prop apiBaseUrl');

    this.dataLake = new DataLake(this, 'DataLake', {
      dataPrefix: config.dataPrefix,
      rawRetentionDays: config.rawRetentionDays,
      rawTransitionDays: config.rawTransitionDays,
      rawStorageClass: config.rawStorageClass,
      athenaResultsRetentionDays: config.athenaResultsRetentionDays,
      quarantineRetentionDays: config.quarantineRetentionDays,
    });
    this.apiKey = new ApiKeySecret(this, 'ApiKey', {
      secretName: names.secretName,
      existingSecretName: config.existingSecretName,
      existingSecretArn: config.existingSecretArn,
      existingSecretKmsKeyArn: config.existingSecretKmsKeyArn,
    });
    this.queues = new ExporterQueues(this, 'Queues', {
      maxReceiveCount: config.maxReceiveCount,
      // Their visibility follows the consumers' timeouts as configured.
      planConsumerTimeout: sizeOf('plan-campaign', config).timeout,
      reportConsumerTimeout: sizeOf('export-reports', config).timeout,
    });
    this.egress = config.fixedEgressIp
      ? new FixedEgress(this, 'Egress', {
          flowLogRetentionDays: config.logRetentionDays,
          eipAllocationId: config.egressEipAllocationId,
        })
      : undefined;
    this.requestBudget = new RequestBudget(this, 'RequestBudget');
    this.functions = new ExporterFunctions(this, 'Functions', {
      config,
      requestBudget: this.requestBudget,
      dataLake: this.dataLake,
      apiKey: this.apiKey,
      queues: this.queues,
      network: this.egress && { vpc: this.egress.vpc, subnets: this.egress.subnets },
      serviceName: names.serviceName,
      stage: names.stage,
    });
    this.schedules = new ExporterSchedules(this, 'Schedules', {
      startRun: this.functions.byName['start-run'],
      finishRun: this.functions.byName['finish-run'],
      scheduleCron: config.scheduleCron,
      scheduleTimeZone: config.scheduleTimeZone,
      fullRefreshCron: config.fullRefreshCron,
    });
    this.catalog = new ExporterCatalog(this, 'Catalog', {
      dataLake: this.dataLake,
      databaseName: names.databaseName,
      projectionStartDate: config.projectionStartDate,
      tableFormat: config.tableFormat,
    });
    this.icebergTables =
      config.tableFormat === 'iceberg'
        ? new IcebergTables(this, 'IcebergTables', {
            dataLake: this.dataLake,
            databaseName: names.databaseName,
            database: this.catalog.database,
          })
        : undefined;
    if (this.icebergTables !== undefined) {
      // The functions that close runs commit their snapshots.
      for (const name of ICEBERG_COMMITTERS)
        this.functions.byName[name].bindIcebergTables(this.icebergTables);
    }
    this.athena = new ExporterAthena(this, 'Athena', {
      dataLake: this.dataLake,
      workGroupName: names.workGroupName,
      databaseName: names.databaseName,
      bytesScannedCutoffMb: config.bytesScannedCutoffMb,
      tableFormat: config.tableFormat,
    });
    this.monitoring = new ExporterMonitoring(this, 'Monitoring', {
      functions: this.functions,
      queues: this.queues,
      scheduleDeadLetterQueues: [this.schedules.deadLetterQueue],
      serviceName: names.serviceName,
      alarmEmail: config.alarmEmail,
      throttleShareThreshold: config.throttleShareThreshold,
      missedRunAlarmHours: config.missedRunAlarmHours,
    });
    this.analystPolicy = new AnalystPolicy(this, 'Analysts', {
      dataLake: this.dataLake,
      databaseName: names.databaseName,
      workGroupName: names.workGroupName,
      tableFormat: config.tableFormat,
    }).policy;
  }

  /**
   * What a person needs after deploying, under the names the docs use. `ExporterStack`
   * makes each a stack output; a stack holding several exporters prefixes the names.
   */
  get outputs(): readonly ExporterOutput[] {
    const { config, names } = this;
    const bucket = this.dataLake.bucket.bucketName;
    const out: ExporterOutput[] = [
      { name: 'DataBucketName', value: bucket },
      {
        name: 'DataLocation',
        description: 'Root of the output layout',
        value: `s3://${bucket}/${config.dataPrefix}`,
      },
      { name: 'ApiKeySecretId', value: this.apiKey.secretId },
      { name: 'GlueDatabaseName', value: names.databaseName },
      { name: 'AthenaWorkGroupName', value: this.athena.workGroup.ref },
      {
        name: 'StartRunFunctionName',
        description: 'Invoke with {"mode":"incremental"} or {"mode":"full"} to start a run by hand',
        value: this.functions.byName['start-run'].functionName,
      },
      {
        name: 'AnalystPolicyArn',
        description: 'Attach to the roles, users or groups that query the data in Athena',
        value: this.analystPolicy.managedPolicyArn,
      },
      {
        name: 'AlarmTopicArn',
        description: 'SNS topic of the alarms (subscribe more endpoints here)',
        value: this.monitoring.topic.topicArn,
      },
    ];
    for (const name of FUNCTION_NAMES) {
      out.push({
        name: `${FUNCTION_SETTINGS[name].id}LogGroupName`,
        description: `Log group of ${name}: aws logs tail <this> --follow`,
        value: this.functions.logGroups[name].logGroupName,
      });
    }
    const { region } = Stack.of(this);
    out.push({
      name: 'DashboardUrl',
      description: 'CloudWatch dashboard: runs, reports, API load, queues, functions, alarms',
      value: `https://${region}.console.aws.amazon.com/cloudwatch/home?region=${region}#dashboards/dashboard/${this.monitoring.dashboard.dashboardName}`,
    });
    if (this.apiKey.putKeyCommand !== undefined) {
      out.push({
        name: 'PutKeyCommand',
        description:
          'Put the Integration API key into the secret: write it to key.txt, run this, then delete key.txt',
        value: this.apiKey.putKeyCommand,
      });
    }
    if (this.egress?.publicIp !== undefined) {
      out.push({
        name: 'EgressIpAddress',
        description: 'The fixed public IP the API functions call from: allow it for the API key',
        value: this.egress.publicIp,
      });
    } else if (this.egress !== undefined) {
      out.push({
        name: 'EgressEipAllocationId',
        description:
          'The Elastic IP the API functions call from (given by allocation id, so CloudFormation does not know its address: aws ec2 describe-addresses --allocation-ids <this id>)',
        value: this.egress.allocationId,
      });
    }
    // A setting that is already an output under its name (egressEipAllocationId) is not repeated.
    const taken = new Set(out.map((o) => o.name));
    return [...out, ...this.settingOutputs().filter((o) => !taken.has(o.name))];
  }

  /**
   * The effective settings, one output each under the key's name capitalised (`ApiBaseUrl`,
   * `AlarmEmail`, `ProjectionStartDate`, …), so that `cdk diff` shows a deploy that would change
   * one. Unset keys (and an empty `dataPrefix`) have none. No setting is a secret: the key is
   * named, never held.
   */
  private settingOutputs(): ExporterOutput[] {
    return CONTEXT_KEYS.flatMap((key) => {
      const value = this.config[key];
      if (value === undefined || value === '') return [];
      return [
        {
          name: key.charAt(0).toUpperCase() + key.slice(1),
          description: `Setting ${key} as deployed (a deploy with another value changes it)`,
          value: String(value),
        },
      ];
    });
  }
}
