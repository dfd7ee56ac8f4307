/**
 * The CLI's garbage headroom. What a run holds live is small (one or two units in flight, one
 * output published at a time: see shared/export/run/publish.ts): 24–55 MB of heap through the
 * finish of a 100k-report run, measured with a full collection every 500 ms (BENCHMARKS.md,
 * cli-memory). V8 lets the heap grow to up to 4× what was live at the last full
 * collection before it collects again, and on a machine with plenty of memory it does: a
 * 20,000-report run's RSS reached 380–510 MB with 30 MB live, most of it garbage from decoding
 * and encoding row groups. Capping the heap (--max-old-space-size) would bound it too, but fails
 * the run when a unit of unusually large reports needs more; a growing factor keeps the headroom
 * in proportion to what is live instead, and never refuses memory.
 *
 * The young generation too: V8 grows its semi-spaces up to 64 MB each (128 MB of new space) under
 * the run's allocation rate, and a flag at start-up (`--max-semi-space-size`) is the only way to
 * fix that size: `npm run export` passes it, and the packaged CLI's `export` starts Node again
 * with it (reexec.ts), but `node dist/cli.mjs` or `npx` alone cannot, nor can a Node without
 * `process.execve` (Windows): uncapped, the packaged CLI's 20k-report run peaked at 370–387 MB,
 * against 261 MB capped. The growth factor is read at each scavenge, so the cap is applied here
 * too, for every entry.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/**
 * Heap growth past the live size before the next full collection, in percent: 1.3× what was
 * live. Measured on a 20k-report publish: peak RSS 379 → 248 MB, CPU +30% on that step
 * (BENCHMARKS.md, cli-memory).
 */
export const CLI_HEAP_GROWING_PERCENT = 30;

/**
 * The young generation's cap: a semi-space grows to this size (the new space to twice it) and
 * no further, as `--max-semi-space-size=8` gives `npm run export`. The CLI holds little live
 * (above), so what survives a scavenge is small whatever the semi-spaces' size: a larger young
 * generation buys fewer scavenges with memory. Measured on packaged runs (BENCHMARKS.md,
 * cli-memory): 16 MB against none, 20k reports, 261 against 370 MB, CPU +10%; 8 MB against 16,
 * 100k reports, 263 against 339 MB, CPU +10%. Kept at its initial size (1 MB): 229 MB at 20k,
 * CPU +37%.
 */
export const CLI_SEMI_SPACE_MB = 8;

/**
 * Stops the young generation's growth at {@link CLI_SEMI_SPACE_MB}: V8 fixes the semi-spaces'
 * maximum at start-up, but reads their growth factor at each scavenge, so once the new space
 * has reached the cap (checked after each collection) the factor is set to 1.
 */
function capYoungGeneration(): void {
  const cap = 2 * CLI_SEMI_SPACE_MB * 2 ** 20;
  const observer = new PerformanceObserver(() => {
    const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    if (space && space.space_size >= cap) {
      setFlagsFromString('--semi-space-growth-factor=1');
      observer.disconnect();
    }
  });
  observer.observe({ entryTypes: ['gc'] });
}

/** Sets the CLI's V8 heap growing factors; call once, first thing, in a CLI entry (V8 reads them at every collection). */
export function boundCliHeap(): void {
  setFlagsFromString(`--heap-growing-percent=${CLI_HEAP_GROWING_PERCENT}`);
  capYoungGeneration();
}
