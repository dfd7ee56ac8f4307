import { describe, expect, it } from 'vitest';
import { generateDataset, type SimJob } from '../../simulator/index.js';

const allJobs = (dataset: ReturnType<typeof generateDataset>): SimJob[] =>
  dataset.campaigns.flatMap((c) => c.jobs);

describe('generateDataset', () => {
  it('builds exactly campaigns x jobsPerCampaign jobs with globally unique ascending ids', () => {
    const dataset = generateDataset({ seed: 3, campaigns: 5, jobsPerCampaign: 17 });
    const jobs = allJobs(dataset);
    expect(dataset.campaigns).toHaveLength(5);
    expect(dataset.campaigns.every((c) => c.jobs.length === 17)).toBe(true);
    const ids = jobs.map((j) => j.id);
    expect(new Set(ids).size).toBe(85);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const campaignIds = dataset.campaigns.map((c) => c.id);
    expect(new Set(campaignIds).size).toBe(5);
    for (const campaign of dataset.campaigns) {
      expect(campaign.item.id).toBe(campaign.id);
      for (const job of campaign.jobs) expect([job.campaignId, job.item.id]).toEqual([campaign.id, job.id]);
    }
  });

  it('uses the defaults: 4 campaigns of 25 jobs, 10 unpublished, 1 survey missing, 1 no sections, 1 try-later x2', () => {
    const jobs = allJobs(generateDataset({}));
    const count = (p: (j: SimJob) => boolean) => jobs.filter(p).length;
    expect(jobs).toHaveLength(100);
    expect(count((j) => j.state === 'unpublished')).toBe(10);
    expect(count((j) => j.state === 'survey_missing')).toBe(1);
    expect(count((j) => j.state === 'no_sections')).toBe(1);
    expect(jobs.filter((j) => j.tryLaterAttempts > 0).map((j) => [j.state, j.tryLaterAttempts])).toEqual([
      ['published', 2],
    ]);
    expect(count((j) => j.invalid || j.forbidden)).toBe(0);
  });

  it('gives special jobs disjoint sets, and clamps counts to the jobs there are', () => {
    const jobs = allJobs(
      generateDataset({
        seed: 4,
        campaigns: 1,
        jobsPerCampaign: 10,
        unpublishedShare: 0.3,
        tryLaterJobs: 2,
        invalidReportJobs: 2,
        forbiddenReportJobs: 10,
      }),
    );
    const special = (j: SimJob) =>
      Number(j.state !== 'published') +
      Number(j.tryLaterAttempts > 0) +
      Number(j.invalid) +
      Number(j.forbidden);
    expect(jobs.every((j) => special(j) === 1)).toBe(true);
    expect(jobs.filter((j) => j.forbidden)).toHaveLength(1);
  });

  it('serves list items with id, job_status 1|2, score string|null, published_at and unknown nested fields', () => {
    for (const job of allJobs(generateDataset({ seed: 5 }))) {
      expect([1, 2]).toContain(job.item.job_status);
      expect(
        job.item.job_score_percentage === null || typeof job.item.job_score_percentage === 'string',
      ).toBe(true);
      expect(typeof job.item.updated_at).toBe('string');
      expect('location_name' in job.item).toBe(true);
      expect(job.item.shopper).toBeTypeOf('object');
      expect(job.item.published_at === null).toBe(job.state !== 'published');
    }
  });

  it('is the same for the same seed and differs for another', () => {
    const a = generateDataset({ seed: 6 });
    const b = generateDataset({ seed: 6 });
    const c = generateDataset({ seed: 7 });
    const view = (d: typeof a) => d.campaigns.map((x) => [x.item, x.jobs.map((j) => [j.item, j.state])]);
    expect(view(a)).toEqual(view(b));
    expect(view(a)).not.toEqual(view(c));
  });

  it('publishes, touches, adds and removes jobs', () => {
    const dataset = generateDataset({ seed: 9 });
    const unpublished = allJobs(dataset).find((j) => j.state === 'unpublished')!;
    dataset.publish(unpublished.id);
    expect(dataset.job(unpublished.id)?.state).toBe('published');
    expect(unpublished.item.published_at).not.toBeNull();

    const job = allJobs(dataset).find((j) => j.state === 'published' && j !== unpublished)!;
    const item = structuredClone(job.item);
    const report = JSON.stringify(dataset.reportOf(job.id));
    dataset.touch(job.id);
    expect(job.version).toBe(2);
    expect(job.item).not.toEqual(item);
    expect(JSON.stringify(dataset.reportOf(job.id))).not.toBe(report);

    const campaign = dataset.campaigns[0]!;
    const maxId = Math.max(...allJobs(dataset).map((j) => j.id));
    const added = dataset.addJob(campaign.id);
    expect(added.id).toBeGreaterThan(maxId);
    expect(added.state).toBe('published');
    expect(campaign.jobs.at(-1)).toBe(added);
    dataset.removeJob(added.id);
    expect(dataset.job(added.id)).toBeUndefined();
    expect(campaign.jobs).not.toContain(added);
    expect(() => dataset.addJob(-1)).toThrow(/no campaign/);
    expect(() => dataset.touch(added.id)).toThrow(/no job/);
  });
});
