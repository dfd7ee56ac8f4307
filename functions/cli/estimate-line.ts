/**
 * The line a full run prints on stderr before it fetches (shared/export/run/estimate.ts): its
 * size, its time at the configured rate, and the settings that shorten it. `export --full` says
 * it from its own count; `aws start --full` from start-run's answer, at the stack's settings.
 */
import type { FullRunEstimate } from '../../shared/aws/payloads.js';
import {
  describeDuration,
  describeSize,
  estimateTime,
  formatCount,
  type SizeEstimate,
} from '../../shared/export/run/estimate.js';
import { RUN_DEFAULTS } from '../../shared/run-defaults.js';

/** The rate a time is given at, in words: `20 requests/s`, `0.5 requests/s`. */
const perSecond = (rate: number): string => `${Number(rate.toFixed(1))} requests/s`;

/**
 * `export --full`: the time at --max-rate, a ceiling the limiter keeps to as long as the API
 * does not answer 429, and how to go faster.
 *
 * @example
 * full run: 20,046 reports in 40 campaigns; at 50 requests/s (--max-rate) about 6 min 58 s, longer if the API throttles; ...
 */
export function exportEstimateLine(
  size: SizeEstimate,
  flags: { maxRate: number; concurrency: number },
): string {
  const time = estimateTime(size, { rate: flags.maxRate });
  const slowAnswer = (flags.concurrency / flags.maxRate).toFixed(1);
  const faster =
    flags.maxRate < RUN_DEFAULTS.maxRate.max
      ? `a higher --max-rate shortens it if the API allows more, and a higher --concurrency if it takes over ${slowAnswer} s to answer`
      : `a higher --concurrency shortens it if the API takes over ${slowAnswer} s to answer`;
  return (
    `full run: ${describeSize(size)}; at ${perSecond(flags.maxRate)} (--max-rate) about ` +
    `${describeDuration(time.seconds)}, longer if the API throttles (429); ${faster}; ` +
    'incremental runs after it fetch only new and changed reports'
  );
}

/**
 * `aws start --full`: the time at the stack's rate, what its run deadline leaves for later runs,
 * and the settings (deploy/<stage>.json) that shorten it.
 *
 * @example
 * full run: ~1,010,000 reports in 412 campaigns (...); at 18 requests/s (rateCeiling 20) about 15 h 36 min; the run deadline (6 h 0 min) closes it at about 38% ...
 */
export function awsEstimateLine(estimate: FullRunEstimate): string {
  const { size, rate, rate_ceiling: ceiling, deadline_minutes: deadline } = estimate;
  const time = estimateTime(size, { rate, deadlineMinutes: deadline });
  const head =
    `full run: ${describeSize(size)}; at ${perSecond(rate)} (rateCeiling ${ceiling}) about ` +
    `${describeDuration(time.seconds)}, longer if the API throttles (429)`;
  const raiseCeiling =
    ceiling < RUN_DEFAULTS.lambdaRateCeiling.max ? "raise rateCeiling to the API's limit" : undefined;
  if (time.runs === 1) {
    const shorten = raiseCeiling ? `; to shorten it ${raiseCeiling} (deploy/<stage>.json)` : '';
    return `${head}; it fits the run deadline (${describeDuration(deadline * 60)})${shorten}`;
  }
  const share = Math.floor(100 * time.shareByDeadline);
  const later = Number.isFinite(time.runs)
    ? `the next runs fetch the rest (${time.runs} runs in all, each listing every campaign again)`
    : 'listing the campaigns alone takes longer than that, so no run gets to the reports';
  const oneRun = time.deadlineForOneRun ?? RUN_DEFAULTS.runDeadlineMinutes.max + 1;
  const deadlineAdvice =
    oneRun <= RUN_DEFAULTS.runDeadlineMinutes.max
      ? `runDeadlineMinutes to ${formatCount(oneRun)} or more for one run`
      : `runDeadlineMinutes (at most ${formatCount(RUN_DEFAULTS.runDeadlineMinutes.max)}) for fewer runs`;
  const shorten = [raiseCeiling, deadlineAdvice].filter(Boolean).join(', or ');
  return (
    `${head}; the run deadline (${describeDuration(deadline * 60)}) closes it at about ${share}% fetched and ` +
    `${later}; to shorten it ${shorten} (deploy/<stage>.json)`
  );
}
