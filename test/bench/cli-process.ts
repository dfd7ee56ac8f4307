/**
 * A whole CLI run as a user starts it, against the simulator, for `cli-memory`: the packaged
 * CLI (`node dist/cli.mjs export`, the esbuild bundle users install) or the repository's
 * `npm run export` (tsx: a Node process that compiles the TypeScript in another, with esbuild's
 * service beside them). Peak RSS of each Node process (VmHWM, written at exit by
 * hwm-preload.mjs) and of the whole process tree (its RSS summed, sampled), and CPU.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PRELOAD = new URL('./hwm-preload.mjs', import.meta.url).href;
const JOBS_PER_CAMPAIGN = 500;
/** How often the process tree's RSS is summed. */
const TREE_SAMPLE_MS = 50;
/** As the in-process benchmark (export.ts): 16 requests in flight, the rate not limited by the client. */
const CLI_FLAGS = ['--full', '--quiet', '--concurrency', '16', '--max-rate', '1000'];

export interface CliProcessFigures {
  reports_exported: number;
  seconds: number;
  /** The Node process that runs the export (tsx: the child it spawns). */
  peak_rss_mb: number;
  cpu_s: number;
  /** Every process of the tree, summed and sampled (tsx's parent and esbuild's service included). */
  tree_peak_rss_mb: number;
  /** Node processes of the tree, by argv, with their peaks. */
  processes: {
    argv: string[];
    peak_rss_mb: number;
    cpu_s: number;
    /** With BENCH_SAMPLE_MS in the environment (hwm-preload.mjs): the highest sample's make-up, MiB. */
    at_peak?: Record<string, unknown>;
    /** …and the highest sample of each 5 s. */
    timeline?: Record<string, number>[];
  }[];
}

/** The pids of `root` and its descendants. */
function treeOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const tree: number[] = [];
  for (let queue = [root]; queue.length > 0; ) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue = queue.concat(children.get(pid) ?? []);
  }
  return tree;
}

function rssOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** What a run adds to the CLI's start: Node flags before the entry (bundle only) and environment variables. */
export interface CliProcessOptions {
  nodeFlags?: string[];
  env?: NodeJS.ProcessEnv;
}

/**
 * Runs `command args` with the simulator's URL and key in its environment and `--out` a fresh
 * folder; resolves to its figures. `bundle`: the packaged CLI's entry (dist/cli.mjs or a build of it).
 */
export async function runCliProcess(
  reports: number,
  how: { kind: 'bundle'; entry: string } | { kind: 'tsx' },
  options: CliProcessOptions = {},
): Promise<CliProcessFigures> {
  const simulator = await startSimulator({
    seed: 5,
    campaigns: reports / JOBS_PER_CAMPAIGN,
    jobsPerCampaign: JOBS_PER_CAMPAIGN,
    reportSize: 'mixed',
    unpublishedShare: 0,
    surveyMissingJobs: 0,
    noSectionsJobs: 0,
    tryLaterJobs: 0,
  });
  const dir = await tempDir('bench-cli-process');
  const hwmFile = join(dir, 'hwm.jsonl');
  const out = join(dir, 'out');
  try {
    const env = {
      ...process.env,
      ...options.env,
      INTEGRATION_API_BASE_URL: simulator.url,
      INTEGRATION_API_KEY: simulator.keys.valid,
      BENCH_HWM_FILE: hwmFile,
    };
    // tsx as `npm run export` runs it (package.json), the preload in both of its Node processes.
    const [command, args]: [string, string[]] =
      how.kind === 'bundle'
        ? [
            process.execPath,
            [
              ...(options.nodeFlags ?? []),
              '--import',
              PRELOAD,
              how.entry,
              'export',
              '--out',
              out,
              ...CLI_FLAGS,
            ],
          ]
        : [join(ROOT, 'node_modules/.bin/tsx'), [...npmExportArgs(), '--out', out, ...CLI_FLAGS]];
    const started = performance.now();
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...env, ...(how.kind === 'tsx' && { NODE_OPTIONS: `--import ${PRELOAD}` }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.stdout.resume();
    let treePeak = 0;
    const sampler = setInterval(() => {
      if (child.pid === undefined) return;
      treePeak = Math.max(
        treePeak,
        treeOf(child.pid).reduce((sum, pid) => sum + rssOf(pid), 0),
      );
    }, TREE_SAMPLE_MS);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearInterval(sampler);
    const seconds = (performance.now() - started) / 1000;
    if (code !== 0) throw new Error(`the CLI exited ${code}: ${stderr.slice(-2000)}`);
    const processes = readFileSync(hwmFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as CliProcessFigures['processes'][number]);
    // The exporter is the process that ran the longest: tsx's parent only waits for it.
    const exporter = processes.reduce((a, b) => (b.cpu_s > a.cpu_s ? b : a));
    const manifests = readdirSync(join(out, 'runs'), { recursive: true }).filter((f) =>
      String(f).endsWith('.json'),
    );
    const manifest = JSON.parse(readFileSync(join(out, 'runs', String(manifests[0])), 'utf8')) as {
      counts: { reports_exported: number };
    };
    return {
      reports_exported: manifest.counts.reports_exported,
      seconds,
      peak_rss_mb: exporter.peak_rss_mb,
      cpu_s: exporter.cpu_s,
      tree_peak_rss_mb: treePeak,
      processes,
    };
  } finally {
    await simulator.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** `npm run export`'s tsx arguments (package.json scripts.export, after `tsx`). */
function npmExportArgs(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const [tool, ...args] = (pkg.scripts.export ?? '').split(/\s+/);
  if (tool !== 'tsx')
    throw new Error(`package.json scripts.export no longer runs tsx: ${pkg.scripts.export}`);
  return args;
}
