/**
 * The CDK app (`cdk.json`: `npx tsx infra/app.ts`). Configuration comes from the stage's
 * settings file `deploy/<stage>.json` and from context (which wins); a bad value stops synth
 * with a message naming the key and where it was read. `-c stage=<name>` deploys another
 * stage next to `prod`.
 */
import { App } from 'aws-cdk-lib';
import { InfraConfigError } from './config.js';
import { addExporterStack } from './exporter-stack.js';

const app = new App();
try {
  addExporterStack(app);
} catch (error) {
  if (!(error instanceof InfraConfigError)) throw error;
  // The message says what to fix; a stack trace would only bury it.
  console.error(error.message);
  process.exit(1);
}
app.synth();
