/**
 * The CLI's garbage headroom. What a run holds live is bounded by design (one or two units in
 * flight, a publish's constants: see shared/export/run/publish.ts), about 30–40 MB of heap at
 * any run size. V8 lets the heap grow to up to 4× what was live at the last full collection
 * before it collects again, and on a machine with plenty of memory it does: a 20,000-report
 * run's RSS reached 380–510 MB with 30 MB live, most of it garbage from decoding and encoding
 * row groups. Capping the heap (--max-old-space-size) would bound it too, but fails the run
 * when a unit of unusually large reports needs more; a growing factor keeps the headroom in
 * proportion to what is live instead, and never refuses memory.
 */
import { setFlagsFromString } from 'node:v8';

/**
 * Heap growth past the live size before the next full collection, in percent: 1.3× what was
 * live. Measured on a 20k-report publish: peak RSS 379 → 248 MB, CPU +30% on that step
 * (BENCHMARKS.md, cli-memory).
 */
export const CLI_HEAP_GROWING_PERCENT = 30;

/** Sets the CLI's V8 heap growing factor; call once, first thing, in a CLI entry (V8 reads it at every collection). */
export function boundCliHeap(): void {
  setFlagsFromString(`--heap-growing-percent=${CLI_HEAP_GROWING_PERCENT}`);
}
