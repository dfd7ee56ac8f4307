/**
 * Public types of the Integration API simulator: options, the dataset (the truth the tests
 * compare exports against), statistics and the running simulator handle.
 */

/** Probabilities in [0,1], drawn from a seeded PRNG, applied to every request after auth. */
export interface FaultOptions {
  /** 500/502/503 with an HTML body. */
  serverError?: number;
  /** Socket reset without an answer. */
  reset?: number;
  /** Answer delayed by `slowMs`. */
  slow?: number;
  slowMs?: number;
  /** 200 (or whatever the answer is) with a Content-Length larger than the body; connection cut mid-body. */
  truncate?: number;
}

export type ReportSize = 'tiny' | 'small' | 'mixed' | 'large';

/** Token bucket per key: `burst` tokens, refilled at `ratePerSecond`. */
export interface TokenBucketLimit {
  ratePerSecond: number;
  burst: number;
}

/**
 * Rate-limit headers a fixed window sends (names compared case-insensitively, sent lowercase):
 * - 'none': only `retry-after` on a 429;
 * - 'laravel': `x-ratelimit-limit` and `x-ratelimit-remaining` on every admitted answer; a 429 adds
 *   `retry-after` and `x-ratelimit-reset` (Unix seconds);
 * - 'github': `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (Unix seconds, rounded up) on
 *   every admitted answer and 429, plus `retry-after` on a 429;
 * - 'ietf': `ratelimit-policy: "default";q=N;w=S` and `ratelimit: "default";r=R;t=T` on every
 *   admitted answer and 429, plus `retry-after` on a 429 (draft-ietf-httpapi-ratelimit-headers).
 */
export type RateLimitHeaderStyle = 'none' | 'laravel' | 'github' | 'ietf';

/**
 * Where a Laravel window turns. Laravel's headers say whole seconds (its availableAt), but the
 * window lasts as long as its cache keys:
 * - 'second': on a whole second of the wall clock (the file, array and database stores keep
 *   expiries in whole seconds), so the reset a 429 names is exact;
 * - 'exact': `windowMs` after the request that opened it (Redis expires keys to the
 *   millisecond), so the turn comes up to a second after the reset a 429 names.
 * - 'ceil': `windowMs` after the request that opened it, but the 429 names the reset rounded up
 *   to the next whole second (`X-RateLimit-Reset` = ceil of the epoch seconds, `Retry-After` =
 *   ceil of the seconds left, never 0), as express-rate-limit's default store does: the turn
 *   comes up to a second before the reset named.
 */
export type WindowTurn = 'second' | 'exact' | 'ceil';

/**
 * Fixed window per key, as Laravel's `throttle` middleware: the first request after a window
 * expired opens one of `windowMs`; `windowRequests` requests pass in it, the rest answer 429 and
 * are not counted. With 'laravel' headers `windowMs` must be a multiple of 1000 (Laravel counts
 * whole seconds) and `turn` says where the window ends.
 */
export interface FixedWindowLimit {
  windowRequests: number;
  windowMs: number;
  /** Default 'none'. */
  headers?: RateLimitHeaderStyle;
  /** Only with 'laravel' headers; default 'second'. */
  turn?: WindowTurn;
}

export type RateLimit = TokenBucketLimit | FixedWindowLimit;

export interface SimulatorOptions {
  /** Default 0 = any free port; always binds 127.0.0.1. */
  port?: number;
  /** Default 1; everything (dataset, keys, faults) is deterministic from it. */
  seed?: number;
  /** Default 4. */
  campaigns?: number;
  /** Default 25 (exact, so tests can compute totals). */
  jobsPerCampaign?: number;
  /** large = 50 sections x 30 questions; default 'small'. */
  reportSize?: ReportSize;
  /** Share of jobs answering 409 "not published" (default 0.1, rounded to a whole count). */
  unpublishedShare?: number;
  /** Jobs answering 409 "survey ... not found" (default 1). */
  surveyMissingJobs?: number;
  /** Jobs answering 409 "survey sections are not configured" (default 1). */
  noSectionsJobs?: number;
  /** Published jobs answering 409 "try again later" for their first `tryLaterAttempts` report requests. */
  tryLaterJobs?: number;
  tryLaterAttempts?: number;
  /** Published jobs whose 200 report body violates spec 2.5 (default 0). */
  invalidReportJobs?: number;
  /**
   * Published jobs whose report shows how an API grows (default 0): each gets one change of
   * `driftChanges` (default all), in turn. See `DRIFT_CHANGES`.
   */
  driftedReportJobs?: number;
  driftChanges?: readonly DriftChange[];
  /** Published jobs whose report answers 403 FORBIDDEN for the valid key (default 0). */
  forbiddenReportJobs?: number;
  /** Token bucket or fixed window per key; default null (no limit). */
  rateLimit?: RateLimit | null;
  /**
   * Every answer (429s and auth errors included) leaves this many ms (±20%, seeded jitter) after
   * its request arrived; the rate limit counts the request on arrival. Default 0.
   */
  latencyMs?: number;
  /** Default none. */
  faults?: FaultOptions;
}

export interface SimulatorStats {
  /** Every request received, whatever its answer. */
  total: number;
  /** "200", "429", ...; "reset" for sockets reset without an answer, "truncated" for bodies cut mid-way. */
  byStatus: Record<string, number>;
  byEndpoint: { verify: number; campaigns: number; jobs: number; report: number };
  reportRequestsByJob: Map<number, number>;
  /** Timestamps (ms, performance.now()) of requests that got a whole 200, for rate measurements. */
  okTimes: number[];
  /** performance.now() of each 429 answered. */
  throttledTimes: number[];
  /** Timestamps (ms, performance.now()) of the first request of each fixed window, of any key. */
  windowStarts: number[];
}

export type FailKind =
  | '500'
  | '502'
  | '503'
  | 'reset'
  | 'slow'
  | 'truncate'
  | 'invalid_json'
  | '429'
  | '422'
  | 'not_json_html';

export interface SimulatorKeys {
  valid: string;
  expired: string;
  ip_restricted: string;
  domain_restricted: string;
  other_company: string;
}

/**
 * How an API that grows changes a report (issue 27): a value an enumeration did not list, an
 * integer sent as a decimal string, a required string sent as null, a new kind of question,
 * a new object on the report and a new field on a nested level.
 */
export const DRIFT_CHANGES = [
  'unlisted_value',
  'decimal_string',
  'null_required',
  'new_variant',
  'new_field',
] as const;
export type DriftChange = (typeof DRIFT_CHANGES)[number];

export type JobState = 'published' | 'unpublished' | 'survey_missing' | 'no_sections';

export interface SimJob {
  id: number;
  campaignId: number;
  state: JobState;
  /** Remaining "try again later" answers. */
  tryLaterAttempts: number;
  invalid: boolean;
  /** The change its report shows (`driftedReportJobs`), if any. */
  drift?: DriftChange | undefined;
  forbidden: boolean;
  /** The list item served by List Jobs (includes unknown extra fields). */
  item: Record<string, unknown>;
  /** Bumped by touch(); part of the report content. */
  version: number;
}

export interface SimCampaign {
  id: number;
  item: Record<string, unknown>;
  jobs: SimJob[];
}

export interface Dataset {
  company: string;
  seed: number;
  reportSize: ReportSize;
  campaigns: SimCampaign[];
  campaign(campaignId: number): SimCampaign | undefined;
  job(jobId: number): SimJob | undefined;
  /** The report `data` object served for a published job (deterministic from seed, job id and version). */
  reportOf(jobId: number): unknown;
  /** The schema-violating `data` object served for a job marked `invalid`. */
  invalidReportOf(jobId: number): unknown;
  /** The report of a job with a `drift`: its report with that change. */
  driftedReportOf(jobId: number): unknown;
  /** State -> published (its list item's published_at is set). */
  publish(jobId: number): void;
  /** Changes the job's list item (updated_at, score) and its report. */
  touch(jobId: number): void;
  /** A new published job at the end of the campaign's list. */
  addJob(campaignId: number): SimJob;
  /** Afterwards the job is no longer listed and its report answers 404. */
  removeJob(jobId: number): void;
}

export interface Simulator {
  /** The {base_url}, e.g. http://127.0.0.1:41234 (paths start with /integration/v1/...). */
  url: string;
  keys: SimulatorKeys;
  /** The Origin header value that the domain_restricted key accepts. */
  allowedOrigin: string;
  /** Company name that the other_company key verifies as. */
  otherCompany: string;
  dataset: Dataset;
  stats: SimulatorStats;
  resetStats(): void;
  setFaults(faults: FaultOptions): void;
  /** Replaces the rate limit (null lifts it); every key starts with a fresh bucket or window. */
  setRateLimit(limit: RateLimit | null | undefined): void;
  /** Changes `latencyMs` for requests that arrive from now on; `jitterMs`: ± that many ms instead of ±20%. */
  setLatency(ms: number, jitterMs?: number): void;
  /** Scripted faults: the next `times` (default 1) requests whose path+query matches answer with `kind`. */
  failNext(match: RegExp, kind: FailKind, times?: number): void;
  /** Afterwards that key answers 401 INVALID_API_KEY. */
  revokeKey(key: string): void;
  close(): Promise<void>;
}
