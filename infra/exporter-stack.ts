import { Annotations, type App, CfnOutput, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct } from 'constructs';
import { EXAMPLE_API_BASE_URL, type ExporterConfig, readConfig } from './config.js';
import { ApiKeySecret } from './constructs/api-key-secret.js';
import { ExporterAthena } from './constructs/athena.js';
import { ExporterCatalog } from './constructs/catalog.js';
import { DataLake } from './constructs/data-lake.js';
import { FixedEgress } from './constructs/egress.js';
import { ExporterFunctions, FUNCTION_SETTINGS } from './constructs/functions.js';
import { ExporterMonitoring } from './constructs/monitoring.js';
import { ExporterQueues } from './constructs/queues.js';
import { ExporterSchedules } from './constructs/schedule.js';

/** The stack's construct id, hence its default CloudFormation name. */
export const STACK_ID = 'CampaignReportExporter';

/**
 * What `infra/app.ts` does: reads and validates the context, adds the stack, and registers
 * cdk-nag's AwsSolutions checks (they run at synth; an unacknowledged finding fails it).
 */
export function addExporterStack(app: App): ExporterStack {
  const stack = new ExporterStack(app, STACK_ID, { config: readConfig(app) });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stack;
}

export interface ExporterStackProps extends StackProps {
  /** Validated configuration (see `parseConfig` / `readConfig`). */
  readonly config: ExporterConfig;
}

/** campaign-report-exporter in AWS: scheduled runs fanned out over SQS, landed in S3, queryable in Athena. */
export class ExporterStack extends Stack {
  readonly dataLake: DataLake;
  readonly apiKey: ApiKeySecret;
  readonly queues: ExporterQueues;
  readonly functions: ExporterFunctions;
  readonly schedules: ExporterSchedules;
  readonly catalog: ExporterCatalog;
  readonly athena: ExporterAthena;
  readonly monitoring: ExporterMonitoring;
  readonly egress: FixedEgress | undefined;

  constructor(scope: Construct, id: string, props: ExporterStackProps) {
    super(scope, id, {
      description: 'campaign-report-exporter: Integration API reports into an S3 data lake (Glue/Athena)',
      ...props,
    });
    const { config } = props;
    if (config.apiBaseUrl === EXAMPLE_API_BASE_URL) {
      Annotations.of(this).addWarningV2(
        'campaign-report-exporter:exampleApiBaseUrl',
        `apiBaseUrl is the example ${EXAMPLE_API_BASE_URL}: deploy with -c apiBaseUrl=<your {base_url}>`,
      );
    }

    this.dataLake = new DataLake(this, 'DataLake', {
      dataPrefix: config.dataPrefix,
      rawRetentionDays: config.rawRetentionDays,
      athenaResultsRetentionDays: config.athenaResultsRetentionDays,
    });
    this.apiKey = new ApiKeySecret(this, 'ApiKey', {
      existingSecretName: config.existingSecretName,
      existingSecretArn: config.existingSecretArn,
    });
    this.queues = new ExporterQueues(this, 'Queues', {
      maxReceiveCount: config.maxReceiveCount,
      planConsumerTimeout: FUNCTION_SETTINGS['plan-campaign'].timeout,
      reportConsumerTimeout: FUNCTION_SETTINGS['export-reports'].timeout,
    });
    this.egress = config.fixedEgressIp
      ? new FixedEgress(this, 'Egress', { flowLogRetentionDays: config.logRetentionDays })
      : undefined;
    this.functions = new ExporterFunctions(this, 'Functions', {
      config,
      dataLake: this.dataLake,
      apiKey: this.apiKey,
      queues: this.queues,
      network: this.egress && { vpc: this.egress.vpc, subnets: this.egress.subnets },
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
      databaseName: config.databaseName,
      projectionStartDate: config.projectionStartDate,
    });
    this.athena = new ExporterAthena(this, 'Athena', {
      dataLake: this.dataLake,
      workGroupName: this.stackName,
      databaseName: config.databaseName,
      bytesScannedCutoffMb: config.bytesScannedCutoffMb,
    });
    this.monitoring = new ExporterMonitoring(this, 'Monitoring', {
      functions: this.functions,
      queues: this.queues,
      alarmEmail: config.alarmEmail,
      throttleShareThreshold: config.throttleShareThreshold,
      missedRunAlarmHours: config.missedRunAlarmHours,
    });

    new CfnOutput(this, 'DataBucketName', { value: this.dataLake.bucket.bucketName });
    new CfnOutput(this, 'DataLocation', {
      description: 'Root of the output layout',
      value: `s3://${this.dataLake.bucket.bucketName}/${config.dataPrefix}`,
    });
    new CfnOutput(this, 'ApiKeySecretId', { value: this.apiKey.secretId });
    new CfnOutput(this, 'GlueDatabaseName', { value: config.databaseName });
    new CfnOutput(this, 'AthenaWorkGroupName', { value: this.athena.workGroup.ref });
    new CfnOutput(this, 'StartRunFunctionName', {
      description: 'Invoke with {"mode":"incremental"} or {"mode":"full"} to start a run by hand',
      value: this.functions.byName['start-run'].functionName,
    });
  }
}
