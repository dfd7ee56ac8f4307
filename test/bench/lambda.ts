/**
 * Lambda bundles as `cdk synth` builds them: size of each function's bundle and its cold
 * import time (a fresh Node process per sample, importing the bundle as the runtime would).
 */
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FUNCTION_NAMES, FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import { removeSynthOutputs, resourcesOf, synthExporter } from '../infra/helpers.js';

const SAMPLES = 9;

/** An environment like the stack's, pointing at nothing (the import must not send a request). */
const LAMBDA_ENV = {
  PATH: process.env.PATH,
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'bench',
  AWS_SECRET_ACCESS_KEY: 'bench',
  AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
  AWS_EC2_METADATA_DISABLED: 'true',
  DATA_BUCKET: 'bench',
  API_BASE_URL: 'https://api.example.com',
  API_KEY_SECRET_ID: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:bench-AbCdEf',
  PLAN_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/plan',
  REPORT_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/report',
  POWERTOOLS_SERVICE_NAME: 'campaign-report-exporter',
  POWERTOOLS_METRICS_NAMESPACE: 'CampaignReportExporter',
};

function coldImportMs(file: string): number {
  const script = `process.on('unhandledRejection', () => {});
const t = performance.now();
const m = await import(${JSON.stringify(pathToFileURL(file).href)});
if (typeof m.handler !== 'function') process.exit(3);
process.stdout.write(String(performance.now() - t));
process.exit(0);`;
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const out = execFileSync(
      process.execPath,
      ['--enable-source-maps', '--input-type=module', '-e', script],
      {
        env: LAMBDA_ENV,
      },
    );
    samples.push(Number(out.toString()));
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] ?? Number.NaN;
}

export async function benchLambda(): Promise<Record<string, number>> {
  const { template, outdir } = synthExporter({}, { bundle: true });
  const functions = resourcesOf(template, 'AWS::Lambda::Function');
  const results: Record<string, number> = {};
  try {
    for (const name of FUNCTION_NAMES) {
      const id = Object.keys(functions).find((logicalId) =>
        logicalId.startsWith(`Functions${FUNCTION_SETTINGS[name].id}`),
      );
      const asset = id ? functions[id]?.Metadata?.['aws:asset:path'] : undefined;
      if (typeof asset !== 'string') throw new Error(`no bundled asset for ${name}`);
      const file = join(outdir, asset, 'index.mjs');
      results[`${name}_bundle_kb`] = Math.round(statSync(file).size / 1024);
      results[`${name}_cold_import_ms`] = Math.round(coldImportMs(file));
    }
  } finally {
    removeSynthOutputs();
  }
  return results;
}
