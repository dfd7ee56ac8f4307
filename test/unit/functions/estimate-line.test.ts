import { describe, expect, it } from 'vitest';
import { awsEstimateLine, exportEstimateLine } from '../../../functions/cli/estimate-line.js';
import type { SizeEstimate } from '../../../shared/export/run/estimate.js';

/** 412 campaigns, 50 counted: ~1M reports, 10,000 listing requests. */
const MILLION: SizeEstimate = {
  campaigns: 412,
  counted: 50,
  reports: 1_002_000,
  range: { low: 851_234, high: 1_153_456 },
  requests: 1_012_000,
};

describe("aws start --full's line", () => {
  it('says what share the deadline closes the run at, how many runs it takes, and the settings that shorten it', () => {
    const line = awsEstimateLine({ size: MILLION, rate: 20, rate_ceiling: 20, deadline_minutes: 360 });
    expect(line).toBe(
      'full run: ~1,000,000 reports in 412 campaigns (from the job totals of 50 of them: likely 851,000 to 1,150,000); ' +
        'at 20 requests/s (rateCeiling 20) about 14 h 3 min, longer if the API throttles (429); ' +
        'the run deadline (6 h) closes it at about 42% fetched and the next runs fetch the rest (3 runs in all, each listing every campaign again); ' +
        "to shorten it raise rateCeiling to the API's limit, or runDeadlineMinutes to 844 or more for one run (deploy/<stage>.json)",
    );
  });

  it('names the largest deadline when no deadline fits, and no higher ceiling at the largest', () => {
    const line = awsEstimateLine({
      size: { ...MILLION, reports: 1_000_000_000, requests: 1_010_000_000 },
      rate: 1000,
      rate_ceiling: 1000,
      deadline_minutes: 600,
    });
    expect(line).toContain(
      'to shorten it runDeadlineMinutes (at most 10,080) for fewer runs (deploy/<stage>.json)',
    );
    expect(line).not.toContain('raise rateCeiling');
  });

  it('says when the listing alone outlasts the deadline', () => {
    const line = awsEstimateLine({
      size: { ...MILLION, reports: 1000, requests: 1000 + 20 * 600 },
      rate: 20,
      rate_ceiling: 20,
      deadline_minutes: 10,
    });
    expect(line).toContain(
      'closes it at about 0% fetched and listing the campaigns alone takes longer than that',
    );
  });
});

describe("export --full's line", () => {
  it('gives the time at --max-rate and when --concurrency would bind', () => {
    const size: SizeEstimate = {
      campaigns: 40,
      counted: 40,
      reports: 20_046,
      range: { low: 20_046, high: 20_046 },
      requests: 20_128,
    };
    expect(exportEstimateLine(size, { maxRate: 50, concurrency: 128 })).toBe(
      'full run: 20,046 reports in 40 campaigns; at 50 requests/s (--max-rate) about 6 min 43 s, longer if the API throttles (429); ' +
        'a higher --max-rate shortens it if the API allows more, and a higher --concurrency if it takes over 2.6 s to answer; ' +
        'incremental runs after it fetch only new and changed reports',
    );
    expect(exportEstimateLine(size, { maxRate: 1000, concurrency: 128 })).toContain(
      '; a higher --concurrency shortens it if the API takes over 0.1 s to answer;',
    );
  });
});
