/**
 * Peak memory and CPU of one export-reports unit of 100 reports (by default large ones: 50
 * sections × 30 questions), each in a fresh process run as the Lambda runs its code: the unit
 * child (unit-memory-child.ts) bundled with the functions' esbuild options and started with
 * export-reports' NODE_OPTIONS and glibc setting at each memory measured (scale-bundle.ts),
 * against the API simulator in this process.
 *
 * Settings (environment):
 * - `UNIT_MEMORY_MB`: the memories, comma-separated (default 1,024 and export-reports' own);
 *   each gives the child export-reports' heap flags at that memory (`SCALE_NODE_OPTIONS`
 *   replaces them, to compare).
 * - `UNIT_REPORT_SIZES`: the simulator's report sizes (default `large`; `mixed` is a realistic run).
 * - `UNIT_MAX_RATE`: requests per second the child sends at most (default 10,000: unpaced, every
 *   report of the unit asked for at once, the most a unit can hold in flight); 18 is the pace one
 *   invocation gets at the default rateCeiling.
 * - `UNIT_CONCURRENCY`: requests in flight at most (default export-reports' REPORT_CONCURRENCY).
 * - `UNIT_LOADER`: `bundle` (default) or `tsx` (the sources, as the figures before 2026-11-26).
 * - `UNIT_REPEAT`: children per setting (default 1).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliDeps } from '../../functions/cli/deps.js';
import { FUNCTION_SIZES, LAMBDA_MB_PER_VCPU } from '../../infra/function-sizes.js';
import { planCampaign } from '../../shared/export/run/plan-campaign.js';
import { startRun } from '../../shared/export/run/start-run.js';
import { silentLog } from '../../shared/log.js';
import { RUN_DEFAULTS } from '../../shared/run-defaults.js';
import { tempDir } from '../helpers/export.js';
import { startSimulator } from '../simulator/index.js';
import type { ReportSize } from '../simulator/types.js';
import { LAMBDA_ENV } from './lambda.js';
import {
  bundleAsLambda,
  childCommand,
  functionNodeOptions,
  type Loader,
  loadedHighWaterMb,
} from './scale-bundle.js';
import type { UnitChildConfig, UnitChildFigures } from './unit-memory-child.js';

const REPORTS = 100;
const CHILD_SOURCE = fileURLToPath(new URL('./unit-memory-child.ts', import.meta.url));
const HANDLER_SOURCE = fileURLToPath(new URL('../../functions/aws/export-reports.ts', import.meta.url));
const EXPORT_REPORTS = FUNCTION_SIZES['export-reports'];

const list = (text: string | undefined, fallback: string): string[] =>
  (text ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function settings(env: NodeJS.ProcessEnv) {
  return {
    memories: [...new Set(list(env.UNIT_MEMORY_MB, `1024,${EXPORT_REPORTS.memoryMb}`).map(Number))],
    sizes: list(env.UNIT_REPORT_SIZES, 'large') as ReportSize[],
    maxRate: Number(env.UNIT_MAX_RATE ?? 10_000),
    concurrency: Number(env.UNIT_CONCURRENCY ?? RUN_DEFAULTS.concurrency.value),
    loader: (env.UNIT_LOADER ?? 'bundle') as Loader,
    repeat: Number(env.UNIT_REPEAT ?? 1),
  };
}

/** Starts a run and plans its one campaign in `out`: the unit a message would carry. */
async function plannedUnit(baseUrl: string, apiKey: string, out: string): Promise<UnitChildConfig['unit']> {
  const deps = cliDeps({ baseUrl, apiKey, out, concurrency: 8, maxRate: 10_000, log: silentLog });
  const started = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
  const [campaignId] = started.record.campaign_ids;
  const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId! }, REPORTS);
  return planned.units[0]!;
}

async function runChild(loader: Loader, script: string, nodeOptions: string, configPath: string) {
  const { argv, env } = childCommand(loader, script, nodeOptions, [configPath]);
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const line = stdout.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`unit child exit ${code}: ${stderr.slice(-2000)}`);
  return JSON.parse(line) as UnitChildFigures;
}

const round = (x: number, digits = 2) => Number(x.toFixed(digits));

export async function benchUnitMemory(): Promise<Record<string, number>> {
  const s = settings(process.env);
  const scratch = await tempDir('bench-unit');
  const figures: Record<string, number> = {};
  try {
    const bundle = join(scratch, 'unit-memory-child.js');
    await bundleAsLambda(CHILD_SOURCE, bundle);
    const handler = join(scratch, 'export-reports.js');
    await bundleAsLambda(HANDLER_SOURCE, handler);
    const script = s.loader === 'bundle' ? bundle : CHILD_SOURCE;
    for (const memoryMb of s.memories) {
      const nodeOptions = functionNodeOptions(memoryMb, EXPORT_REPORTS.oldSpaceShare);
      figures[`baseline_handler_${memoryMb}_rss_mb`] = round(
        await loadedHighWaterMb(handler, LAMBDA_ENV, nodeOptions),
        0,
      );
    }
    for (const size of s.sizes) {
      const simulator = await startSimulator({
        seed: 13,
        campaigns: 1,
        jobsPerCampaign: REPORTS,
        reportSize: size,
        unpublishedShare: 0,
        surveyMissingJobs: 0,
        noSectionsJobs: 0,
        tryLaterJobs: 0,
      });
      try {
        for (let i = 0; i < s.repeat; i++) {
          for (const memoryMb of s.memories) {
            const nodeOptions = functionNodeOptions(memoryMb, EXPORT_REPORTS.oldSpaceShare);
            const out = await mkdtemp(join(scratch, 'out-'));
            const config: UnitChildConfig = {
              baseUrl: simulator.url,
              apiKey: simulator.keys.valid,
              out,
              unit: await plannedUnit(simulator.url, simulator.keys.valid, out),
              concurrency: s.concurrency,
              maxRate: s.maxRate,
            };
            const configPath = join(scratch, `unit-${size}-${memoryMb}.json`);
            await writeFile(configPath, JSON.stringify(config));
            const r = await runChild(s.loader, script, nodeOptions, configPath);
            await rm(out, { recursive: true, force: true });
            const vcpu = memoryMb / LAMBDA_MB_PER_VCPU;
            const cpu = r.fetch_cpu_seconds + r.wrap_up_cpu_seconds;
            const at = `${size}_${memoryMb}${s.repeat > 1 ? `_${i + 1}` : ''}`;
            process.stderr.write(
              `unit-memory: ${size} at ${memoryMb} MB (${nodeOptions}), rate ${s.maxRate}, concurrency ${s.concurrency}: ${JSON.stringify(r)}\n`,
            );
            Object.assign(figures, {
              [`${at}_exported`]: r.exported,
              [`${at}_peak_rss_mb`]: round(r.peak_rss_mb, 0),
              [`${at}_peak_share_of_memory`]: round(r.peak_rss_mb / memoryMb, 3),
              [`${at}_rss_before_mb`]: round(r.rss_before_mb, 0),
              [`${at}_rss_fetched_mb`]: round(r.rss_fetched_mb, 0),
              [`${at}_peak_heap_mb`]: round(r.peak_heap_mb, 0),
              [`${at}_fetch_s`]: round(r.fetch_seconds),
              [`${at}_fetch_cpu_s`]: round(r.fetch_cpu_seconds),
              [`${at}_wrap_up_s`]: round(r.wrap_up_seconds),
              [`${at}_wrap_up_cpu_s`]: round(r.wrap_up_cpu_seconds),
              [`${at}_staged_mb`]: round(r.staged_bytes / 2 ** 20),
              // What the unit's CPU takes at this memory's share of a vCPU, if this machine's
              // core is worth Lambda's (an estimate: it is not measured on Lambda).
              [`${at}_cpu_at_lambda_s`]: round(cpu / vcpu),
              [`${at}_wrap_up_at_lambda_s`]: round(r.wrap_up_cpu_seconds / vcpu),
            });
          }
        }
      } finally {
        await simulator.close();
      }
    }
    return figures;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
