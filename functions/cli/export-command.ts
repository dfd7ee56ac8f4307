/**
 * The `export` command: one run against the real API, in one process. `npm run export` and
 * the packaged `campaign-report-exporter export` both call {@link exportCommand}.
 */
import { describeError } from '../../shared/errors.js';
import { manifestKey } from '../../shared/export/layout.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { parseCli, runOptionsOf, USAGE } from './config.js';
import { cliDeps, consoleLog } from './deps.js';
import { formatSummary, Progress } from './progress.js';

/** Runs `export` with `argv` (the flags after the command) and `env`; resolves to the exit code. */
export async function exportCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let config: ReturnType<typeof parseCli>;
  try {
    config = parseCli(argv, env);
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
