/**
 * An open run's progress from records the steps did not all write (the integration test,
 * test/integration/cli/aws-command.test.ts, follows a real run): a start in progress, a fatal
 * start, a campaign whose listing stopped, a job retried.
 */
import { describe, expect, it } from 'vitest';
import { progressInStorage, progressOf } from '../../../functions/cli/aws-runs.js';
import type { RunRecords } from '../../../shared/export/run/run-records.js';
import { emptyRequestCounts, encodeRecord, type UnitSummary } from '../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { tempDir } from '../../helpers/export.js';
import { planRecord, runRecord, TEST_RUN_ID } from '../../helpers/records.js';

const records = (overrides: Partial<RunRecords> = {}): RunRecords => ({
  record: runRecord(),
  plans: new Map(),
  units: new Map(),
  unrecorded: emptyRequestCounts(),
  ...overrides,
});
const FATAL = { message: 'the run was interrupted while it started, before it listed the campaigns' };

describe('progressOf', () => {
  it('shows a start in progress as starting, without the fatal error it would close with', async () => {
    const progress = await progressOf(records({ record: runRecord({ starting: true, fatal: FATAL }) }));

    expect(progress).toMatchObject({ phase: 'starting', errors: [] });
  });

  it('names a fatal start as an error; the run is complete (finish-run closes it failed)', async () => {
    const fatal = { message: 'API key expired (API_KEY_EXPIRED)', error_code: 'API_KEY_EXPIRED' };

    const progress = await progressOf(records({ record: runRecord({ campaign_ids: [], fatal }) }));

    expect(progress).toMatchObject({ phase: 'complete', errors: [`run: ${fatal.message}`] });
  });

  it('counts neither the jobs nor the units of a campaign whose listing stopped, and names it', async () => {
    const plan = planRecord({ jobs: 4, units: ['c1-u0'], unlisted: 'page 2 repeated page 1' });

    const progress = await progressOf(records({ plans: new Map([[1, plan]]) }));

    expect(progress).toMatchObject({
      phase: 'exporting',
      campaigns: { total: 1, planned: 1 },
      units: { total: 0, done: 0 },
      counts: { jobs: 0 },
      errors: ['campaign 1 not listed: page 2 repeated page 1'],
    });
  });

  it('counts a pending job as retrying and its unit as not done; a job never tried as waiting', async () => {
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

    const progress = await progressOf(
      records({ plans: new Map([[1, plan]]), units: new Map([['c1-u0', unit]]) }),
    );

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

describe('progressInStorage', () => {
  /** Campaigns 1-4 of a run, two units of three jobs each; one job of each unit failed; campaign 4 not planned. */
  function run(): RunRecords {
    const campaigns = [1, 2, 3, 4];
    const plans = new Map<number, ReturnType<typeof planRecord>>();
    const units = new Map<string, UnitSummary>();
    for (const campaign of campaigns.slice(0, 3)) {
      const names = [`c${campaign}-u0`, `c${campaign}-u1`];
      const fetch = names.flatMap((_, u) =>
        [0, 1, 2].map((i) => ({ job_id: campaign * 100 + u * 10 + i, fp: 'fp' })),
      );
      plans.set(campaign, planRecord({ campaign_id: campaign, jobs: fetch.length, units: names, fetch }));
      names.forEach((name, u) => {
        const jobs: UnitSummary['jobs'] = {};
        for (const i of [0, 1, 2])
          jobs[campaign * 100 + u * 10 + i] =
            i === 2 ? { fp: 'fp', outcome: 'failed', detail: '500' } : { fp: 'fp', outcome: 'exported' };
        units.set(name, {
          unit: name,
          campaign_id: campaign,
          attempt: 1,
          jobs,
          staged: [],
          requests: { total: 3, retried: 0, by_status: { '200': 2, '500': 1 } },
        });
      });
    }
    return { record: runRecord({ campaign_ids: campaigns }), plans, units, unrecorded: emptyRequestCounts() };
  }

  /** The storage, logging each record read: `plan <campaign>` or `unit <name>`. */
  async function stored(records: RunRecords): Promise<{ storage: Storage; reads: string[] }> {
    const local: Storage = new LocalStorage(await tempDir('aws-progress'));
    await local.put(STATE_KEYS.runRecord(TEST_RUN_ID), encodeRecord(records.record));
    for (const [campaign, plan] of records.plans)
      await local.put(STATE_KEYS.plan(TEST_RUN_ID, campaign), encodeRecord(plan));
    for (const [name, unit] of records.units)
      await local.put(STATE_KEYS.unit(TEST_RUN_ID, name), encodeRecord(unit));
    const reads: string[] = [];
    const storage: Storage = {
      location: local.location,
      put: (key, body, options) => local.put(key, body, options),
      putStream: (key, chunks, options) => local.putStream(key, chunks, options),
      getStream: (key) => local.getStream(key),
      list: (prefix) => local.list(prefix),
      delete: (keys) => local.delete(keys),
      stats: () => local.stats(),
      get: (key) => {
        const plan = /\/plans\/(\d+)\.json$/.exec(key);
        const unit = /\/units\/(.+)\.json$/.exec(key);
        if (plan) reads.push(`plan ${plan[1]}`);
        if (unit) reads.push(`unit ${unit[1]}`);
        return local.get(key);
      },
    };
    return { storage, reads };
  }

  it("tallies what the records in memory give, reading one campaign's records at a time, and keeps the first errors only", async () => {
    const records = run();
    const { storage, reads } = await stored(records);

    const progress = await progressInStorage(storage, TEST_RUN_ID);

    expect(progress).toEqual(await progressOf(records));
    expect(progress).toMatchObject({
      phase: 'planning',
      campaigns: { total: 4, planned: 3 },
      units: { total: 6, done: 6 },
      counts: { jobs: 18, reports_exported: 12, reports_failed: 6 },
    });
    expect(progress?.errors).toHaveLength(6);
    expect(progress?.errors.at(-1)).toBe('… 1 more');
    // A campaign's plan, then its units, before the next campaign's plan: one campaign in hand.
    const order = reads.map((read) => (read.startsWith('plan') ? read : `unit of ${read.slice(6, 7)}`));
    expect(order).toEqual([
      'plan 1',
      'unit of 1',
      'unit of 1',
      'plan 2',
      'unit of 2',
      'unit of 2',
      'plan 3',
      'unit of 3',
      'unit of 3',
    ]);
  });

  it('says nothing of a run that has no records', async () => {
    const { storage } = await stored({ ...run(), plans: new Map(), units: new Map() });
    await storage.delete([STATE_KEYS.runRecord(TEST_RUN_ID)]);

    expect(await progressInStorage(storage, TEST_RUN_ID)).toBeUndefined();
  });
});
