/**
 * End-to-end export benchmark, run as a child process so its peak RSS is the exporter's own:
 * `tsx test/bench/export.ts <base_url> <api_key> <out_dir>` prints one JSON line of figures.
 * The simulator runs in the parent (test/bench/main.ts). RSS is sampled while the run goes, so
 * the peak of fetching (until the last unit is written) and of finishing (publish, manifest)
 * are told apart.
 */
import { readFileSync } from 'node:fs';
import { cliDeps } from '../../functions/cli/deps.js';
import { boundCliHeap } from '../../functions/cli/heap.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { DEFAULT_UNIT_SIZE } from '../../shared/export/run/plan-campaign.js';
import { silentLog } from '../../shared/log.js';

/** How often RSS is sampled: often enough to catch a publish's row group being encoded. */
const SAMPLE_MS = 20;
const MiB = 2 ** 20;

/**
 * The process's RSS high-water mark (VmHWM). Not `resourceUsage().maxRSS`: Linux carries that
 * over from the forked copy of the parent, whose RSS (the simulator's data) it would show.
 */
function rssHighWaterMb(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
}

async function main(): Promise<void> {
  boundCliHeap(); // as the CLI's entries do
  const [baseUrl, apiKey, out] = process.argv.slice(2);
  if (!baseUrl || !apiKey || !out) throw new Error('usage: export.ts <base_url> <api_key> <out_dir>');
  const deps = cliDeps({ baseUrl, apiKey, out, concurrency: 16, maxRate: 100_000, log: silentLog });
  let fetchPeak = 0;
  let finishPeak = 0;
  let finishHeap = 0;
  let finishExternal = 0;
  let fetching = true;
  let unitsLeft = 0;
  const sampler = setInterval(() => {
    const rss = process.memoryUsage.rss();
    if (fetching) fetchPeak = Math.max(fetchPeak, rss);
    else {
      const { heapUsed, external } = process.memoryUsage();
      finishPeak = Math.max(finishPeak, rss);
      finishHeap = Math.max(finishHeap, heapUsed);
      finishExternal = Math.max(finishExternal, external);
    }
  }, SAMPLE_MS);
  const started = performance.now();
  let fetchedAt = started;
  const manifest = await runExport(deps, {
    mode: 'full',
    onProgress: (event) => {
      // Units of the first round are counted in as campaigns are planned; once the last one is
      // written, all that is left is finishing (retry rounds aside, which the simulator has none of here).
      if (event.type === 'planned') unitsLeft += Math.ceil(event.toFetch / DEFAULT_UNIT_SIZE);
      if (event.type === 'unit' && event.jobs > 0 && --unitsLeft === 0) {
        fetching = false;
        fetchedAt = performance.now();
      }
    },
  });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const storage = deps.storage.stats();
  const storageRequests = storage.reads + storage.writes + storage.lists + storage.deletes;
  const exported = manifest.counts.reports_exported;
  process.stdout.write(
    `${JSON.stringify({
      status: manifest.status,
      reports_exported: exported,
      jobs: manifest.counts.jobs,
      seconds,
      finish_seconds: (performance.now() - fetchedAt) / 1000,
      reports_per_s: exported / seconds,
      peak_rss_mb: rssHighWaterMb(),
      fetch_peak_rss_mb: fetchPeak / MiB,
      finish_peak_rss_mb: finishPeak / MiB,
      finish_peak_heap_mb: finishHeap / MiB,
      finish_peak_external_mb: finishExternal / MiB,
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
