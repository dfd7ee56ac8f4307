/**
 * `npm run export -- --out DIR|s3://bucket/prefix [--date YYYY-MM-DD] [--full]`: one run
 * against the real API, in one process.
 */
import { describeError } from '../../shared/errors.js';
import { manifestKey } from '../../shared/export/layout.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { parseCli, runOptionsOf, USAGE } from './config.js';
import { cliDeps, consoleLog } from './deps.js';
import { formatSummary, Progress } from './progress.js';

async function main(): Promise<number> {
  let config: ReturnType<typeof parseCli>;
  try {
    config = parseCli(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`error: ${describeError(error)}\n\n${USAGE}\n`);
    return 2;
  }
  if (config === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const deps = cliDeps({ ...config, log: consoleLog(false) });
  const progress = new Progress();
  let manifest: Awaited<ReturnType<typeof runExport>>;
  try {
    manifest = await runExport(deps, { ...runOptionsOf(config), onProgress: progress.onEvent });
  } finally {
    progress.finish();
  }
  process.stdout.write(
    `${formatSummary(manifest, deps.storage.location, manifestKey(manifest.dt, manifest.run_id))}\n`,
  );
  if (manifest.status === 'failed') {
    process.stderr.write(`error: ${manifest.error?.message ?? 'the run failed'}\n`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${describeError(error)}\n`);
    process.exitCode = 1;
  },
);
