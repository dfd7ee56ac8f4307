/**
 * How long a full run takes, said before it starts: its size from the listings' totals (the
 * campaign listing's length and each sampled campaign's job total, shared/export/run/job-counts.ts)
 * and its time at a request rate, with a deadline that closes it early. Pure arithmetic: the
 * CLI, start-run and the tests share it.
 *
 * What it rests on: a full run asks for the report of every job listed (not-ready ones
 * included), and lists every campaign's jobs at EXPORT_PER_PAGE a page. The API names no job
 * count in a campaign's list item (spec 2.2), so a campaign's jobs are its job listing's
 * `meta.total`; when there are more campaigns than were asked, the total is extrapolated from
 * an even spread of them, with a range. The time assumes the API serves the configured rate:
 * 429s lower it, so it is the shortest the run can take.
 */
import { EXPORT_PER_PAGE } from '../../api/schemas.js';

/** The job totals of some of a listing's campaigns. */
export interface JobCountSample {
  /** Campaigns in the listing. */
  campaigns: number;
  /** `meta.total` of the job listing of each campaign asked (at most `campaigns` of them). */
  counts: readonly number[];
}

/** A full run's size. */
export interface SizeEstimate {
  campaigns: number;
  /** Campaigns whose jobs were counted; all of them when it equals `campaigns`. */
  counted: number;
  /** Reports the run asks for: one per job. */
  reports: number;
  /**
   * The range the reports likely fall in (about 95%: two standard errors of the extrapolation);
   * `reports` itself when every campaign was counted, undefined when too few were to say.
   */
  range?: { low: number; high: number } | undefined;
  /** Requests the run sends: the key's verify, the campaign and job listings' pages, the reports. */
  requests: number;
}

/** Standard errors either side of the extrapolated total in {@link SizeEstimate.range}. */
const RANGE_STANDARD_ERRORS = 2;

/** One request per page of `items` at `perPage`; an empty listing is still one page. */
const pagesOf = (items: number, perPage: number): number => Math.max(1, Math.ceil(items / perPage));

/**
 * A full run's size from a sample of its campaigns' job totals.
 *
 * @example
 * estimateSize({ campaigns: 3, counts: [10, 250, 0] }).reports // 260, every campaign counted
 */
export function estimateSize(sample: JobCountSample, perPage = EXPORT_PER_PAGE): SizeEstimate {
  const counts = sample.counts.map((n) => Math.max(0, n));
  const k = counts.length;
  const n = Math.max(sample.campaigns, k);
  const fixed = 1 + pagesOf(n, perPage); // verify, the campaign listing
  if (k === 0)
    return {
      campaigns: n,
      counted: 0,
      reports: 0,
      range: n === 0 ? { low: 0, high: 0 } : undefined,
      requests: fixed,
    };
  const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const jobMean = mean(counts);
  const pageMean = mean(counts.map((c) => pagesOf(c, perPage)));
  const reports = Math.round(n * jobMean);
  const requests = fixed + Math.round(n * pageMean) + reports;
  if (k === n) return { campaigns: n, counted: k, reports, range: { low: reports, high: reports }, requests };
  if (k < 2) return { campaigns: n, counted: k, reports, range: undefined, requests };
  const variance = counts.reduce((s, c) => s + (c - jobMean) ** 2, 0) / (k - 1);
  // The total's standard error, with the finite population correction: k of n were counted.
  const error = n * Math.sqrt(variance / k) * Math.sqrt((n - k) / (n - 1));
  const counted = counts.reduce((a, b) => a + b, 0);
  const range = {
    low: Math.max(counted, Math.round(n * jobMean - RANGE_STANDARD_ERRORS * error)),
    high: Math.round(n * jobMean + RANGE_STANDARD_ERRORS * error),
  };
  return { campaigns: n, counted: k, reports, range, requests };
}

/** The rate a run goes at and what bounds it in time. */
export interface RunPace {
  /** Requests per second the run sends at most. */
  rate: number;
  /** After this many minutes the run is closed with what it fetched (AWS's run deadline); none: it runs to the end. */
  deadlineMinutes?: number | undefined;
}

export interface TimeEstimate {
  /** Seconds to send every request at the rate. */
  seconds: number;
  /** Share of the reports fetched when the deadline closes the run: 1 when it fits. */
  shareByDeadline: number;
  /**
   * Runs of `deadlineMinutes` it takes to fetch every report, each listing every campaign again
   * (1 without a deadline); Infinity when the listing alone fills a run.
   */
  runs: number;
  /** The smallest whole deadline in minutes that fits the run (undefined without a deadline). */
  deadlineForOneRun: number | undefined;
}

/**
 * How long a run of `size` takes at `pace`.
 *
 * @example
 * estimateTime({ ...size, requests: 72_000 }, { rate: 20, deadlineMinutes: 30 }) // seconds 3600, runs 2
 */
export function estimateTime(size: SizeEstimate, pace: RunPace): TimeEstimate {
  const seconds = size.requests / pace.rate;
  if (pace.deadlineMinutes === undefined)
    return { seconds, shareByDeadline: 1, runs: 1, deadlineForOneRun: undefined };
  const perRun = pace.deadlineMinutes * 60 * pace.rate; // requests one run may send
  const listing = size.requests - size.reports; // sent again by every run
  const reportsPerRun = perRun - listing;
  const fits = size.requests <= perRun;
  const shareByDeadline =
    fits || size.reports === 0 ? 1 : Math.min(1, Math.max(0, reportsPerRun / size.reports));
  const runs = fits
    ? 1
    : reportsPerRun <= 0
      ? Number.POSITIVE_INFINITY
      : Math.ceil(size.reports / reportsPerRun);
  return { seconds, shareByDeadline, runs, deadlineForOneRun: Math.ceil(seconds / 60) };
}

/** `1,012,000`: a count as a person reads it. */
export const formatCount = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Three significant figures: an extrapolated count claims no more. */
function roundCount(n: number): number {
  if (n < 1000) return Math.round(n);
  const step = 10 ** (Math.floor(Math.log10(n)) - 2);
  return Math.round(n / step) * step;
}

/**
 * `1,012,345 reports in 412 campaigns`, or, extrapolated,
 * `~1,010,000 reports in 412 campaigns (from the job totals of 50 of them: likely 850,000 to 1,170,000)`.
 */
export function describeSize(size: SizeEstimate): string {
  const campaigns = `${formatCount(size.campaigns)} campaign${size.campaigns === 1 ? '' : 's'}`;
  if (size.counted === size.campaigns) return `${formatCount(size.reports)} reports in ${campaigns}`;
  const basis = `from the job totals of ${formatCount(size.counted)} of them`;
  const [low, high] = size.range ? [roundCount(size.range.low), roundCount(size.range.high)] : [];
  // Campaigns of one size leave no spread to tell.
  const range =
    low === undefined || high === undefined
      ? ': a rough guess'
      : low === high
        ? ''
        : `: likely ${formatCount(low)} to ${formatCount(high)}`;
  return `~${formatCount(roundCount(size.reports))} reports in ${campaigns} (${basis}${range})`;
}

/** `14 h 3 min`, `6 h`, `6 min 58 s`, `40 s`; days from 48 hours (`3 d 4 h`). Zero parts are left out. */
export function describeDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const days = Math.floor(s / 86_400);
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) =>
    small > 0 ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`;
  if (hours >= 48) return two(days, 'd', hours % 24, 'h');
  if (hours > 0) return two(hours, 'h', minutes, 'min');
  if (minutes > 0) return two(minutes, 'min', s % 60, 's');
  return `${s} s`;
}
