import { describe, expect, it } from 'vitest';
import { buildManifest, ClosingTally } from '../../../../shared/export/run/closing-tally.js';
import { isComplete, type RunRecords } from '../../../../shared/export/run/run-records.js';
import {
  DtSchema,
  type PlanRecord,
  type RequestCounts,
  type RunRecord,
  type UnitSummary,
} from '../../../../shared/export/state/records.js';
import { planRecord, runRecord } from '../../../helpers/records.js';

const RUN = '20261122T031500Z-a1b2c3';
const requests = (total: number, s429 = 0): RequestCounts => ({
  total,
  retried: s429,
  by_status: s429 ? { '200': total - s429, '429': s429 } : { '200': total },
});

function records(
  overrides: {
    record?: Partial<RunRecord>;
    plans?: PlanRecord[];
    units?: UnitSummary[];
    unrecorded?: RequestCounts;
  } = {},
): RunRecords {
  const record = runRecord({ run_id: RUN, requests: requests(2), ...overrides.record });
  const plans: PlanRecord[] = overrides.plans ?? [
    planRecord({ jobs: 6, unchanged: [{ job_id: 10, fp: 'f' }], jobs_invalid: 1, requests: requests(1) }),
  ];
  const units: UnitSummary[] = overrides.units ?? [
    {
      unit: 'c1-u0',
      campaign_id: 1,
      attempt: 1,
      staged: [],
      jobs: {
        11: { fp: 'a', outcome: 'exported' },
        12: { fp: 'b', outcome: 'not_ready', detail: 'not_published' },
        13: { fp: 'c', outcome: 'not_found' },
        14: { fp: 'd', outcome: 'invalid' },
      },
      requests: requests(5, 1),
    },
  ];
  return {
    record,
    plans: new Map(plans.map((p) => [p.campaign_id, p])),
    units: new Map(units.map((u) => [u.unit, u])),
    unrecorded: overrides.unrecorded ?? { total: 0, retried: 0, by_status: {} },
  };
}

/** A run of one campaign whose one job was exported. */
function cleanRecords(record: Partial<RunRecord> = {}): RunRecords {
  return records({
    record,
    plans: [planRecord({ jobs: 1, requests: requests(1) })],
    units: [
      {
        unit: 'c1-u0',
        campaign_id: 1,
        attempt: 1,
        staged: [],
        jobs: { 11: { fp: 'a', outcome: 'exported' } },
        requests: requests(1),
      },
    ],
  });
}

describe('buildManifest', () => {
  it('gives every listed job exactly one outcome and sums the requests of every step', () => {
    const manifest = buildManifest(records(), new Date('2026-11-22T03:16:00Z'));
    expect(manifest.counts).toEqual({
      campaigns: 1,
      jobs: 6,
      reports_exported: 1,
      reports_unchanged: 1,
      reports_not_ready: 1,
      reports_not_found: 1,
      reports_invalid: 2,
      reports_failed: 0,
      campaigns_invalid: 0,
      duplicates: 0,
    });
    expect(manifest.requests).toEqual({ total: 8, retried: 1, by_status: { '200': 7, '429': 1 } });
    expect(manifest.status).toBe('partial');
  });

  it('names the jobs whose report answered 404, and the campaigns whose listing held invalid items', () => {
    const manifest = buildManifest(records(), new Date());
    expect(manifest.not_found_jobs).toEqual([13]);
    expect(manifest.partially_listed_campaigns).toEqual([1]);
    const clean = buildManifest(cleanRecords(), new Date());
    expect(clean).not.toHaveProperty('not_found_jobs');
    expect(clean).not.toHaveProperty('partially_listed_campaigns');
  });

  it('counts the jobs of a missing unit as failed', () => {
    const manifest = buildManifest(records({ units: [] }), new Date());
    expect(manifest.counts.reports_failed).toBe(4);
    expect(manifest.counts.jobs).toBe(6);
  });

  it('is failed with the error_code when the start was stopped', () => {
    const fatal = {
      message: 'Invalid API key (INVALID_API_KEY)',
      error_code: 'INVALID_API_KEY',
      status: 401,
    };
    const manifest = buildManifest(
      records({ record: { campaign_ids: [], fatal }, plans: [], units: [] }),
      new Date(),
    );
    expect(manifest.status).toBe('failed');
    expect(manifest.error).toEqual({ message: fatal.message, error_code: 'INVALID_API_KEY' });
  });

  it('is succeeded when nothing failed or was invalid', () => {
    const clean = cleanRecords();
    expect(buildManifest(clean, new Date()).status).toBe('succeeded');
  });

  it('is partial when a campaign item was invalid, and counts it among the campaigns', () => {
    const manifest = buildManifest(cleanRecords({ campaigns_invalid: 1 }), new Date());
    expect(manifest.counts).toMatchObject({ campaigns: 2, campaigns_invalid: 1 });
    expect(manifest.status).toBe('partial');
  });

  it('sums the duplicates of the campaign listing and of every jobs listing', () => {
    const withRepeats = records({ record: { duplicates: 2 } });
    const plan = withRepeats.plans.get(1)!;
    withRepeats.plans.set(1, { ...plan, duplicates: 3 });
    expect(buildManifest(withRepeats, new Date()).counts.duplicates).toBe(5);
  });

  it('counts a campaign whose listing stopped as unlisted: none of its jobs, no outcome recorded', () => {
    const stopped = records({ units: [] });
    const plan = stopped.plans.get(1)!;
    const reason = 'GET /integration/v1/client/campaigns/1/jobs page 3: the pages do not advance';
    stopped.plans.set(1, { ...plan, units: [], fetch: [], unchanged: [], unlisted: reason });
    const manifest = buildManifest(stopped, new Date());
    expect(manifest.unlisted_campaigns).toEqual([1]);
    expect(manifest.counts).toMatchObject({ jobs: 0, reports_failed: 0, reports_invalid: 0 });
    expect(manifest.status).toBe('partial');
    const tally = new ClosingTally(stopped.record, stopped.unrecorded);
    expect(tally.add(1, stopped.plans.get(1), stopped.units).outcomes).toBeUndefined();
  });
});

describe('isComplete', () => {
  it('waits for unplanned campaigns, missing units and pending jobs', () => {
    expect(isComplete(records())).toBe(true);
    expect(isComplete(records({ record: { campaign_ids: [1, 2] } }))).toBe(false);
    expect(isComplete(records({ units: [] }))).toBe(false);
    const pending = records();
    const unit = pending.units.get('c1-u0')!;
    unit.jobs[11] = { fp: 'a', outcome: 'pending' };
    expect(isComplete(pending)).toBe(false);
  });
});

describe('buildManifest with unlisted campaigns', () => {
  it('is partial and names the campaigns whose jobs were never listed', () => {
    const manifest = buildManifest(records({ record: { campaign_ids: [1, 2] } }), new Date());
    expect(manifest.unlisted_campaigns).toEqual([2]);
    expect(manifest.status).toBe('partial');
    expect(manifest.counts.campaigns).toBe(2);
  });
});

describe('DtSchema', () => {
  it('takes real calendar dates only', () => {
    expect(DtSchema.safeParse('2026-02-28').success).toBe(true);
    expect(DtSchema.safeParse('2024-02-29').success).toBe(true);
    expect(DtSchema.safeParse('2026-02-31').success).toBe(false);
    expect(DtSchema.safeParse('2026-13-01').success).toBe(false);
    expect(DtSchema.safeParse('2026-1-01').success).toBe(false);
  });
});

describe('buildManifest with requests of failed steps', () => {
  it('counts the requests of steps that left no record', () => {
    const manifest = buildManifest(records({ unrecorded: requests(3, 3) }), new Date());
    expect(manifest.requests).toEqual({ total: 11, retried: 4, by_status: { '200': 7, '429': 4 } });
  });
});
