/**
 * End-to-end export benchmark, run as a child process so its peak RSS is the exporter's own:
 * `tsx test/bench/export.ts <base_url> <api_key> <out_dir>` prints one JSON line of figures.
 * The simulator runs in the parent (test/bench/main.ts). RSS is sampled while the run goes, so
 * the peak of fetching (until the last unit is written) and of finishing (publish, manifest)
 * are told apart.
 */
import { setFlagsFromString } from 'node:v8';
import { cliDeps } from '../../functions/cli/deps.js';
import { boundCliHeap } from '../../functions/cli/heap.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { DEFAULT_UNIT_SIZE } from '../../shared/export/run/plan-campaign.js';
import type { TableFormat } from '../../shared/export/state/records.js';
import { silentLog } from '../../shared/log.js';
import { MemoryPhases, phaseStorage } from './memory-phases.js';

/** How often RSS is sampled: often enough to catch a publish's row group being encoded. */
const SAMPLE_MS = 20;
/** With a full collection at each sample (BENCH_LIVE), less often: each costs tens of ms. */
const LIVE_SAMPLE_MS = 500;

async function main(): Promise<void> {
  boundCliHeap(); // as the CLI's entries do
  // Experiments: V8 flags set at run time after the CLI's own (BENCH_V8_FLAGS="--a=1 --b").
  for (const flag of (process.env.BENCH_V8_FLAGS ?? '').split(/\s+/).filter(Boolean))
    setFlagsFromString(flag);
  const [baseUrl, apiKey, out, tableFormat = 'hive'] = process.argv.slice(2);
  if (!baseUrl || !apiKey || !out)
    throw new Error('usage: export.ts <base_url> <api_key> <out_dir> [hive|iceberg]');
  // BENCH_LIVE=1 (with node --expose-gc): a full collection at every sample, so that the phases'
  // figures are what the run holds live (and its peaks are not a normal run's).
  const live = process.env.BENCH_LIVE === '1';
  const phases = new MemoryPhases('fetch', { sampleMs: live ? LIVE_SAMPLE_MS : SAMPLE_MS, live });
  const cli = cliDeps({ baseUrl, apiKey, out, concurrency: 16, maxRate: 100_000, log: silentLog });
  const storage = phaseStorage(cli.storage, phases);
  const deps = { ...cli, storage };
  let unitsLeft = 0;
  const started = performance.now();
  let fetchedAt = started;
  const manifest = await runExport(deps, {
    mode: 'full',
    tableFormat: tableFormat as TableFormat,
    onProgress: (event) => {
      // Units of the first round are counted in as campaigns are planned; once the last one is
      // written, all that is left is finishing (retry rounds aside, which the simulator has none of here).
      if (event.type === 'planned') unitsLeft += Math.ceil(event.toFetch / DEFAULT_UNIT_SIZE);
      if (event.type === 'unit' && event.jobs > 0 && --unitsLeft === 0) {
        fetchedAt = performance.now();
        storage.begin();
      }
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const byPhase = phases.stop();
  const peakOf = (names: string[]) => Math.max(0, ...names.map((name) => byPhase[name]!.peak_rss_mb));
  const finishing = Object.keys(byPhase).filter((name) => name !== 'fetch');
  const maxOf = (field: 'max_heap_used' | 'max_external') =>
    Math.max(0, ...finishing.map((name) => byPhase[name]![field]));
  const requests = storage.stats();
  const storageRequests = requests.reads + requests.writes + requests.lists + requests.deletes;
  const exported = manifest.counts.reports_exported;
  process.stdout.write(
    `${JSON.stringify({
      status: manifest.status,
      reports_exported: exported,
      jobs: manifest.counts.jobs,
      seconds,
      finish_seconds: (performance.now() - fetchedAt) / 1000,
      reports_per_s: exported / seconds,
      // The process's peak: the highest phase's (each phase's is exact, memory-phases.ts).
      peak_rss_mb: peakOf(Object.keys(byPhase)),
      fetch_peak_rss_mb: peakOf(['fetch']),
      finish_peak_rss_mb: peakOf(finishing),
      finish_peak_heap_mb: maxOf('max_heap_used'),
      finish_peak_external_mb: maxOf('max_external'),
      storage_requests: storageRequests,
      storage_requests_per_1000_reports: (1000 * storageRequests) / Math.max(1, exported),
      storage: requests,
      phases: byPhase,
      cpu_s: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    })}\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
