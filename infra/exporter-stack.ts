import { type App, CfnOutput, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct } from 'constructs';
import type { ExporterConfig } from './config.js';
import { CampaignReportExporter } from './exporter.js';
import { namesFor } from './naming.js';
import { readConfig } from './settings.js';

/** Apps cdk-nag already checks: two stages in one app are checked once. */
const checkedApps = new WeakSet<App>();

/**
 * What `infra/app.ts` does: reads and validates the context (or takes `config`), adds the
 * stage's stack, and registers cdk-nag's AwsSolutions checks (they run at synth; an
 * unacknowledged finding fails it).
 */
export function addExporterStack(app: App, config: ExporterConfig = readConfig(app)): ExporterStack {
  const { stackName } = namesFor(config.stage, { databaseName: config.databaseName });
  const stack = new ExporterStack(app, stackName, { config });
  if (!checkedApps.has(app)) {
    checkedApps.add(app);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  }
  return stack;
}

export interface ExporterStackProps extends StackProps {
  /** Validated configuration (see `parseConfig` / `readConfig`). */
  readonly config: ExporterConfig;
}

/**
 * The app's stack: one {@link CampaignReportExporter} and its outputs under plain names. The
 * construct's id is `Default`, which CDK leaves out of logical ids: the resources keep the
 * logical ids they had when the stack held them directly, so an existing stack updates in place.
 */
export class ExporterStack extends Stack {
  readonly exporter: CampaignReportExporter;

  constructor(scope: Construct, id: string, props: ExporterStackProps) {
    const names = namesFor(props.config.stage, { databaseName: props.config.databaseName });
    super(scope, id, {
      description: 'campaign-report-exporter: Integration API reports into an S3 data lake (Glue/Athena)',
      stackName: names.stackName,
      ...props,
    });
    this.exporter = new CampaignReportExporter(this, 'Default', props.config);
    for (const output of this.exporter.outputs) {
      new CfnOutput(this, output.name, { value: output.value, description: output.description });
    }
  }
}
