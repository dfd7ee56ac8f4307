/**
 * An open run's progress from records the steps did not all write (the integration test,
 * test/integration/cli/aws-command.test.ts, follows a real run): a start in progress, a fatal
 * start, a campaign whose listing stopped, a job retried.
 */
import { describe, expect, it } from 'vitest';
import { progressOf } from '../../../functions/cli/aws-runs.js';
import type { RunRecords } from '../../../shared/export/run/run-records.js';
import { emptyRequestCounts } from '../../../shared/export/state/records.js';
import { planRecord, runRecord } from '../../helpers/records.js';

const records = (overrides: Partial<RunRecords> = {}): RunRecords => ({
  record: runRecord(),
  plans: new Map(),
  units: new Map(),
  unrecorded: emptyRequestCounts(),
  ...overrides,
});
const FATAL = { message: 'the run was interrupted while it started, before it listed the campaigns' };

describe('progressOf', () => {
  it('shows a start in progress as starting, without the fatal error it would close with', () => {
    const progress = progressOf(records({ record: runRecord({ starting: true, fatal: FATAL }) }));

    expect(progress).toMatchObject({ phase: 'starting', errors: [] });
  });

  it('names a fatal start as an error; the run is complete (finish-run closes it failed)', () => {
    const fatal = { message: 'API key expired (API_KEY_EXPIRED)', error_code: 'API_KEY_EXPIRED' };

    const progress = progressOf(records({ record: runRecord({ campaign_ids: [], fatal }) }));

    expect(progress).toMatchObject({ phase: 'complete', errors: [`run: ${fatal.message}`] });
  });

  it('counts neither the jobs nor the units of a campaign whose listing stopped, and names it', () => {
    const plan = planRecord({ jobs: 4, units: ['c1-u0'], unlisted: 'page 2 repeated page 1' });

    const progress = progressOf(records({ plans: new Map([[1, plan]]) }));

    expect(progress).toMatchObject({
      phase: 'exporting',
      campaigns: { total: 1, planned: 1 },
      units: { total: 0, done: 0 },
      counts: { jobs: 0 },
      errors: ['campaign 1 not listed: page 2 repeated page 1'],
    });
  });

  it('counts a pending job as retrying and its unit as not done; a job never tried as waiting', () => {
    const fetch = [1, 2, 3].map((job_id) => ({ job_id, fp: `fp${job_id}` }));
    const plan = planRecord({ jobs: 3, units: ['c1-u0'], fetch });
    const unit = {
      unit: 'c1-u0',
      campaign_id: 1,
      attempt: 1,
      jobs: {
        '1': { fp: 'fp1', outcome: 'exported' as const },
        '2': { fp: 'fp2', outcome: 'pending' as const, detail: '503 from the API' },
      },
      staged: [],
      requests: { total: 3, retried: 1, by_status: { '200': 2, '503': 1 } },
    };

    const progress = progressOf(records({ plans: new Map([[1, plan]]), units: new Map([['c1-u0', unit]]) }));

    expect(progress).toMatchObject({
      phase: 'exporting',
      units: { total: 1, done: 0 },
      counts: { jobs: 3, reports_exported: 1 },
      retrying: 1,
      waiting: 1,
      requests: { total: 3, retried: 1, by_status: { '200': 2, '503': 1 } },
      errors: ['job 2 pending: 503 from the API'],
    });
  });
});
