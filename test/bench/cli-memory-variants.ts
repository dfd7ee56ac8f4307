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
import { runCliProcess } from './cli-process.js';

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
  noexec: { env: { CAMPAIGN_REPORT_EXPORTER_REEXEC: 'off' } },
};
const [entry, reports, names] = process.argv.slice(2);
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
    }),
  );
console.log(
  `wall ${Math.round((Date.now() - started) / 1000)} s, load ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
