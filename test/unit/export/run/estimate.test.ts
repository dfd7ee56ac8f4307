import { describe, expect, it } from 'vitest';
import { ApiError, AuthError, TransientApiError } from '../../../../shared/errors.js';
import type { ApiClient, ExportDeps } from '../../../../shared/export/run/context.js';
import {
  describeDuration,
  describeSize,
  estimateSize,
  estimateTime,
} from '../../../../shared/export/run/estimate.js';
import { countJobs, spreadIndexes } from '../../../../shared/export/run/job-counts.js';
import { silentLog } from '../../../../shared/log.js';

describe('estimateSize', () => {
  it('adds up the reports and the requests when every campaign was counted', () => {
    const size = estimateSize({ campaigns: 3, counts: [10, 250, 0] });
    // verify + 1 campaign page + job pages 1 + 3 + 1 + one request per report
    expect(size).toEqual({
      campaigns: 3,
      counted: 3,
      reports: 260,
      range: { low: 260, high: 260 },
      requests: 1 + 1 + 5 + 260,
    });
  });

  it('extrapolates from a sample and gives a range that holds the counted campaigns', () => {
    const size = estimateSize({ campaigns: 400, counts: [1000, 3000, 2000, 2000] });
    expect(size.reports).toBe(800_000);
    expect(size.counted).toBe(4);
    // Mean 2000, sample sd 816.5: SE = 400 × 816.5 / 2 × sqrt(396/399) = 162,698.
    expect(size.range!.low).toBeCloseTo(800_000 - 2 * 162_698, -2);
    expect(size.range!.high).toBeCloseTo(800_000 + 2 * 162_698, -2);
    // verify, 4 campaign pages, 20 job pages a campaign on average
    expect(size.requests).toBe(1 + 4 + 400 * 20 + 800_000);
  });

  it('never puts the low end below the jobs counted', () => {
    const size = estimateSize({ campaigns: 3, counts: [0, 10_000] });
    expect(size.range!.low).toBe(10_000);
  });

  it('gives no range from one campaign of many', () => {
    expect(estimateSize({ campaigns: 100, counts: [7] }).range).toBeUndefined();
    expect(estimateSize({ campaigns: 100, counts: [7] }).reports).toBe(700);
  });

  it('says nothing is known when no campaign could be counted, and zero for an empty listing', () => {
    expect(estimateSize({ campaigns: 5, counts: [] })).toMatchObject({ reports: 0, range: undefined });
    expect(estimateSize({ campaigns: 0, counts: [] })).toMatchObject({
      reports: 0,
      range: { low: 0, high: 0 },
      requests: 2,
    });
  });
});

describe('estimateTime', () => {
  const size = (reports: number, listing: number) => ({
    campaigns: 1,
    counted: 1,
    reports,
    range: { low: reports, high: reports },
    requests: reports + listing,
  });

  it('is the requests at the rate, in one run without a deadline', () => {
    expect(estimateTime(size(9_900, 100), { rate: 50 })).toEqual({
      seconds: 200,
      shareByDeadline: 1,
      runs: 1,
      deadlineForOneRun: undefined,
    });
  });

  it('says what share the deadline closes the run at, and how many runs fetch it all', () => {
    // 1,012,000 reports at 20/s: 14 h 3 min; a 6 h run sends 432,000 requests, 10,000 of them listing.
    const time = estimateTime(size(1_002_000, 10_000), { rate: 20, deadlineMinutes: 360 });
    expect(time.seconds).toBe(50_600);
    expect(time.shareByDeadline).toBeCloseTo(422_000 / 1_002_000, 6);
    expect(time.runs).toBe(3);
    expect(time.deadlineForOneRun).toBe(844);
  });

  it('fits a run inside its deadline', () => {
    expect(estimateTime(size(1_000, 10), { rate: 20, deadlineMinutes: 360 })).toMatchObject({
      shareByDeadline: 1,
      runs: 1,
      deadlineForOneRun: 1,
    });
  });

  it('never ends when the listing alone fills the deadline', () => {
    const time = estimateTime(size(1_000, 20 * 600), { rate: 20, deadlineMinutes: 10 });
    expect(time.runs).toBe(Number.POSITIVE_INFINITY);
    expect(time.shareByDeadline).toBe(0);
  });
});

describe('the words', () => {
  it('gives an exact count as it is, and an extrapolated one to three figures with its range', () => {
    expect(describeSize(estimateSize({ campaigns: 1, counts: [20_046] }))).toBe(
      '20,046 reports in 1 campaign',
    );
    expect(
      describeSize({
        campaigns: 412,
        counted: 50,
        reports: 1_012_345,
        range: { low: 851_234, high: 1_173_456 },
        requests: 0,
      }),
    ).toBe(
      '~1,010,000 reports in 412 campaigns (from the job totals of 50 of them: likely 851,000 to 1,170,000)',
    );
    expect(describeSize(estimateSize({ campaigns: 120, counts: Array(50).fill(5) }))).toBe(
      '~600 reports in 120 campaigns (from the job totals of 50 of them)',
    );
    expect(describeSize({ campaigns: 412, counted: 1, reports: 412, requests: 0 })).toBe(
      '~412 reports in 412 campaigns (from the job totals of 1 of them: a rough guess)',
    );
  });

  it('words a duration in its two largest units', () => {
    expect(describeDuration(50_600)).toBe('14 h 3 min');
    expect(describeDuration(21_600)).toBe('6 h');
    expect(describeDuration(418)).toBe('6 min 58 s');
    expect(describeDuration(40)).toBe('40 s');
    expect(describeDuration(3 * 86_400 + 4 * 3600 + 59)).toBe('3 d 4 h');
  });
});

describe('countJobs', () => {
  /** deps whose client answers `jobCount` from `answer`, recording the campaigns asked. */
  const depsAnswering = (answer: (id: number) => number | Error) => {
    const asked: number[] = [];
    const api = {
      jobCount: async (id: number) => {
        asked.push(id);
        const a = answer(id);
        if (a instanceof Error) throw a;
        return a;
      },
    } as unknown as ApiClient;
    const deps: ExportDeps = {
      api: () => api,
      storage: undefined as never,
      log: silentLog,
      now: () => new Date(0),
    };
    return { deps, asked };
  };

  it('asks every campaign up to the limit, and an even spread beyond it', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => 1000 + i);
    const { deps, asked } = depsAnswering(() => 5);
    const sample = await countJobs(deps, ids, { maxCounted: 4 });
    expect(sample).toEqual({ campaigns: 200, counts: [5, 5, 5, 5] });
    expect(asked.sort()).toEqual([1025, 1075, 1125, 1175]);
    expect(spreadIndexes(3, 50)).toEqual([0, 1, 2]);
  });

  it('counts a campaign gone as empty and leaves out one that keeps failing', async () => {
    const { deps } = depsAnswering((id) =>
      id === 2
        ? new ApiError('gone', { status: 404 })
        : id === 3
          ? new TransientApiError('HTTP 503 after 5 attempts', { status: 503 })
          : 10,
    );
    expect(await countJobs(deps, [1, 2, 3])).toEqual({ campaigns: 3, counts: [10, 0] });
  });

  it('throws what would stop the run', async () => {
    const { deps } = depsAnswering(() => new AuthError('expired', { status: 401 }));
    await expect(countJobs(deps, [1])).rejects.toThrow(AuthError);
  });

  it('asks nothing once its time is up', async () => {
    const { deps, asked } = depsAnswering(() => 1);
    expect(await countJobs(deps, [1, 2], { stopAt: 0 })).toEqual({ campaigns: 2, counts: [] });
    expect(asked).toEqual([]);
  });
});
