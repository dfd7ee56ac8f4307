/**
 * The lifecycle simulation from the command line.
 *   npm run sim -- --seed 123 --trace     one seed, its full trace
 *   npm run sim -- --seeds 100000 [--from N]   many seeds: progress, a summary per invariant
 * Exit status 1 when any seed broke an invariant.
 */
import { parseArgs } from 'node:util';
import { formatFailure, formatLine } from './report.js';
import { runSeed } from './scenario.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    seeds: { type: 'string' },
    from: { type: 'string' },
    trace: { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
  },
});

async function one(seed: number, trace: boolean): Promise<number> {
  const result = await runSeed(seed, { trace });
  if (trace) for (const line of result.trace) console.log(formatLine(line));
  console.log(
    `seed ${seed} (${result.scenario.settings.tableFormat}): ${result.steps} steps, ${result.runsStarted} run(s) started, ${result.manifests} manifest(s)`,
  );
  if (result.scenario.settings.tableFormat === 'iceberg')
    console.log(`iceberg cases: ${formatCases(result.iceberg)}`);
  console.log(`export-reports' time for requests: ${formatCases(result.unitDeadline)}`);
  console.log(`request budget: ${formatCases(result.budget)}`);
  if (result.scenario.glue) console.log(`glue: ${formatCases(result.glue)}`);
  if (result.scenario.commitRaces) console.log(`commit races: ${formatCases(result.commitRaces)}`);
  console.log(`excuses: ${formatCases(result.excuses)}`);
  console.log(`closers: ${formatCases(result.closers)}`);
  console.log(`refused at one step: ${formatCases(result.refused)}`);
  if (result.violations.length === 0) {
    console.log('all invariants hold');
    return 0;
  }
  console.log(formatFailure(trace ? result : await runSeed(seed, { trace: true })));
  return 1;
}

/** Cases summed over seeds: how many times each, and in how many seeds. */
class Tally {
  readonly #times = new Map<string, number>();
  readonly #seeds = new Map<string, number>();

  add(cases: object): void {
    for (const [name, n] of Object.entries(cases) as [string, number][]) {
      this.#times.set(name, (this.#times.get(name) ?? 0) + n);
      this.#seeds.set(name, (this.#seeds.get(name) ?? 0) + (n > 0 ? 1 : 0));
    }
  }

  print(title: string): void {
    console.log(title);
    for (const [name, n] of this.#times)
      console.log(
        `  ${name.padEnd(24)} ${String(n).padStart(6)}  ${String(this.#seeds.get(name)).padStart(4)}`,
      );
  }
}

async function many(from: number, count: number, quiet: boolean): Promise<number> {
  const byInvariant = new Map<string, number[]>();
  let failed = 0;
  let icebergSeeds = 0;
  const cases = new Tally();
  const deadline = new Tally();
  const budget = new Map<string, [number, number]>();
  const excuses = new Tally();
  const closers = new Tally();
  const refused = new Tally();
  const started = Date.now();
  for (let seed = from; seed < from + count; seed++) {
    const result = await runSeed(seed);
    if (result.scenario.settings.tableFormat === 'iceberg') icebergSeeds++;
    cases.add(result.iceberg);
    deadline.add(result.unitDeadline);
    for (const [name, n] of Object.entries(result.glue)) {
      const [times, seeds] = budget.get(`glue ${name}`) ?? [0, 0];
      budget.set(`glue ${name}`, [times + n, seeds + (n > 0 ? 1 : 0)]);
    }
    if (result.scenario.glue) budget.set('glue seeds', [(budget.get('glue seeds')?.[0] ?? 0) + 1, 0]);
    // The commit races of the late closings (commit-races.ts), listed with the services' cases.
    for (const [name, n] of Object.entries(result.commitRaces)) {
      const [times, seeds] = budget.get(`commit race ${name}`) ?? [0, 0];
      budget.set(`commit race ${name}`, [times + n, seeds + (n > 0 ? 1 : 0)]);
    }
    for (const [name, n] of Object.entries(result.budget)) {
      const [times, seeds] = budget.get(name) ?? [0, 0];
      budget.set(
        name,
        name === 'peakShare' ? [Math.max(times, n), seeds] : [times + n, seeds + (n > 0 ? 1 : 0)],
      );
    }
    excuses.add(result.excuses);
    closers.add(result.closers);
    refused.add(result.refused);
    if (result.violations.length > 0) {
      failed++;
      for (const invariant of new Set(result.violations.map((v) => v.invariant))) {
        const seeds = byInvariant.get(invariant) ?? [];
        seeds.push(seed);
        byInvariant.set(invariant, seeds);
      }
      if (!quiet) console.log(formatFailure(await runSeed(seed, { trace: true }), 15));
    }
    const done = seed - from + 1;
    if (done % 500 === 0 || done === count) {
      const rate = done / ((Date.now() - started) / 1000);
      console.log(`${done}/${count} seeds, ${failed} failed, ${rate.toFixed(1)} seeds/s`);
    }
  }
  console.log(`\nsummary: ${count} seeds from ${from}, ${failed} failed`);
  cases.print(`iceberg: ${icebergSeeds} seeds; cases (times, in how many seeds):`);
  deadline.print("export-reports' time for requests: cases (times, in how many seeds):");
  console.log(
    'request budget, glue and commit races: cases (times, in how many seeds; peakShare: the highest of any seed):',
  );
  for (const [name, [times, seeds]] of budget) {
    console.log(
      `  ${name.padEnd(22)} ${String(Math.round(times * 100) / 100).padStart(6)}  ${String(seeds).padStart(4)}`,
    );
  }
  excuses.print('excuses (times, in how many seeds; liveness.ts says what earns each):');
  closers.print('closers (times, in how many seeds; closer-cases.ts):');
  refused.print('refused at one step (times, in how many seeds; scenario.ts drawRefusals, cli-cases.ts):');
  for (const [invariant, seeds] of [...byInvariant].sort()) {
    console.log(`  ${invariant}: ${seeds.length} seed(s), e.g. ${seeds.slice(0, 8).join(', ')}`);
  }
  return failed > 0 ? 1 : 0;
}

function formatCases(cases: object): string {
  return Object.entries(cases)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
}

const code =
  values.seed !== undefined
    ? await one(Number(values.seed), values.trace ?? false)
    : await many(Number(values.from ?? 1), Number(values.seeds ?? 1000), values.quiet ?? false);
process.exit(code);
