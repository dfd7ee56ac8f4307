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
  [
    296,
    {
      invariant: '8 no state re-entered',
      finding:
        "a start's whole record comes back over a closed run: recordStart's If-Match holds only once the closer has deleted the `starting` record, and a closer that wrote the tombstone and then failed (here start-run's recovery, its closing record's write meeting a 503 outage) leaves that record as it was; the CLI paused before its record (cli-cases.ts) resumes, its write applies and it lists and plans into the closed run (s32-refused)",
    },
  ],
  // Seed 214 (invariant 21, seven requests in 4.3 s at 1 req/s by four containers) was the
  // shared budget handing two containers the same slots: a lease taken by an attempt whose write
  // lost was returned when the retry found the schedule booked too far (issue 29; mutant
  // budget-lease-of-lost-write-kept).
]);
