/**
 * The child process of `npm run mutants` (run.ts), run inside a mutant's scratch copy: seeds
 * `--from` to `--to` of the default simulation, one JSON line per seed on stdout
 * (`{"seed":N,"invariants":[…]}`, the invariants it broke; a seed that threw names `threw`).
 */
import { parseArgs } from 'node:util';
import { KNOWN_OPEN } from '../default-seeds.js';
import { runSeed } from '../scenario.js';

/** One seed's line: the invariants it broke, each once. */
export interface SeedLine {
  seed: number;
  invariants: string[];
}

const { values } = parseArgs({
  options: { from: { type: 'string', default: '1' }, to: { type: 'string' } },
});
const from = Number(values.from);
const to = Number(values.to ?? from);

for (let seed = from; seed <= to; seed++) {
  let invariants: string[];
  try {
    const result = await runSeed(seed);
    // A known open defect at its seed (default-seeds.ts) is the unmutated code's, not a catch.
    const open = KNOWN_OPEN.get(seed)?.invariant;
    invariants = [...new Set(result.violations.map((v) => v.invariant))].filter((name) => name !== open);
  } catch (error) {
    // A mutant may break the simulation's own reads; the seed still caught it, and says how.
    invariants = [`threw: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`];
  }
  const line: SeedLine = { seed, invariants };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
