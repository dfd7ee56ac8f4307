/**
 * Seeds the default simulation runs: `npm test`'s lifecycle.test.ts (SIM_SEEDS overrides) and
 * `npm run mutants` (its `--seeds` overrides). 600 keep `npm test` under its 10 minutes now that
 * half the seeds commit Iceberg tables; `npm run sim -- --seeds 100000` is the run before a
 * release.
 */
export const DEFAULT_SEEDS = 600;
