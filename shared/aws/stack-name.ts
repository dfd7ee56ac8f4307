/**
 * The name of a deployment's CloudFormation stack, from its stage: what the CDK app deploys
 * (infra/naming.ts derives every other physical name beside it) and what a client that looks the
 * stack up by name (the CLI's `aws` command) asks CloudFormation for.
 */

/** What the stage may be: it goes into stack, secret, Glue, Athena and metric names. */
export const STAGE_PATTERN = /^[a-z][a-z0-9-]{0,19}$/;
export const DEFAULT_STAGE = 'prod';

/** The stack name of `prod`, which keeps the name deployments had before stages existed. */
const STACK_NAME = 'CampaignReportExporter';

/** What every name of a stage ends with: nothing for `prod`, `-<stage>` for any other. */
export const stageSuffix = (stage: string): string => (stage === DEFAULT_STAGE ? '' : `-${stage}`);

/**
 * The stack of a stage; throws on a stage that `STAGE_PATTERN` refuses.
 *
 * @example
 * stackNameOf('prod')    // 'CampaignReportExporter'
 * stackNameOf('staging') // 'CampaignReportExporter-staging'
 */
export function stackNameOf(stage: string): string {
  if (!STAGE_PATTERN.test(stage)) {
    throw new Error(`stage "${stage}": expected lowercase letters, digits and "-", starting with a letter`);
  }
  return `${STACK_NAME}${stageSuffix(stage)}`;
}
