/**
 * `npm run bench freeze` (issue 31): how long freezing a run's closing takes (what start-run's
 * recovery does first for a run left open: read every record of the run, one campaign at a
 * time, and write the closing's pieces and record), by the run's size. Each size is a run
 * synthesized by the scale bench's method (scale-synth.ts, Hive, staged bytes repeated) in a
 * folder under FREEZE_DIR (default the system's temp folder; kept, so a second bench run reuses
 * it), then frozen in a fresh process with the heap limit start-run's 512 MB gives (435 MB), as
 * often as FREEZE_REPEAT says (default 1). Sizes: FREEZE_REPORTS (default `100000,1000000`).
 *
 * Figures per size: CPU and wall seconds of the freeze, peak RSS, the storage requests it sent.
 * A folder answers in microseconds where S3 takes tens of milliseconds per request: the bench
 * prints the requests, so that the time on S3 can be estimated from them.
 */
import { spawn } from 'node:child_process';
import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startClosing, writeClosingPieces } from '../../shared/export/run/closing.js';
import { recordsInStorage } from '../../shared/export/run/run-records.js';
import type { RunRef } from '../../shared/export/state/records.js';
import { STATE_KEYS } from '../../shared/layout.js';
import { silentLog } from '../../shared/log.js';
import { LocalStorage } from '../../shared/storage/local.js';
import { fastFolder, makeTemplates, synthesizeRun } from './scale-synth.js';

/** start-run's memory (infra/constructs/functions.ts) × 0.85, as the scale bench sets finish-run's. */
const HEAP_MB = 435;
const RUN: RunRef = { run_id: '20261201T031500Z-f4ee2e', dt: '2026-12-01', mode: 'full' };

interface FreezeFigures {
  seconds: number;
  cpu_seconds: number;
  peak_rss_mb: number;
  reads: number;
  writes: number;
  lists: number;
}

/** The freeze alone, in this process: what recovery's `finishRun` does before it publishes. */
async function child(root: string, runId: string): Promise<void> {
  const storage = new LocalStorage(root);
  const deps = { storage, log: silentLog, now: () => new Date() };
  const cpu = process.cpuUsage();
  const t = performance.now();
  const source = await recordsInStorage(deps, runId);
  if (!source) throw new Error(`run ${runId} has no record under ${root}`);
  const closing = await writeClosingPieces(deps, source, deps.now());
  await startClosing(deps, closing);
  const seconds = (performance.now() - t) / 1000;
  const used = process.cpuUsage(cpu);
  const status = await readFile('/proc/self/status', 'utf8');
  const figures: FreezeFigures = {
    seconds,
    cpu_seconds: (used.user + used.system) / 1e6,
    peak_rss_mb: Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024,
    ...storage.stats(),
  };
  // The next repeat freezes again from the records: the closing record goes (its pieces stay,
  // under a token no record names).
  await storage.delete([STATE_KEYS.closing(runId)]);
  process.stdout.write(`${JSON.stringify(figures)}\n`);
}

async function freezeOnce(root: string): Promise<FreezeFigures> {
  const script = fileURLToPath(import.meta.url);
  const argv = [`--max-old-space-size=${HEAP_MB}`, '--import', 'tsx', script, '--child', root, RUN.run_id];
  const proc = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const code = await new Promise<number | null>((resolve) => proc.on('close', resolve));
  if (code !== 0) throw new Error(`freeze child exited ${code}`);
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as FreezeFigures;
}

export async function benchFreeze(): Promise<Record<string, number>> {
  const sizes = (process.env.FREEZE_REPORTS ?? '100000,1000000').split(',').map(Number);
  const repeat = Number(process.env.FREEZE_REPEAT ?? 1);
  const base = process.env.FREEZE_DIR ?? join(tmpdir(), 'freeze-bench');
  const figures: Record<string, number> = {};
  for (const reports of sizes) {
    const root = join(base, String(reports));
    const done = join(root, '.synthesized');
    const exists = await access(done).then(
      () => true,
      () => false,
    );
    if (!exists) {
      await mkdir(root, { recursive: true });
      const t = performance.now();
      const syn = await synthesizeRun(fastFolder(root), await makeTemplates(RUN), {
        reports,
        encoding: 'repeat',
        share: 1,
        startedAt: new Date(),
      });
      await writeFile(done, JSON.stringify(syn));
      process.stderr.write(
        `freeze: ${reports} reports synthesized in ${((performance.now() - t) / 1000).toFixed(0)} s (${syn.records} records)\n`,
      );
    }
    for (let i = 0; i < repeat; i++) {
      const f = await freezeOnce(root);
      process.stderr.write(`freeze ${reports}: ${JSON.stringify(f)}\n`);
      const key = (name: string) => `${reports}_${name}${repeat > 1 ? `_${i + 1}` : ''}`;
      figures[key('seconds')] = f.seconds;
      figures[key('cpu_seconds')] = f.cpu_seconds;
      figures[key('peak_rss_mb')] = f.peak_rss_mb;
      figures[key('reads')] = f.reads;
      figures[key('writes')] = f.writes;
      figures[key('lists')] = f.lists;
    }
  }
  return figures;
}

const [flag, root, runId] = process.argv.slice(2);
if (flag === '--child' && root && runId && /freeze\.(ts|c?js)$/.test(process.argv[1] ?? '')) {
  child(root, runId).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
