/**
 * One Lambda "container" of the loopback topology: the four handlers and the clients their
 * runtime module built. Importing this module runs the handlers' module-load code (environment,
 * clients, secret prefetch), so set the environment and the mocks first, and import it once per
 * container in a fresh module registry (`vi.resetModules()`, or a tsx namespace in the benchmark).
 */
export { handler as exportReports } from '../../../functions/aws/export-reports.js';
export { handler as finishRun } from '../../../functions/aws/finish-run.js';
export { handler as planCampaign } from '../../../functions/aws/plan-campaign.js';
export { s3, sqs } from '../../../functions/aws/runtime.js';
export { handler as startRun } from '../../../functions/aws/start-run.js';
