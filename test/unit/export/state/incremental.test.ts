import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  applyOutcomes,
  type CampaignState,
  campaignsWithState,
  forgetRunsBefore,
  loadCampaignState,
  planJobs,
  saveOutcomes,
} from '../../../../shared/export/state/incremental.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { LocalStorage } from '../../../../shared/storage/local.js';

const state = (jobs: CampaignState['jobs']): CampaignState => ({ campaign_id: 7, jobs });

describe('planJobs', () => {
  const previous = state({
    1: { fp: 'a', outcome: 'exported', run_id: 'r1' },
    2: { fp: 'b', outcome: 'exported', run_id: 'r1' },
    3: { fp: 'c', outcome: 'not_ready', run_id: 'r1' },
    4: { fp: 'd', outcome: 'not_found', run_id: 'r1' },
    5: { fp: 'e', outcome: 'failed', run_id: 'r1' },
    6: { fp: 'f', outcome: 'invalid', run_id: 'r1' },
  });
  const listed = [
    { job_id: 1, fp: 'a' },
    { job_id: 2, fp: 'b2' },
    { job_id: 3, fp: 'c' },
    { job_id: 4, fp: 'd' },
    { job_id: 5, fp: 'e' },
    { job_id: 6, fp: 'f' },
    { job_id: 8, fp: 'new' },
  ];

  it('skips only jobs exported before whose list item is unchanged', () => {
    const plan = planJobs(previous, listed, 'incremental');
    expect(plan.unchanged.map((j) => j.job_id)).toEqual([1]);
    expect(plan.fetch.map((j) => j.job_id)).toEqual([2, 3, 4, 5, 6, 8]);
  });

  it('fetches every listed job in full mode', () => {
    const plan = planJobs(previous, listed, 'full');
    expect(plan.unchanged).toEqual([]);
    expect(plan.fetch).toHaveLength(listed.length);
  });
});

describe('applyOutcomes', () => {
  it('records the run, keeps entries of later runs and drops jobs no longer listed', () => {
    const before = state({
      1: { fp: 'a', outcome: 'exported', run_id: 'r1' },
      2: { fp: 'b', outcome: 'exported', run_id: 'r9' },
      3: { fp: 'c', outcome: 'exported', run_id: 'r1' },
    });
    const after = applyOutcomes(
      before,
      'r5',
      [
        { job_id: 1, fp: 'a2', outcome: 'not_ready' },
        { job_id: 2, fp: 'b2', outcome: 'exported' },
      ],
      new Set([1, 2]),
    );
    expect(after.jobs).toEqual({
      1: { fp: 'a2', outcome: 'not_ready', run_id: 'r5' },
      2: { fp: 'b', outcome: 'exported', run_id: 'r9' },
    });
  });
});

describe('saveOutcomes', () => {
  it('loses no update when two runs record the same campaign at once', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'state-')));
    const listedA = new Set([1, 2]);
    const listedB = new Set([1, 2]);
    await Promise.all([
      saveOutcomes(storage, 7, 'r1', [{ job_id: 1, fp: 'x', outcome: 'exported' }], listedA),
      saveOutcomes(storage, 7, 'r2', [{ job_id: 2, fp: 'y', outcome: 'not_ready' }], listedB),
    ]);
    const { state: saved, etag } = await loadCampaignState(storage, 7);
    expect(etag).toBeDefined();
    expect(saved.jobs[1]).toEqual({ fp: 'x', outcome: 'exported', run_id: 'r1' });
    expect(saved.jobs[2]).toEqual({ fp: 'y', outcome: 'not_ready', run_id: 'r2' });
    expect(await storage.get(STATE_KEYS.campaign(7))).toBeDefined();
  });

  it('starts from an empty state when the campaign has none', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'state-')));
    expect(await loadCampaignState(storage, 3)).toEqual({
      state: { campaign_id: 3, jobs: {} },
      etag: undefined,
    });
  });
});

describe('forgetRunsBefore (a format switch)', () => {
  it("drops the entries of earlier runs in every campaign's state, keeps the switch's and later ones, and changes nothing again", async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'state-')));
    await saveOutcomes(storage, 7, 'r1', [{ job_id: 1, fp: 'a', outcome: 'exported' }], new Set([1]));
    await saveOutcomes(storage, 8, 'r1', [{ job_id: 2, fp: 'b', outcome: 'exported' }], new Set([2]));
    await saveOutcomes(storage, 8, 'r3', [{ job_id: 3, fp: 'c', outcome: 'exported' }], new Set([3]));
    expect((await campaignsWithState(storage)).sort()).toEqual([7, 8]);

    for (const id of await campaignsWithState(storage)) await forgetRunsBefore(storage, id, 'r2');
    expect((await loadCampaignState(storage, 7)).state.jobs).toEqual({});
    // r3 came after the switch: its entry stands (r1's went with the campaign's listing by r3).
    expect((await loadCampaignState(storage, 8)).state.jobs).toEqual({
      3: { fp: 'c', outcome: 'exported', run_id: 'r3' },
    });
    const { etag } = await loadCampaignState(storage, 8);
    await forgetRunsBefore(storage, 8, 'r2');
    expect((await loadCampaignState(storage, 8)).etag).toBe(etag);
  });
});
