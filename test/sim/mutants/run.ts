/**
 * `npm run mutants`: the mutation catalog that gates the lifecycle simulation (issue 32).
 *
 *   npm run mutants                                  every test/sim/mutants/*.patch, and the code unmutated
 *   npm run mutants -- test/sim/mutants/x.patch …    only those
 *   npm run mutants -- --seeds 100 --jobs 1 --no-baseline --keep
 *
 * Each patch puts one fixed defect back. Per patch: a scratch copy of the checkout's working
 * tree (tracked and untracked-but-not-ignored files as they are on disk, node_modules linked),
 * `git apply` there (a patch that no longer applies is an error), then seeds 1..N of the default
 * simulation (`runSeed`, N = DEFAULT_SEEDS, `npm test`'s count) in a child process (seeds.ts).
 * Two mutants run at a time (`--jobs`). The unmutated copy runs the same way first in the pool
 * (`--no-baseline` leaves it out): every seed must hold there, or a mutant's catch means nothing.
 *
 * Prints a table (mutant → invariants, seeds, count of N, seconds) and writes the results as JSON
 * to a temp folder (its path printed). Exit status 1 when a patch does not apply or its run
 * fails, a mutant survives or is caught by fewer than MIN_SEEDS seeds, or the baseline fails.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_SEEDS } from '../default-seeds.js';
import { catalogPatches, type Mutant, readMutant } from './catalog.js';
import type { SeedLine } from './seeds.js';

/** Issue 32's target: every mutant caught by at least this many seeds of the default count. */
const MIN_SEEDS = 3;
/** Seeds listed per invariant in the table (the JSON has them all). */
const SEEDS_SHOWN = 5;

type Status = 'caught' | 'weak' | 'survived' | 'error' | 'holds' | 'fails';

interface Outcome {
  slug: string;
  title: string;
  where: string;
  fixedIn: string;
  status: Status;
  /** Seeds that broke an invariant, ascending. */
  seeds: number[];
  /** Invariant → the seeds that broke it. */
  byInvariant: Record<string, number[]>;
  seedsRun: number;
  /** True when the run stopped at `--enough` caught seeds, after `seedsRun` seeds. */
  stopped: boolean;
  seconds: number;
  error?: string;
}

const BASELINE: Mutant = {
  slug: '(none)',
  path: '',
  title: 'the code as it is, unmutated: every seed must hold',
  defect: '',
  fixedIn: '',
  where: '',
};

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seeds: { type: 'string' },
    jobs: { type: 'string', default: '2' },
    'no-baseline': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    /** A mutant's run that takes longer is killed and reported as an error. */
    'timeout-minutes': { type: 'string', default: '60' },
    /**
     * Stop a mutant's run once this many seeds caught it (its count then reads `≥K`); default:
     * every seed (the table's full counts). On a busy machine, to gate within the time there is.
     */
    enough: { type: 'string' },
  },
});
const seedCount = Number(values.seeds ?? DEFAULT_SEEDS);
const jobs = Math.max(1, Number(values.jobs));
const timeoutMs = Number(values['timeout-minutes']) * 60_000;
const enough =
  values.enough === undefined ? Number.POSITIVE_INFINITY : Math.max(MIN_SEEDS, Number(values.enough));

const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
const patchPaths = positionals.length > 0 ? positionals.map((p) => resolve(p)) : catalogPatches(root);
const mutants = patchPaths.map(readMutant);
const scratch = mkdtempSync(join(tmpdir(), 'mutants-'));
const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\0')
  .filter((f) => f !== '' && f !== 'node_modules' && existsSync(join(root, f)));
const modules = realpathSync(join(root, 'node_modules'));

/** The checkout's working tree as it is on disk, copied; node_modules linked. */
function copyCheckout(into: string): void {
  mkdirSync(into, { recursive: true });
  for (const file of files) cpSync(join(root, file), join(into, file), { recursive: false });
  symlinkSync(modules, join(into, 'node_modules'));
}

function runSeeds(dir: string): Promise<{ lines: SeedLine[]; code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child: ChildProcess = spawn(
      join(dir, 'node_modules/.bin/tsx'),
      // As vitest.config.ts runs the simulation: a larger young generation.
      ['--max-semi-space-size=32', 'test/sim/mutants/seeds.ts', '--from', '1', '--to', String(seedCount)],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    const lines: SeedLine[] = [];
    let caught = 0;
    let out = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      let end = out.indexOf('\n');
      while (end >= 0) {
        const line = out.slice(0, end).trim();
        out = out.slice(end + 1);
        if (line.startsWith('{')) {
          const parsed = JSON.parse(line) as SeedLine;
          lines.push(parsed);
          if (parsed.invariants.length > 0) caught += 1;
          if (caught >= enough && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
        }
        end = out.indexOf('\n');
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    const timer = setTimeout(() => {
      stderr += `\nkilled after ${timeoutMs / 60_000} minutes`;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ lines, code, stderr });
    });
  });
}

async function measure(mutant: Mutant): Promise<Outcome> {
  const started = Date.now();
  const outcome: Outcome = {
    slug: mutant.slug,
    title: mutant.title,
    where: mutant.where,
    fixedIn: mutant.fixedIn,
    status: 'error',
    seeds: [],
    byInvariant: {},
    seedsRun: 0,
    stopped: false,
    seconds: 0,
  };
  const dir = join(scratch, mutant.slug === BASELINE.slug ? 'baseline' : mutant.slug);
  try {
    copyCheckout(dir);
    if (mutant.path !== '') {
      try {
        execFileSync('git', ['apply', mutant.path], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (error) {
        const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? String(error);
        outcome.error = `does not apply: ${stderr.trim()}`;
        return outcome;
      }
    }
    const { lines, code, stderr } = await runSeeds(dir);
    outcome.seedsRun = lines.length;
    for (const line of lines) {
      if (line.invariants.length === 0) continue;
      outcome.seeds.push(line.seed);
      for (const name of line.invariants)
        outcome.byInvariant[name] = [...(outcome.byInvariant[name] ?? []), line.seed];
    }
    outcome.stopped = outcome.seeds.length >= enough;
    if (!outcome.stopped && (code !== 0 || lines.length !== seedCount)) {
      outcome.error = `the simulation ended with ${code} after ${lines.length} of ${seedCount} seeds: ${stderr.trim().split('\n').slice(-5).join(' / ')}`;
      return outcome;
    }
    if (mutant.path === '') outcome.status = outcome.seeds.length === 0 ? 'holds' : 'fails';
    else if (outcome.seeds.length === 0) outcome.status = 'survived';
    else outcome.status = outcome.seeds.length < MIN_SEEDS ? 'weak' : 'caught';
    return outcome;
  } finally {
    outcome.seconds = Math.round((Date.now() - started) / 1000);
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
    // Each outcome whole as it comes, so that a run cut short keeps what it measured.
    console.log(`${outcome.slug}: ${outcome.status} ${JSON.stringify(outcome)}`);
  }
}

function row(o: Outcome): string {
  const invariants = Object.entries(o.byInvariant)
    .sort((a, b) => b[1].length - a[1].length)
    .map(([name, seeds]) => `${name} (${seeds.length})`)
    .join('; ');
  const seeds = o.seeds.slice(0, SEEDS_SHOWN).join(', ') + (o.seeds.length > SEEDS_SHOWN ? ', …' : '');
  const status = o.status === 'error' ? `ERROR: ${o.error}` : o.status.toUpperCase();
  const count = o.stopped
    ? `≥${o.seeds.length} (of seeds 1-${o.seedsRun})`
    : `${o.seeds.length}/${seedCount}`;
  return `| ${o.slug} | ${status} | ${invariants || '—'} | ${seeds || '—'} | ${count} | ${o.seconds} |`;
}

async function main(): Promise<number> {
  const todo = values['no-baseline'] ? [...mutants] : [BASELINE, ...mutants];
  console.log(`${mutants.length} mutant(s), seeds 1-${seedCount}, ${jobs} at a time; scratch ${scratch}`);
  const started = Date.now();
  const outcomes: Outcome[] = [];
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const mutant = todo[next++] as Mutant;
      outcomes.push(await measure(mutant));
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, todo.length) }, worker));
  const order = new Map(todo.map((m, i) => [m.slug, i]));
  outcomes.sort((a, b) => (order.get(a.slug) ?? 0) - (order.get(b.slug) ?? 0));
  const seconds = Math.round((Date.now() - started) / 1000);

  console.log(
    `\n| mutant | status | invariants (seeds) | first seeds | count | s |\n|---|---|---|---|---|---|`,
  );
  for (const o of outcomes) console.log(row(o));
  const bad = outcomes.filter((o) => !['caught', 'holds'].includes(o.status));
  const json = join(scratch, 'results.json');
  writeFileSync(
    json,
    `${JSON.stringify({ date: new Date().toISOString(), commit: commitOf(), seedCount, minSeeds: MIN_SEEDS, seconds, outcomes }, null, 2)}\n`,
  );
  console.log(`\n${outcomes.length} run(s) in ${seconds} s; results: ${json}`);
  if (bad.length > 0)
    console.log(
      `not caught by ${MIN_SEEDS}+ seeds, or failing: ${bad.map((o) => `${o.slug} (${o.status})`).join(', ')}`,
    );
  return bad.length > 0 ? 1 : 0;
}

/** The commit measured, and whether the working tree differs from it. */
function commitOf(): string {
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim();
  return dirty === '' ? head : `${head} (with uncommitted changes)`;
}

process.exitCode = await main();
