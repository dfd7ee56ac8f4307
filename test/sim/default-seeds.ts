/**
 * Seeds the default simulation runs: `npm test`'s lifecycle.test.ts (SIM_SEEDS overrides) and
 * `npm run mutants` (its `--seeds` overrides). 600 keep `npm test` under its 10 minutes now that
 * half the seeds commit Iceberg tables; `npm run sim -- --seeds 100000` is the run before a
 * release.
 */
export const DEFAULT_SEEDS = 600;

/**
 * Defects the simulation found and nobody has fixed yet, each by the seed that shows it and the
 * invariant it breaks. At that seed that invariant alone is not counted (`npm test`; and
 * `npm run mutants` counts no catch of it there); every other invariant still holds, and
 * lifecycle.test.ts fails once the seed holds (then the entry goes). Not an excuse: each is an
 * open finding, named in test/sim/mutants/README.md and in the closing note of its issue.
 */
export const KNOWN_OPEN = new Map<number, { invariant: string; finding: string }>([
  // Seed 296 of branch s32-refused (invariant 8) was a start's whole record written over a
  // closed run: a closer that died right after its tombstone left the `starting` record, and the
  // CLI paused before its record wrote over it (If-Match held). Fixed in issue 32 (the closer
  // deletes a starting record before its tombstone; mutant starting-record-kept-past-tombstone).
  // Seed 214 (invariant 21, seven requests in 4.3 s at 1 req/s by four containers) was the
  // shared budget handing two containers the same slots: a lease taken by an attempt whose write
  // lost was returned when the retry found the schedule booked too far (issue 29; mutant
  // budget-lease-of-lost-write-kept).
]);
