/**
 * One Lambda "container" of the loopback topology: the four handlers and the clients their
 * runtime module built. Importing this module runs the handlers' module-load code (logger,
 * metrics; the environment is read at the first invocation), so set the environment and the
 * mocks first, and import it once per
 * container in a fresh module registry (`vi.resetModules()`, or a tsx namespace in the benchmark).
 */
import { clients } from '../../../functions/aws/runtime.js';

export { handler as exportReports } from '../../../functions/aws/export-reports.js';
export { handler as finishRun } from '../../../functions/aws/finish-run.js';
export { handler as planCampaign } from '../../../functions/aws/plan-campaign.js';
export { handler as startRun } from '../../../functions/aws/start-run.js';

/** The runtime makes its clients on first use; the topology attaches to them before any handler runs. */
export const s3 = clients.s3;
export const sqs = clients.sqs;
