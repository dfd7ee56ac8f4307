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

export interface FunctionSize {
  /** Memory in MB; CPU and network throughput grow with it. */
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  /** Why these defaults. */
  readonly reason: string;
}

export const FUNCTION_SIZES = {
  'start-run': {
    memoryMb: 512,
    timeoutSeconds: 300,
    // No timeout setting: RUN_START_GRACE_MS (shared/export/run/start-run.ts) is this timeout.
    reason:
      'Lists the campaigns and, after an interruption, closes the run left open (recovery, for 30 s and outputs of 16 MB at most: recoveryLimits; finish-run publishes the rest); its 5 minutes are how long finish-run lets a start take.',
  },
  'plan-campaign': {
    memoryMb: 512,
    timeoutSeconds: 300,
    reason:
      "Lists one campaign's jobs, 100 a page one after another: a campaign of 100,000 jobs is 1,000 pages (3.5 s CPU, 320 MB); the listing is checkpointed and handed on to a new message within half the timeout (no page started after 55 s of 300), so a longer timeout only means fewer hand-ons.",
  },
  'export-reports': {
    memoryMb: 1024,
    timeoutSeconds: 300,
    reason:
      'Holds and encodes a unit of reports: 100 large reports peak at ~566 MB (BENCHMARKS.md, unit-memory); a batch must fit a third of the timeout at the rate ceiling.',
  },
  'finish-run': {
    memoryMb: 1024,
    timeoutSeconds: 900,
    reason:
      "Publishes a run's staged files: a 100,000-report run takes minutes against S3 (BENCHMARKS.md, Publish), and a look starts an output only if it can end within half its timeout (finisherLimits: a full 256 MB output not after 180 s of 900); runs of several 100,000 reports need more memory (issue 31's scale study: 1M reports peaked at 1,180 MB).",
  },
} as const satisfies Record<string, FunctionSize>;
