/**
 * The packaged CLI's start-up settings compared side by side (BENCHMARKS.md, cli-memory): runs of
 * `REPORTS` reports, one per variant, all at the same time (so that their CPU seconds compare on a
 * shared machine), each as `npm run bench cli-memory` runs the packaged CLI (cli-process.ts), with
 * the variant's Node flags and environment variables added. One JSON line per variant.
 *
 * `npx tsx test/bench/cli-memory-variants.ts ENTRY REPORTS VARIANT[,VARIANT...]`; ENTRY a build of
 * the CLI (`npm run build:cli -- --outfile DIR/cli.mjs`). A build from before the restart
 * (functions/cli/reexec.ts) runs with exactly the variant's settings; a build with it adds its own
 * where the variant leaves them out, unless `noexec` (its opt-out) is the variant.
 */
import { type CliProcessFigures, runCliProcess } from './cli-process.js';

const MMAP = { MALLOC_MMAP_THRESHOLD_: '131072' };
const VARIANTS: Record<string, { nodeFlags?: string[]; env?: NodeJS.ProcessEnv }> = {
  base: {},
  mmap: { env: MMAP },
  semi16: { nodeFlags: ['--max-semi-space-size=16'] },
  mmap_semi16: { env: MMAP, nodeFlags: ['--max-semi-space-size=16'] },
  mmap_arena2: { env: { ...MMAP, MALLOC_ARENA_MAX: '2' } },
  mmap_semi16_arena2: { env: { ...MMAP, MALLOC_ARENA_MAX: '2' }, nodeFlags: ['--max-semi-space-size=16'] },
  mmap_semi16_toppad0: { env: { ...MMAP, MALLOC_TOP_PAD_: '0' }, nodeFlags: ['--max-semi-space-size=16'] },
  mmap_semi16_trim64k: {
    env: { ...MMAP, MALLOC_TRIM_THRESHOLD_: '65536' },
    nodeFlags: ['--max-semi-space-size=16'],
  },
  mmap_toppad0: { env: { ...MMAP, MALLOC_TOP_PAD_: '0' } },
  mmap_trim0: { env: { ...MMAP, MALLOC_TRIM_THRESHOLD_: '0' } },
  trim128k: { env: { MALLOC_TRIM_THRESHOLD_: '131072' } },
  arena2: { env: { MALLOC_ARENA_MAX: '2' } },
  // Added to a build that restarts (it keeps a setting the user gave): its settings plus these.
  semi8: { nodeFlags: ['--max-semi-space-size=8'] },
  semi8_arena2: { env: { MALLOC_ARENA_MAX: '2' }, nodeFlags: ['--max-semi-space-size=8'] },
  arena1: { env: { MALLOC_ARENA_MAX: '1' } },
  noexec: { env: { CAMPAIGN_REPORT_EXPORTER_REEXEC: 'off' } },
};
const [entry, reports, names] = process.argv.slice(2);
/** The restarted image's line (the exporter's): the one with the most CPU. */
const exporter = (r: { processes: CliProcessFigures['processes'] }) =>
  r.processes.reduce((a, b) => (b.cpu_s > a.cpu_s ? b : a));
const started = Date.now();
const results = await Promise.all(
  names!.split(',').map(async (name) => {
    const figures = await runCliProcess(Number(reports), { kind: 'bundle', entry: entry! }, VARIANTS[name]!);
    return { name, ...figures };
  }),
);
for (const r of results)
  console.log(
    JSON.stringify({
      variant: r.name,
      reports: r.reports_exported,
      peak_rss_mb: Math.round(r.peak_rss_mb),
      tree_peak_rss_mb: Math.round(r.tree_peak_rss_mb),
      cpu_s: Math.round(r.cpu_s * 10) / 10,
      seconds: Math.round(r.seconds),
      processes: r.processes.length,
      ...(exporter(r)?.at_peak && { at_peak: exporter(r)!.at_peak }),
    }),
  );
// Where in the run the peak is: RSS, heap used and the rest, MiB, every 5 s (BENCH_SAMPLE_MS).
for (const r of results) {
  const timeline = exporter(r)?.timeline;
  if (timeline)
    console.log(
      `timeline ${r.name} (s: rss/heap_used/new_space/external/other): ${timeline
        .map(
          (t) =>
            `${t.slot! * 5}:${Math.round(t.rss!)}/${Math.round(t.heap_used!)}/${Math.round(t.new_space!)}/${Math.round(t.external!)}/${Math.round(t.other!)}`,
        )
        .join(' ')}`,
    );
}
console.log(
  `wall ${Math.round((Date.now() - started) / 1000)} s, load ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
