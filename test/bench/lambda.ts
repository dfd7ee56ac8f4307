/**
 * Lambda bundles as `cdk synth` builds them: size of each function's bundle and its cold
 * import time (a fresh Node process per sample, loading the bundle as the runtime would: an ES
 * module with `import()`, CommonJS with `require`), with the stack's `--enable-source-maps` and
 * without it. Run alone: `npx tsx test/bench/lambda.ts`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { FUNCTION_NAMES, FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import { removeSynthOutputs, resourcesOf, synthExporter } from '../infra/helpers.js';

const SAMPLES = 9;

/** An environment like the stack's, pointing at nothing (the import must not send a request); scale.ts uses it too. */
export const LAMBDA_ENV = {
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

/** The ways the bench launches node: as the stack does (NODE_OPTIONS), and without source maps. */
const NODE_FLAGS = { source_maps: ['--enable-source-maps'], no_source_maps: [] } as const;

/** The median wall time of loading `file` in a fresh process, in milliseconds. */
function coldImportMs(file: string, flags: readonly string[]): number {
  const load = file.endsWith('.mjs')
    ? `await import(${JSON.stringify(pathToFileURL(file).href)})`
    : `(await import('node:module')).createRequire(import.meta.url)(${JSON.stringify(file)})`;
  // Whatever an import starts and does not await must not end the process before it reports.
  const script = `process.on('unhandledRejection', () => {});
const t = performance.now();
const m = ${load};
if (typeof m.handler !== 'function') process.exit(3);
process.stdout.write(String(performance.now() - t));
process.exit(0);`;
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const out = execFileSync(process.execPath, [...flags, '--input-type=module', '-e', script], {
      env: LAMBDA_ENV,
    });
    samples.push(Number(out.toString()));
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] ?? Number.NaN;
}

/** The bundle's entry: `index.mjs` (ES module output) or `index.js` (CommonJS). */
function entryIn(dir: string): string {
  const esm = join(dir, 'index.mjs');
  return existsSync(esm) ? esm : join(dir, 'index.js');
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
      const file = entryIn(join(outdir, asset));
      results[`${name}_bundle_kb`] = Math.round(statSync(file).size / 1024);
      for (const [variant, flags] of Object.entries(NODE_FLAGS))
        results[`${name}_cold_import_ms_${variant}`] = Math.round(coldImportMs(file, flags));
    }
  } finally {
    removeSynthOutputs();
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const results = await benchLambda();
  for (const [key, value] of Object.entries(results)) console.log(`${key}\t${value}`);
}
