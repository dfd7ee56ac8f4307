/**
 * Every name a deployment gives a resource, derived from its stage, so that two stages (staging
 * and prod) live side by side in one account and region. Nothing else in infra/ spells a
 * physical name: resources without one here get names CloudFormation makes unique.
 */
import { stackNameOf, stageSuffix } from '../shared/aws/stack-name.js';

export { DEFAULT_STAGE, STAGE_PATTERN } from '../shared/aws/stack-name.js';

export interface ExporterNames {
  readonly stage: string;
  /** The CloudFormation stack (and the Athena workgroup). */
  readonly stackName: string;
  /** Powertools' service: the `service` dimension of every metric and the logs' service field. */
  readonly serviceName: string;
  /** The Glue database, unless the deployment names one (context `databaseName`). */
  readonly databaseName: string;
  /** The API key secret the stack creates. */
  readonly secretName: string;
  /** The Athena workgroup. */
  readonly workGroupName: string;
}

/** The product's name, the root of every derived name. */
export const PRODUCT = 'campaign-report-exporter';

/**
 * The names of a stage. `prod` keeps the names deployments had before stages existed (stack
 * `CampaignReportExporter`, database `campaign_report_exporter`), so that upgrading one updates
 * its stack in place; every other stage appends itself to each name.
 */
export function namesFor(stage: string, options: { databaseName?: string | undefined } = {}): ExporterNames {
  // Checks the stage: every name below is built from it.
  const stackName = stackNameOf(stage);
  const suffix = stageSuffix(stage);
  return {
    stage,
    stackName,
    serviceName: `${PRODUCT}${suffix}`,
    databaseName: options.databaseName ?? `${PRODUCT}${suffix}`.replaceAll('-', '_'),
    secretName: `${stackName}/integration-api-key`,
    workGroupName: stackName,
  };
}
