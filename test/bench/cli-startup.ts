/**
 * Start-up of the CLI's help, from the repository (tsx compiles the TypeScript at run time)
 * and as packaged (the esbuild bundle under plain Node): wall time of a whole process, median of
 * RUNS interleaved rounds after one warm-up each (tsx's cache warm), and the bundle's size.
 */
import { execFileSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/export.js';
import { buildCli } from '../tools/build-cli.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Odd, for a true median; about 1.5 minutes on 2 shared cores (the npm and npx ones take ~2 s each). */
const RUNS = 11;

interface Variant {
  name: string;
  command: string;
  args: string[];
}

function variants(bundle: string): Variant[] {
  return [
    // What a user types from a checkout (docs/cli.md), preexport's dependency check included.
    { name: 'npm_run_export_help', command: 'npm', args: ['run', '--silent', 'export', '--', '--help'] },
    // What `npm run export -- --help` runs after that check.
    { name: 'npx_tsx_export_help', command: 'npx', args: ['tsx', 'functions/cli/export.ts', '--help'] },
    // tsx without npx: the share of the compiler at run time alone.
    {
      name: 'node_tsx_export_help',
      command: process.execPath,
      args: ['--import', 'tsx', 'functions/cli/export.ts', '--help'],
    },
    // The packaged CLI: the same export usage, and the dispatcher's own help.
    { name: 'bundle_export_help', command: process.execPath, args: [bundle, 'export', '--help'] },
    { name: 'bundle_help', command: process.execPath, args: [bundle, '--help'] },
    // The floor: Node starting and running nothing.
    { name: 'node_empty', command: process.execPath, args: ['-e', ''] },
  ];
}

function timeMs(variant: Variant): number {
  const started = performance.now();
  execFileSync(variant.command, variant.args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'ignore'] });
  return performance.now() - started;
}

const median = (samples: number[]): number =>
  [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? Number.NaN;

export async function benchCliStartup(): Promise<Record<string, number>> {
  const dir = await tempDir('bench-cli');
  try {
    const { outfile, bytes } = await buildCli(join(dir, 'cli.mjs'));
    const all = variants(outfile);
    for (const variant of all) timeMs(variant);
    const samples = new Map(all.map((v) => [v.name, [] as number[]]));
    // Interleaved, so that the machine's load drifts over all variants alike.
    for (let round = 0; round < RUNS; round++) {
      for (const variant of all) samples.get(variant.name)!.push(timeMs(variant));
    }
    const medians = Object.fromEntries(all.map((v) => [v.name, median(samples.get(v.name)!)]));
    const figures: Record<string, number> = { bundle_kb: Math.round(bytes / 1024), runs: RUNS };
    for (const [name, ms] of Object.entries(medians)) figures[`${name}_ms`] = Math.round(ms);
    for (const name of ['npm_run_export_help', 'npx_tsx_export_help', 'node_tsx_export_help']) {
      figures[`${name}_over_bundle_export_help`] = medians[name]! / medians.bundle_export_help!;
      figures[`${name}_over_bundle_help`] = medians[name]! / medians.bundle_help!;
    }
    return figures;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
