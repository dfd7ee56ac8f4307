/**
 * The job totals a full run's estimate rests on (estimate.ts): the API gives no job count in a
 * campaign's list item (spec 2.2), so each campaign asked costs one small request, the first
 * page of its job listing at the smallest `per_page`, whose `meta.total` is the count. Up to
 * {@link DEFAULT_MAX_COUNTED} campaigns, spread evenly over the listing, are asked: the estimate
 * costs seconds whatever the number of campaigns.
 */
import { ApiError, describeError, ExporterError, InterruptedError } from '../../errors.js';
import type { RequestCounts } from '../state/records.js';
import { countingRequests, type ExportDeps } from './context.js';
import { estimateSize, type JobCountSample, type SizeEstimate } from './estimate.js';
import { mapPool } from './pool.js';

/**
 * Campaigns asked at most: every campaign up to this many; beyond, a sample whose total is
 * within a few percent for campaigns of like size (estimate.ts gives the range), for 2.5 s of
 * requests at 20 req/s.
 */
export const DEFAULT_MAX_COUNTED = 50;
/** Requests in flight: the limiter paces them anyway; a few hide the latency. */
const COUNT_CONCURRENCY = 4;

export interface JobCountOptions {
  /** Campaigns asked at most (default {@link DEFAULT_MAX_COUNTED}). */
  maxCounted?: number;
  /** No request starts after this time (ms since the epoch, deps.now's clock): what was counted stands. */
  stopAt?: number;
}

/**
 * Which `k` of `n` campaigns to ask: evenly spread, the middle of each of `k` equal slices (a
 * listing in id or date order is sampled across its whole span).
 */
export function spreadIndexes(n: number, k: number): number[] {
  if (k >= n) return Array.from({ length: n }, (_, i) => i);
  return Array.from({ length: k }, (_, i) => Math.floor(((i + 0.5) * n) / k));
}

/**
 * Asks the job totals of up to `maxCounted` of `campaignIds`. A campaign gone (404) counts 0
 * jobs; one whose count fails retryably is left out of the sample. A fatal answer (401, 403 on
 * the key) throws, as it would stop the run.
 */
export async function countJobs(
  deps: ExportDeps,
  campaignIds: readonly number[],
  options: JobCountOptions = {},
): Promise<JobCountSample> {
  const api = deps.api();
  const picked = spreadIndexes(campaignIds.length, options.maxCounted ?? DEFAULT_MAX_COUNTED).map(
    (i) => campaignIds[i]!,
  );
  const counts = await mapPool(picked, COUNT_CONCURRENCY, async (id): Promise<number | undefined> => {
    if (options.stopAt !== undefined && deps.now().getTime() >= options.stopAt) return undefined;
    try {
      return await api.jobCount(id);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return 0;
      if (!(error instanceof ExporterError && error.retryable)) throw error;
      deps.log.debug('could not count the jobs of a campaign', {
        campaign_id: id,
        error: describeError(error),
      });
      return undefined;
    }
  });
  return { campaigns: campaignIds.length, counts: counts.filter((c) => c !== undefined) };
}

/**
 * A started run's size from its campaigns' job totals, or undefined when they could not be
 * counted: the run goes on without an estimate (logged). The requests sent go to `keep`, for
 * the run's manifest. Only an interruption (Ctrl-C) throws.
 */
export async function sizeOfRun(
  deps: ExportDeps,
  run: { run_id: string; campaign_ids: readonly number[] },
  options: JobCountOptions & { keep: (requests: RequestCounts) => Promise<void> | void },
): Promise<SizeEstimate | undefined> {
  const counting = countingRequests(deps);
  try {
    return estimateSize(await countJobs(counting.deps, run.campaign_ids, options));
  } catch (error) {
    if (error instanceof InterruptedError) throw error;
    deps.log.warn('could not estimate the run', { run_id: run.run_id, error: describeError(error) });
    return undefined;
  } finally {
    try {
      await options.keep(counting.requests());
    } catch (error) {
      // The estimate stands; its requests are only missing from the manifest's count.
      deps.log.warn('could not keep the requests of the estimate', {
        run_id: run.run_id,
        error: describeError(error),
      });
    }
  }
}

/**
 * A full run's size before any run starts (`aws start --full` says it first): verifies the key,
 * lists the campaigns and asks the job totals of some of them, as a started run's estimate does,
 * but takes no lock and writes nothing. Its requests belong to no run. Throws what the API
 * answers that would stop a run (a revoked key: the start that follows would fail the same way).
 *
 * With `stopAt`, the listing starts no page past half the time to it, so that the counts have
 * the other half: a listing cut there counts the campaigns by page 1's `meta.total`, and samples
 * the job totals among the campaigns it listed (the first pages only: less even a sample).
 */
export async function sizeBeforeStart(
  deps: ExportDeps,
  options: JobCountOptions = {},
): Promise<SizeEstimate> {
  const api = deps.api();
  await api.verify();
  const startedAt = deps.now().getTime();
  const listUntil = options.stopAt === undefined ? undefined : startedAt + (options.stopAt - startedAt) / 2;
  const campaignIds: number[] = [];
  let total: number | undefined;
  for await (const page of api.campaignPages()) {
    for (const listed of page.items) if (listed.kind === 'item') campaignIds.push(listed.item.id);
    if (page.last) break;
    if (listUntil !== undefined && deps.now().getTime() >= listUntil) {
      total = page.cursor.firstTotal;
      break;
    }
  }
  const sample = await countJobs(deps, campaignIds, options);
  return estimateSize(
    total === undefined ? sample : { ...sample, campaigns: Math.max(total, campaignIds.length) },
  );
}
