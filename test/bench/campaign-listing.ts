/**
 * `npm run bench campaign-listing` (issue 31): the memory of start-run's campaign listing by the
 * company's number of campaigns. A scripted API serves LISTING_CAMPAIGNS (default
 * `10000,100000`) campaigns, 100 a page, each item ~400 bytes of JSON; a fresh process at
 * start-run's heap (435 MB of 512) starts a run on a folder (`startRun`, no deadline: the CLI's
 * path, which lists every page in one go) and prints its peak RSS and heap (sampled every 20 ms).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliDeps } from '../../functions/cli/deps.js';
import { API_PATH_PREFIX } from '../../shared/api/base-url.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { silentLog } from '../../shared/log.js';
import { startServer } from '../integration/api/server.js';
import { verifyAnswer } from '../unit/api/fixtures.js';

const HEAP_MB = 435;
const KEY = 'bench-key';
const PER_PAGE = 100;

/** A campaign list item of the spec's shape (4.2), with a longer description. */
const item = (id: number) => ({
  id,
  name: `Campaign ${id}: spring store audit, northern region`,
  description: 'x'.repeat(200),
  status: 'active',
  created_at: '2024-03-01T08:00:00Z',
  updated_at: '2026-11-20T08:00:00Z',
});

async function child(url: string): Promise<void> {
  const deps = cliDeps({
    baseUrl: url,
    apiKey: KEY,
    out: await mkdtemp(join(tmpdir(), 'campaign-listing-bench-')),
    concurrency: 4,
    maxRate: 100_000,
    log: silentLog,
  });
  let heap = 0;
  const sampler = setInterval(() => {
    heap = Math.max(heap, process.memoryUsage().heapUsed);
  }, 20);
  const t = performance.now();
  const { record } = await startRun(deps, { mode: 'full', driver: 'local', lock: 'unlocked' });
  clearInterval(sampler);
  const status = await readFile('/proc/self/status', 'utf8');
  process.stdout.write(
    `${JSON.stringify({
      campaigns: record.campaign_ids.length,
      seconds: (performance.now() - t) / 1000,
      peak_rss_mb: Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024,
      peak_heap_mb: heap / 2 ** 20,
    })}\n`,
  );
}

export async function benchCampaignListing(): Promise<Record<string, number>> {
  const sizes = (process.env.LISTING_CAMPAIGNS ?? '10000,100000').split(',').map(Number);
  const figures: Record<string, number> = {};
  for (const n of sizes) {
    const pages = Math.ceil(n / PER_PAGE);
    const server = await startServer((request) => {
      if (request.path === `${API_PATH_PREFIX}/verify`) return { body: verifyAnswer() };
      const page = Number(request.query.get('page') ?? 1);
      return {
        body: {
          data: Array.from({ length: Math.min(PER_PAGE, n - (page - 1) * PER_PAGE) }, (_, i) =>
            item((page - 1) * PER_PAGE + i + 1),
          ),
          meta: { current_page: page, per_page: PER_PAGE, total: n, last_page: pages },
        },
      };
    });
    try {
      const script = fileURLToPath(import.meta.url);
      const argv = [`--max-old-space-size=${HEAP_MB}`, '--import', 'tsx', script, '--child', server.url];
      const proc = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const code = await new Promise<number | null>((resolve) => proc.on('close', resolve));
      if (code !== 0) throw new Error(`campaign listing child exited ${code}`);
      const f = JSON.parse(stdout.trim().split('\n').pop() ?? '') as Record<string, number>;
      process.stderr.write(`campaign-listing ${n}: ${JSON.stringify(f)}\n`);
      for (const [k, v] of Object.entries(f)) if (k !== 'campaigns') figures[`${n}_${k}`] = v;
    } finally {
      await server.close();
    }
  }
  return figures;
}

const [flag, url] = process.argv.slice(2);
if (flag === '--child' && url && /campaign-listing\.(ts|c?js)$/.test(process.argv[1] ?? '')) {
  child(url).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
