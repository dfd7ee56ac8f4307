/**
 * The Lambda functions' memory and timeouts by default, and why: the settings that change them
 * (infra/config.ts, `<function>MemoryMb` and `<function>TimeoutSeconds`) default to these, and
 * the functions and their queues use the settings. Kept below both so that each default is
 * stated once.
 */

/** Lambda's memory limits, in MB. */
export const LAMBDA_MEMORY_MB = { min: 128, max: 10_240 } as const;
/** Lambda gives a function one vCPU at this memory (MB), and CPU in proportion to its memory. */
export const LAMBDA_MB_PER_VCPU = 1769;
/** Lambda's longest timeout, in seconds. */
export const LAMBDA_MAX_TIMEOUT_SECONDS = 900;
/**
 * The shortest timeout a setting may give: one API request may take 30 s with its retries
 * (the Lambda client's maxElapsedMs), and a step sends many.
 */
export const MIN_TIMEOUT_SECONDS = 60;

/**
 * A semi-space's largest size (MB) in every function's V8 heap: the young generation grows to
 * three of them. Lambda's Node bootstrap, when NODE_OPTIONS sets no heap size, gives the new
 * space a tenth of the memory, and V8's own default semi-space is 64 MB: under a publish's
 * allocation rate the young generation grows to that. finish-run's peak RSS at 100k reports
 * was 388 MB without the flag and 289 MB with it, for 31% more CPU (more scavenges; a pair run
 * at the same time, BENCHMARKS.md, scale: "V8's heap flags"). The CLI caps its young
 * generation at the same size (functions/cli/heap.ts).
 */
export const V8_SEMI_SPACE_MB = 16;

export interface FunctionSize {
  /** Memory in MB; CPU and network throughput grow with it. */
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  /**
   * V8's old-space limit (`--max-old-space-size`) as a share of the memory. What is not old
   * space is the young generation, the code, and the memory outside V8's heap (Buffers, zstd,
   * the S3 client's part buffers); V8 collects sooner as the heap nears this limit, and fails
   * the invocation if what is live passes it.
   */
  readonly oldSpaceShare: number;
  /** Why these defaults. */
  readonly reason: string;
}

export const FUNCTION_SIZES = {
  'start-run': {
    memoryMb: 512,
    timeoutSeconds: 300,
    oldSpaceShare: 0.85,
    // No timeout setting: RUN_START_GRACE_MS (shared/export/run/start-run.ts) is this timeout.
    reason:
      'Lists the campaigns and, after an interruption, closes the run left open (recovery, for 30 s and outputs of 16 MB at most: recoveryLimits; finish-run publishes the rest); its 5 minutes are how long finish-run lets a start take.',
  },
  'plan-campaign': {
    memoryMb: 512,
    timeoutSeconds: 300,
    oldSpaceShare: 0.85,
    reason:
      "Lists one campaign's jobs, 100 a page one after another: a campaign of 100,000 jobs is 1,000 pages (3.5 s CPU, 320 MB); the listing is checkpointed and handed on to a new message within half the timeout (no page started after 55 s of 300), so a longer timeout only means fewer hand-ons.",
  },
  'export-reports': {
    // 768, not 1,024: the run is rate-bound and Lambda bills every second of it, so memory is
    // the largest line of the cost (BENCHMARKS.md, cost). With the heap flags below, a unit of
    // 100 large reports peaks at 300-337 MB in a bundled child, 39-44% of 768 (566 MB was V8's
    // default young generation under tsx); 640 MB would hold it too (49%), but CPU follows
    // memory and one invocation must keep the request rate (0.43 vCPU here: a mixed unit's
    // wrap-up after its fetches ~0.2 s of a unit's 5.6 s at 18 req/s; BENCHMARKS.md, unit-memory).
    memoryMb: 768,
    timeoutSeconds: 300,
    // A unit's reports are live together while it is encoded (a 64 MiB answer takes ~280 MiB
    // parsed: checkBodyLimitFitsMemory): the heap may need most of the memory.
    oldSpaceShare: 0.85,
    reason:
      'Holds and encodes a unit of reports: 100 large reports peak at 300-337 MB with its heap flags (BENCHMARKS.md, unit-memory: 39-44% of 768 MB), and the run is rate-bound, so its memory is billed for the whole run (BENCHMARKS.md, cost); a batch must fit a third of the timeout at the rate ceiling.',
  },
  'finish-run': {
    memoryMb: 1024,
    timeoutSeconds: 900,
    // What the publish holds live is bounded by design (a regroup's column of at most 32 MiB
    // decoded, its group's footers, read-ahead of 8 files an output), ~170 MB of heap at the
    // peaks measured; half the memory as old space makes V8 collect long before an invocation's
    // garbage reaches the memory's limit, and leaves the other half to what is outside the heap.
    oldSpaceShare: 0.5,
    reason:
      "Publishes a run's staged files: a 100,000-report run takes minutes against S3 (BENCHMARKS.md, Publish), and a look starts an output only if it can end within half its timeout (finisherLimits: a full 256 MB output not after 100 s of 900); with the V8 heap it sets (half its memory as old space, 16 MB semi-spaces), a 1M-report run peaked at 355 MB (BENCHMARKS.md, scale; 1,180 MB before issue 31).",
  },
} as const satisfies Record<string, FunctionSize>;
