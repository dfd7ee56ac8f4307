/**
 * End-to-end export benchmark, run as a child process so its peak RSS is the exporter's own:
 * `tsx test/bench/export.ts <base_url> <api_key> <out_dir>` prints one JSON line of figures.
 * The simulator runs in the parent (test/bench/main.ts).
 */

import { cliDeps } from '../../functions/cli/deps.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { silentLog } from '../../shared/log.js';

async function main(): Promise<void> {
  const [baseUrl, apiKey, out] = process.argv.slice(2);
  if (!baseUrl || !apiKey || !out) throw new Error('usage: export.ts <base_url> <api_key> <out_dir>');
  const deps = cliDeps({ baseUrl, apiKey, out, concurrency: 16, maxRate: 100_000, log: silentLog });
  const started = performance.now();
  const manifest = await runExport(deps, { mode: 'full' });
  const seconds = (performance.now() - started) / 1000;
  const storage = deps.storage.stats();
  const storageRequests = storage.reads + storage.writes + storage.lists + storage.deletes;
  const exported = manifest.counts.reports_exported;
  process.stdout.write(
    `${JSON.stringify({
      status: manifest.status,
      reports_exported: exported,
      jobs: manifest.counts.jobs,
      seconds,
      reports_per_s: exported / seconds,
      peak_rss_mb: process.resourceUsage().maxRSS / 1024,
      storage_requests: storageRequests,
      storage_requests_per_1000_reports: (1000 * storageRequests) / Math.max(1, exported),
      storage,
    })}\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
