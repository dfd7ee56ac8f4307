/**
 * A deterministic Integration API for one seed: a few campaigns and jobs whose lists and report
 * versions change over virtual time, answered through the `ApiClient` surface the steps use.
 * Each answer is a scheduler operation (a slow one stands for the client's own retries and
 * Retry-After waits). Reports are the real fixture (test/unit/api/fixtures.ts) parsed with the
 * real schema; the version a report was fetched at is its `report.id` and its
 * `job_score_percentage` (`v<version>`), which end up in the `reports` table.
 */

import { limiterUntil } from '../../shared/api/deadline-limiter.js';
import { type RateLimiter, RateLimitWaitError, type Release } from '../../shared/api/limiter.js';
import type { ListedItem, ReportOutcome } from '../../shared/api/outcome.js';
import {
  type ItemSchema,
  type ListedPage,
  type ListingStart,
  listPages,
} from '../../shared/api/pagination.js';
import type { CampaignItem, ListEnvelope, Report } from '../../shared/api/schemas.js';
import { CampaignItemSchema, JobItemSchema, ReportResponseSchema } from '../../shared/api/schemas.js';
import { AccessDeniedError, ApiError, AuthError, TransientApiError } from '../../shared/errors.js';
import type { ApiClient } from '../../shared/export/run/context.js';
import { reportData } from '../unit/api/fixtures.js';
import type { Prng } from './prng.js';
import type { Actor, Sim } from './scheduler.js';

export interface JobSpec {
  id: number;
  /** Listed from this virtual time on. */
  appearsAt: number;
  /** Report versions: version `v` from `at` on (the first at appearsAt). */
  versions: Array<{ at: number; v: number }>;
  /** Answers 404 (the job was deleted) from this time on. */
  goneAt: number | undefined;
}

export interface CampaignSpec {
  id: number;
  jobs: JobSpec[];
}

export interface ApiBehaviour {
  /** Per report answer. */
  notReady: number;
  invalid: number;
  /** Transient failure after the client's retries (the job stays pending). */
  transient: number;
  /** 403 FORBIDDEN on one report. */
  forbidden: number;
  /** Per job listing: the client's retries run out (5xx). */
  listingFails: number;
  /** Per request: a long wait (Retry-After, retries) of 20 s to 3 min. */
  slow: number;
  /** verify answers 401 between these times (a revoked key): the run fails. */
  revokedFrom: number | undefined;
  revokedUntil: number | undefined;
  /** Items per list page. */
  pageSize: number;
  /**
   * Whole fixture reports (rows in every report table) rather than ones with a single empty
   * section (rows in `reports` and `sections`): the lifecycle is the same, encoding costs more.
   */
  fullReports: boolean;
}

export interface Dataset {
  campaigns: CampaignSpec[];
  behaviour: ApiBehaviour;
}

/**
 * Generates a small dataset whose jobs and versions change during the first `spanMs`; some
 * jobs appear just after one of `hotTimes` (the starts), while their campaigns are being listed,
 * so that two listings of one campaign a moment apart can differ.
 */
export function generateDataset(
  rng: Prng,
  epoch: number,
  spanMs: number,
  hotTimes: readonly number[],
): Dataset {
  const campaigns: CampaignSpec[] = [];
  const n = rng.int(1, 3);
  let jobId = 100;
  for (let c = 0; c < n; c++) {
    const jobs: JobSpec[] = [];
    const count = rng.int(1, 5);
    for (let j = 0; j < count; j++) {
      const appearsAt = rng.chance(0.6)
        ? epoch - 1
        : rng.chance(0.5)
          ? rng.pick(hotTimes) + rng.int(0, 4 * 60_000)
          : epoch + rng.int(0, spanMs);
      const versions = [{ at: appearsAt, v: 1 }];
      const bumps = rng.int(0, 2);
      for (let b = 0; b < bumps; b++) {
        const last = versions[versions.length - 1]!;
        versions.push({ at: last.at + rng.int(60_000, spanMs), v: last.v + 1 });
      }
      jobs.push({
        id: ++jobId,
        appearsAt,
        versions,
        goneAt: rng.chance(0.05) ? epoch + rng.int(0, spanMs) : undefined,
      });
    }
    campaigns.push({ id: 10 + c, jobs });
  }
  const revoked = rng.chance(0.04);
  const revokedFrom = revoked ? epoch + rng.int(0, spanMs) : undefined;
  return {
    campaigns,
    behaviour: {
      notReady: rng.pick([0, 0.05, 0.15]),
      invalid: rng.pick([0, 0, 0.05]),
      transient: rng.pick([0, 0.05, 0.2]),
      forbidden: rng.pick([0, 0, 0.03]),
      listingFails: rng.pick([0, 0.05, 0.2]),
      slow: rng.pick([0, 0, 0.05, 0.25]),
      revokedFrom,
      revokedUntil: revokedFrom === undefined ? undefined : revokedFrom + rng.int(60_000, 30 * 60_000),
      pageSize: rng.int(1, 3),
      fullReports: rng.chance(0.15),
    },
  };
}

/**
 * One more campaign of `count` jobs listed from the start, their reports unchanged: the first
 * run fetches them all at once (a backlog at the request budget's ceiling, scenario.ts
 * `budgetBacklog`), later incremental runs none of them.
 */
export function addBacklogCampaign(dataset: Dataset, epoch: number, count: number): void {
  let jobId = Math.max(100, ...dataset.campaigns.flatMap((c) => c.jobs.map((j) => j.id)));
  const jobs: JobSpec[] = Array.from({ length: count }, () => ({
    id: ++jobId,
    appearsAt: epoch - 1,
    versions: [{ at: epoch - 1, v: 1 }],
    goneAt: undefined,
  }));
  dataset.campaigns.push({ id: 10 + dataset.campaigns.length, jobs });
}

/** A job's list item when its report is at `version`: the score carries the version, so the fingerprint changes with it. */
export const jobListItem = (jobId: number, version: number | undefined) => ({
  id: jobId,
  job_status: 2,
  job_score_percentage: `v${version}`,
});

export const versionAt = (job: JobSpec, t: number): number | undefined => {
  let v: number | undefined;
  for (const entry of job.versions) if (entry.at <= t) v = entry.v;
  return v;
};

/** One report answer served: which version of which job, to whom. */
export interface Served {
  t: number;
  actor: string;
  jobId: number;
  version: number;
}

/** What one step's client got (`SimApi.client`'s `tally`). */
export interface ApiTally {
  /** Report answers that decide the report (any but a retryable failure). */
  decided: number;
  /** Requests its time for requests held back. */
  notSent: number;
}

/**
 * The limiter under `limiterUntil`: grants at once (the simulated answers' latency stands for
 * the pacing). Granting at once also keeps `limiterUntil`'s real timer off the path: it is
 * cleared in the same turn it is set, so a seed still replays exactly.
 */
const GRANT_AT_ONCE: RateLimiter = {
  acquire: () => Promise.resolve(Object.assign(() => {}, { sentAt: 0 })),
  onSuccess: () => {},
  onThrottle: () => {},
  currentRate: () => Number.POSITIVE_INFINITY,
};

/** A report's answer counted in `tally`; a request not sent is HttpApiClient's retryable failure. */
async function tallied(asked: Promise<ReportOutcome>, tally: ApiTally | undefined): Promise<ReportOutcome> {
  let outcome: ReportOutcome;
  try {
    outcome = await asked;
  } catch (error) {
    // Only a request not sent rejects (the simulated answers are outcomes).
    if (!(error instanceof TransientApiError)) throw error;
    return { kind: 'failed', error, retryable: true };
  }
  if (tally && !(outcome.kind === 'failed' && outcome.retryable)) tally.decided++;
  return outcome;
}

export class SimApi {
  readonly served: Served[] = [];
  /** Told of every report request that reaches the API (refetch.ts, 23). */
  onReportAsked: ((actor: Actor, jobId: number) => void) | undefined;
  /**
   * Campaigns whose first listed job goes away right after the next listing of their jobs reads
   * them (scenario.ts arms one at a duplicate delivery of its plan message): a later listing,
   * the duplicate's, lists one job fewer. `listingChanges` counts the jobs so removed.
   */
  readonly changeAfterListing = new Set<number>();
  listingChanges = 0;
  readonly #reports = new Map<string, { report: Report; raw: unknown }>();

  constructor(
    private readonly sim: Sim,
    readonly dataset: Dataset,
  ) {}

  /**
   * A client for one step of `actor` (each counts its own requests). With `msUntilStop`, its
   * requests go through the real `limiterUntil` (as export-reports' do, functions/aws/runtime.ts):
   * none is sent once it is zero or less, and the caller gets the client's `not sent` answer.
   * `tally` counts what the step got: answers that decide a report, and requests not sent.
   * `limiter`: the container's limiter under `limiterUntil` (the request budget, budget.ts);
   * without it, one that grants at once.
   */
  client(
    actor: Actor,
    options: { msUntilStop?: () => number; tally?: ApiTally; limiter?: RateLimiter } = {},
  ): ApiClient {
    const stats = { total: 0, retried: 0, byStatus: {} as Record<string, number> };
    const count = (status: number | 'error') => {
      stats.total++;
      stats.byStatus[String(status)] = (stats.byStatus[String(status)] ?? 0) + 1;
    };
    const send = <T>(label: string, apply: () => T): Promise<T> => {
      const b = this.dataset.behaviour;
      const slow = this.sim.faultsOn && this.sim.rng.chance(b.slow);
      const latency = slow ? this.sim.rng.int(20_000, 180_000) : this.sim.rng.int(20, 400);
      if (slow) stats.retried++;
      return this.sim.call(actor, latency, `api ${label}`, apply);
    };
    const limited = async <T>(limiter: RateLimiter, label: string, apply: () => T): Promise<T> => {
      let release: Release;
      try {
        release = await limiter.acquire();
      } catch (error) {
        if (!(error instanceof RateLimitWaitError)) throw error;
        if (options.tally) options.tally.notSent++;
        this.sim.log(actor, `api ${label}: not sent, the time for requests is up`);
        // What HttpApiClient gives up with: a 429 it will not wait for, not retried.
        throw new TransientApiError(`GET ${label} failed: not sent: ${error.message}`, {
          status: 429,
          retryAfterMs: error.waitMs,
        });
      }
      try {
        return await send(label, apply);
      } finally {
        release();
      }
    };
    const limiter = options.msUntilStop
      ? limiterUntil(options.limiter ?? GRANT_AT_ONCE, options.msUntilStop)
      : undefined;
    const call = <T>(label: string, apply: () => T): Promise<T> =>
      limiter ? limited(limiter, label, apply) : send(label, apply);
    return {
      verify: () =>
        call('verify', () => {
          const b = this.dataset.behaviour;
          const now = this.sim.now;
          if (b.revokedFrom !== undefined && now >= b.revokedFrom && now < (b.revokedUntil ?? 0)) {
            count(401);
            throw new AuthError('API key expired (API_KEY_EXPIRED)', {
              status: 401,
              errorCode: 'API_KEY_EXPIRED',
              hint: 'update the secret',
            });
          }
          count(200);
          return { companyName: 'Sim Retail' };
        }),
      campaigns: () =>
        this.#list<CampaignItem>('campaigns', call, count, () =>
          this.dataset.campaigns
            .filter((c) => c.jobs.length > 0)
            .map((c) => ({ id: c.id, campaign_name: `Campaign ${c.id}` })),
        ),
      campaignPages: (start?: ListingStart) =>
        this.#pages('campaigns', CampaignItemSchema, call, count, start, () =>
          this.dataset.campaigns
            .filter((c) => c.jobs.length > 0)
            .map((c) => ({ id: c.id, campaign_name: `Campaign ${c.id}` })),
        ),
      jobPages: (campaignId: number, start?: ListingStart) =>
        this.#pages(`jobs of ${campaignId}`, JobItemSchema, call, count, start, () => {
          const campaign = this.dataset.campaigns.find((c) => c.id === campaignId);
          if (!campaign) throw new ApiError('campaign not found', { status: 404, errorCode: 'NOT_FOUND' });
          if (this.sim.faultsOn && this.sim.rng.chance(this.dataset.behaviour.listingFails)) {
            throw new TransientApiError('HTTP 503 after 5 attempts', { status: 503 });
          }
          const now = this.sim.now;
          const listed = campaign.jobs.filter(
            (j) => j.appearsAt <= now && (j.goneAt === undefined || j.goneAt > now),
          );
          if (this.changeAfterListing.delete(campaignId) && listed[0]) {
            // Deleted in the API a moment after this listing read it.
            listed[0].goneAt = now;
            this.listingChanges++;
            this.sim.log('api', `job ${listed[0].id} of campaign ${campaignId} goes away after this listing`);
          }
          return listed.map((j) => jobListItem(j.id, versionAt(j, now)));
        }),
      // The estimate of a full run's size (shared/export/run/job-counts.ts): the jobs listed now.
      jobCount: (campaignId: number) =>
        call(`job count of ${campaignId}`, () => {
          const campaign = this.dataset.campaigns.find((c) => c.id === campaignId);
          if (!campaign) {
            count(404);
            throw new ApiError('campaign not found', { status: 404, errorCode: 'NOT_FOUND' });
          }
          count(200);
          const now = this.sim.now;
          return campaign.jobs.filter((j) => j.appearsAt <= now && (j.goneAt === undefined || j.goneAt > now))
            .length;
        }),
      getReport: (campaignId: number, jobId: number) => {
        const asked = call(`report ${campaignId}/${jobId}`, () =>
          this.#report(actor, campaignId, jobId, count),
        );
        return limiter || options.tally ? tallied(asked, options.tally) : asked;
      },
      stats: () => ({ ...stats, byStatus: { ...stats.byStatus } }),
    };
  }

  /**
   * A listing page by page through the real pager (so that a listing checkpointed by
   * plan-campaign resumes by the real rules): the whole list is read at the first page this
   * listing asks for, then served page by page with a `meta` that agrees with it.
   */
  #pages<T extends { id: number }>(
    what: string,
    schema: ItemSchema<T>,
    call: <U>(label: string, apply: () => U) => Promise<U>,
    count: (status: number | 'error') => void,
    start: ListingStart | undefined,
    items: () => Array<Record<string, unknown> & { id: number }>,
  ): AsyncGenerator<ListedPage<T>> {
    let all: Array<Record<string, unknown> & { id: number }> | undefined;
    const size = this.dataset.behaviour.pageSize;
    const readPage = (page: number) =>
      call(`${what} page ${page}`, (): ListEnvelope => {
        try {
          all ??= items();
        } catch (error) {
          count(error instanceof ApiError && error.status ? error.status : 'error');
          throw error;
        }
        count(200);
        const meta = {
          current_page: page,
          per_page: size,
          total: all.length,
          last_page: Math.ceil(all.length / size),
        };
        return { data: all.slice((page - 1) * size, page * size), meta };
      });
    return listPages(what, readPage, schema, start);
  }

  /**
   * A listing: the whole list is read at its first page, then served page by page (each page a
   * scheduler operation), so the items of one listing agree with each other.
   */
  async *#list<T>(
    what: string,
    call: <U>(label: string, apply: () => U) => Promise<U>,
    count: (status: number | 'error') => void,
    items: () => Array<Record<string, unknown> & { id: number }>,
  ): AsyncGenerator<ListedItem<T>> {
    let all: Array<Record<string, unknown> & { id: number }> | undefined;
    const size = this.dataset.behaviour.pageSize;
    for (let page = 0; all === undefined || page * size < all.length; page++) {
      const slice = await call(`${what} page ${page + 1}`, () => {
        try {
          all ??= items();
        } catch (error) {
          count(error instanceof ApiError && error.status ? error.status : 'error');
          throw error;
        }
        count(200);
        return all.slice(page * size, (page + 1) * size);
      });
      for (const raw of slice) yield { kind: 'item', item: raw as unknown as T, raw };
      if (all!.length === 0) break;
    }
  }

  #report(
    actor: Actor,
    campaignId: number,
    jobId: number,
    count: (status: number | 'error') => void,
  ): ReportOutcome {
    this.onReportAsked?.(actor, jobId);
    const now = this.sim.now;
    const job = this.dataset.campaigns.find((c) => c.id === campaignId)?.jobs.find((j) => j.id === jobId);
    const version = job ? versionAt(job, now) : undefined;
    if (!job || version === undefined || (job.goneAt !== undefined && job.goneAt <= now)) {
      count(404);
      return { kind: 'not_found', message: 'Resource not found.' };
    }
    const b = this.dataset.behaviour;
    const rng = this.sim.rng;
    if (this.sim.faultsOn) {
      if (rng.chance(b.notReady)) {
        count(409);
        return { kind: 'not_ready', reason: 'unknown', message: 'Report is not published yet.' };
      }
      if (rng.chance(b.transient)) {
        count(503);
        return {
          kind: 'failed',
          error: new TransientApiError('HTTP 503 after 5 attempts', { status: 503 }),
          retryable: true,
        };
      }
      if (rng.chance(b.forbidden)) {
        count(403);
        return {
          kind: 'failed',
          error: new AccessDeniedError('no access to this report (FORBIDDEN)', {
            status: 403,
            errorCode: 'FORBIDDEN',
          }),
          retryable: false,
        };
      }
      if (rng.chance(b.invalid)) {
        count(200);
        return {
          kind: 'invalid',
          issues: [{ path: 'data.sections', code: 'invalid_type', message: 'expected array' }],
          body: JSON.stringify({ data: { job: { id: jobId }, sections: 'oops' } }),
        };
      }
    }
    count(200);
    this.served.push({ t: now, actor: actor.name, jobId, version });
    const { report, raw } = this.#reportOf(campaignId, jobId, version);
    return { kind: 'ok', report, raw };
  }

  #reportOf(campaignId: number, jobId: number, version: number): { report: Report; raw: unknown } {
    const key = `${jobId}:${version}`;
    let found = this.#reports.get(key);
    if (!found) {
      const data = reportData(jobId) as { job: Record<string, Record<string, unknown>> };
      const job = data.job as Record<string, unknown> & {
        campaign: Record<string, unknown>;
        report: Record<string, unknown>;
      };
      job.job_score_percentage = `v${version}`;
      job.campaign.id = campaignId;
      job.report.id = version;
      if (!this.dataset.behaviour.fullReports) {
        const sections = (data as unknown as { sections: Array<Record<string, unknown>> }).sections;
        sections.splice(1);
        Object.assign(sections[0]!, { questions: [], text_entries: [], inputs: [], media_galleries: [] });
      }
      const parsed = ReportResponseSchema.parse({ data });
      found = { report: parsed.data, raw: data };
      this.#reports.set(key, found);
    }
    return found;
  }
}
