/**
 * A whole Integration API scripted on 127.0.0.1, for runs against answers the simulator never
 * gives: each endpoint answers from a function of the request, with well-behaved defaults
 * (verify succeeds, one page per list, a valid report per job). Runs write into a temp folder.
 */
import { afterEach } from 'vitest';
import { cliDeps } from '../../functions/cli/deps.js';
import { API_PATH_PREFIX } from '../../shared/api/base-url.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { type LocalRunOptions, runExport } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { Log } from '../../shared/log.js';
import {
  errorReply,
  type Reply,
  type Route,
  startServer,
  type TestServer,
} from '../integration/api/server.js';
import { listPage, reportData, verifyAnswer } from '../unit/api/fixtures.js';
import { tempDir } from './export.js';

export const SCRIPTED_KEY = 'scripted-key-7d1e';

export interface ApiScript {
  /** Page `page` of the campaigns (default: one page of `campaignIds`). */
  campaigns?: (page: number) => Reply;
  /** Page `page` of a campaign's jobs (default: one page of `jobIds`). */
  jobs?: (campaignId: number, page: number) => Reply;
  /** A report (default: a valid report of the job). */
  report?: (campaignId: number, jobId: number) => Reply;
  campaignIds?: number[];
  jobIds?: number[];
}

/** One page holding every item: a list as the API gives it when it fits on a page. */
export const onePage = (items: unknown[]): Reply => ({ body: listPage(items, 1, 1) });

const open: TestServer[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()));
});

/**
 * The scripted API as a route of the test server: for a server a test starts and closes
 * itself (one for a whole file); an unknown path is a 404.
 */
export function scriptedRoute(script: ApiScript = {}): Route {
  const campaignIds = script.campaignIds ?? [1];
  const jobIds = script.jobIds ?? [11, 12];
  const campaigns = script.campaigns ?? (() => onePage(campaignIds.map((id) => ({ id }))));
  const jobs = script.jobs ?? (() => onePage(jobIds.map((id) => ({ id, job_status: 2 }))));
  const report = script.report ?? ((_c: number, jobId: number) => ({ body: { data: reportData(jobId) } }));
  return (request) => {
    const page = Number(request.query.get('page') ?? 1);
    const path = request.path.startsWith(API_PATH_PREFIX) ? request.path.slice(API_PATH_PREFIX.length) : '';
    if (path === '/verify') return { body: verifyAnswer() };
    if (path === '/campaigns') return campaigns(page);
    const listing = /^\/campaigns\/(\d+)\/jobs$/.exec(path);
    if (listing) return jobs(Number(listing[1]), page);
    const one = /^\/campaigns\/(\d+)\/jobs\/(\d+)\/report$/.exec(path);
    if (one) return report(Number(one[1]), Number(one[2]));
    return errorReply(404, 'NOT_FOUND', 'Resource not found.');
  };
}

/** Starts the scripted API; closed after the test. */
export async function scriptedApi(script: ApiScript = {}): Promise<TestServer> {
  const server = await startServer(scriptedRoute(script));
  open.push(server);
  return server;
}

/** A log that keeps every line, to assert what a person would be told. */
export function recordingLog(): Log & {
  lines: { level: string; message: string; fields?: Record<string, unknown> }[];
} {
  const lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void => {
      lines.push({ level, message, ...(fields ? { fields } : {}) });
    };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** The CLI's dependencies for a run against `server` into `out`: its key, no rate to speak of. */
export function scriptedDeps(
  server: TestServer,
  out: string,
  options: { log?: Log; maxBodyMiB?: number } = {},
): ExportDeps {
  return cliDeps({
    baseUrl: server.url,
    apiKey: SCRIPTED_KEY,
    out,
    concurrency: 8,
    maxRate: 10_000,
    log: options.log ?? recordingLog(),
    ...(options.maxBodyMiB !== undefined && { maxBodyMiB: options.maxBodyMiB }),
  });
}

/** A run against `server` into a new temp folder (or `out`), with the CLI's dependencies. */
export async function runAgainst(
  server: TestServer,
  options: { out?: string; log?: Log; run?: Partial<LocalRunOptions>; maxBodyMiB?: number } = {},
): Promise<{ manifest: Manifest; out: string; deps: ExportDeps }> {
  const out = options.out ?? (await tempDir('scripted-run'));
  const deps = scriptedDeps(server, out, options);
  const manifest = await runExport(deps, { mode: 'incremental', ...options.run });
  return { manifest, out, deps };
}
