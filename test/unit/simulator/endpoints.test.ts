import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ReportResponseSchema } from '../../../shared/api/schemas.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { findJob, get, jobsPath, reportPath, V1 } from './helpers.js';

const NOT_FOUND = { error_code: 'NOT_FOUND', message: 'Resource not found.' };

describe('simulator list endpoints (spec 2.1, 4.2, 4.3, 4.5)', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 21, campaigns: 3, jobsPerCampaign: 23 });
  });
  afterAll(() => sim.close());

  it('lists campaigns with the default page 1 and per_page 10', async () => {
    const reply = await get(sim, `${V1}/campaigns`);
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      data: sim.dataset.campaigns.map((c) => c.item),
      meta: { current_page: 1, per_page: 10, total: 3, last_page: 1 },
    });
  });

  it('gives campaign items the named attributes, completed_at null when open, and an unknown field', () => {
    for (const { item } of sim.dataset.campaigns) {
      expect(Object.keys(item)).toEqual(
        expect.arrayContaining([
          'id',
          'campaign_name',
          'campaign_status',
          'start_date',
          'end_date',
          'created_at',
        ]),
      );
      expect('completed_at' in item).toBe(true);
      if (item.campaign_status === 'active') expect(item.completed_at).toBeNull();
      expect(item.client_reference).toBeTypeOf('object');
    }
  });

  it('pages through jobs: 23 jobs at per_page 10 are pages of 10, 10, 3 and page 4 is empty', async () => {
    const campaign = sim.dataset.campaigns[1]!;
    const pages = await Promise.all([1, 2, 3, 4].map((p) => get(sim, jobsPath(campaign.id, `?page=${p}`))));
    const sizes = pages.map((p) => (p.json as { data: unknown[] }).data.length);
    expect(sizes).toEqual([10, 10, 3, 0]);
    for (const [i, page] of pages.entries()) {
      expect((page.json as { meta: unknown }).meta).toEqual({
        current_page: i + 1,
        per_page: 10,
        total: 23,
        last_page: 3,
      });
    }
    const ids = pages.flatMap((p) => (p.json as { data: Array<{ id: number }> }).data.map((j) => j.id));
    expect(ids).toEqual(campaign.jobs.map((j) => j.id));
  });

  it.each([20, 50, 100])('accepts per_page=%i', async (perPage) => {
    const campaign = sim.dataset.campaigns[0]!;
    const reply = await get(sim, jobsPath(campaign.id, `?per_page=${perPage}&page=1`));
    const body = reply.json as { data: unknown[]; meta: { per_page: number; last_page: number } };
    expect(reply.status).toBe(200);
    expect(body.data).toHaveLength(Math.min(perPage, 23));
    expect(body.meta.per_page).toBe(perPage);
    expect(body.meta.last_page).toBe(Math.ceil(23 / perPage));
  });

  it('accepts and ignores sort parameters and unknown query parameters', async () => {
    const plain = await get(sim, `${V1}/campaigns`);
    const sorted = await get(sim, `${V1}/campaigns?sort=campaign_name&direction=desc&order_by=id&foo=bar`);
    expect(sorted.status).toBe(200);
    expect(sorted.json).toEqual(plain.json);
  });

  it.each([
    ['page=0', { page: ['The page field must be at least 1.'] }],
    ['page=-3', { page: ['The page field must be at least 1.'] }],
    ['page=1.5', { page: ['The page field must be an integer.'] }],
    ['page=abc', { page: ['The page field must be an integer.'] }],
    ['page=', { page: ['The page field must be an integer.'] }],
    ['per_page=15', { per_page: ['The selected per page is invalid.'] }],
    ['per_page=1000', { per_page: ['The selected per page is invalid.'] }],
    [
      'per_page=ten',
      { per_page: ['The per page field must be an integer.', 'The selected per page is invalid.'] },
    ],
    [
      'page=0&per_page=5',
      { page: ['The page field must be at least 1.'], per_page: ['The selected per page is invalid.'] },
    ],
  ])('answers %s with 422 VALIDATION_FAILED and errors', async (query, errors) => {
    const campaign = sim.dataset.campaigns[0]!;
    for (const path of [`${V1}/campaigns?${query}`, jobsPath(campaign.id, `?${query}`)]) {
      const reply = await get(sim, path);
      expect(reply.status).toBe(422);
      expect(reply.json).toEqual({
        error_code: 'VALIDATION_FAILED',
        message: 'The given data was invalid.',
        errors,
      });
    }
  });

  it('answers jobs of an unknown or non-numeric campaign with 404 NOT_FOUND', async () => {
    for (const id of ['999999999', 'abc', '-1']) {
      const reply = await get(sim, `${V1}/campaigns/${id}/jobs`);
      expect([reply.status, reply.json]).toEqual([404, NOT_FOUND]);
    }
  });

  it('answers an unknown path with 404 and a non-GET method with 405', async () => {
    const unknown = await get(sim, `${V1}/nothing`);
    const post = await get(sim, `${V1}/campaigns`, { method: 'POST' });
    expect([unknown.status, unknown.json]).toEqual([404, NOT_FOUND]);
    expect(post.status).toBe(405);
  });
});

describe('simulator Get Report (spec 4.4, 7)', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({
      seed: 22,
      campaigns: 2,
      jobsPerCampaign: 20,
      tryLaterJobs: 2,
      tryLaterAttempts: 2,
      invalidReportJobs: 2,
      forbiddenReportJobs: 1,
    });
  });
  afterAll(() => sim.close());
  beforeEach(() => sim.resetStats());

  const plain = (job: Simulator['dataset']['campaigns'][number]['jobs'][number]) =>
    job.state === 'published' && !job.invalid && !job.forbidden && job.tryLaterAttempts === 0;

  it('answers a published job with its report, ids matching the path', async () => {
    const job = findJob(sim, plain);
    const reply = await get(sim, reportPath(job.campaignId, job.id));
    const data = (reply.json as { data: { job: { id: number; campaign: { id: number } } } }).data;
    expect(reply.status).toBe(200);
    expect(data).toEqual(sim.dataset.reportOf(job.id));
    expect([data.job.id, data.job.campaign.id]).toEqual([job.id, job.campaignId]);
  });

  it.each([
    ['unpublished', 'The report is not available because the job has not been published yet.'],
    ['survey_missing', 'The report is not available because the survey for this job was not found.'],
    [
      'no_sections',
      'The report is not available because survey sections are not configured for this survey.',
    ],
  ] as const)('answers a %s job with 409 REPORT_NOT_READY and its message', async (state, message) => {
    const job = findJob(sim, (j) => j.state === state);
    const reply = await get(sim, reportPath(job.campaignId, job.id));
    expect([reply.status, reply.json]).toEqual([409, { error_code: 'REPORT_NOT_READY', message }]);
  });

  it('answers "try again later" for the first N requests of a try-later job, then the report', async () => {
    const job = findJob(sim, (j) => j.tryLaterAttempts === 2);
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await get(sim, reportPath(job.campaignId, job.id)));
    const tryLater = {
      error_code: 'REPORT_NOT_READY',
      message: 'The report is not available, try again later.',
    };
    expect(replies.map((r) => r.status)).toEqual([409, 409, 200]);
    expect(replies[0]!.json).toEqual(tryLater);
    expect(sim.stats.reportRequestsByJob.get(job.id)).toBe(3);
  });

  it('answers an invalid job with a 200 whose report fails ReportResponseSchema', async () => {
    const invalid = sim.dataset.campaigns.flatMap((c) => c.jobs).filter((j) => j.invalid);
    expect(invalid).toHaveLength(2);
    for (const job of invalid) {
      const reply = await get(sim, reportPath(job.campaignId, job.id));
      expect(reply.status).toBe(200);
      expect(ReportResponseSchema.safeParse(reply.json).success).toBe(false);
    }
  });

  it('answers a forbidden job with 403 FORBIDDEN for the valid key', async () => {
    const job = findJob(sim, (j) => j.forbidden);
    const reply = await get(sim, reportPath(job.campaignId, job.id));
    expect([reply.status, reply.json]).toEqual([
      403,
      { error_code: 'FORBIDDEN', message: 'You do not have access to this resource.' },
    ]);
  });

  it('answers an unknown job, a job of another campaign, and a non-numeric id with 404', async () => {
    const first = sim.dataset.campaigns[0]!;
    const otherJob = sim.dataset.campaigns[1]!.jobs[0]!;
    for (const path of [
      reportPath(first.id, 1),
      reportPath(first.id, otherJob.id),
      `${V1}/campaigns/${first.id}/jobs/x1/report`,
      reportPath(424242, otherJob.id),
    ]) {
      const reply = await get(sim, path);
      expect([reply.status, reply.json]).toEqual([404, NOT_FOUND]);
    }
  });

  it('follows dataset changes: publish, touch, addJob, removeJob', async () => {
    const unpublished = findJob(sim, (j) => j.state === 'unpublished');
    sim.dataset.publish(unpublished.id);
    expect((await get(sim, reportPath(unpublished.campaignId, unpublished.id))).status).toBe(200);

    const job = findJob(sim, plain);
    const before = (await get(sim, reportPath(job.campaignId, job.id))).json;
    const itemBefore = structuredClone(job.item);
    sim.dataset.touch(job.id);
    const after = (await get(sim, reportPath(job.campaignId, job.id))).json;
    expect(after).not.toEqual(before);
    expect(job.item.updated_at).not.toEqual(itemBefore.updated_at);

    const added = sim.dataset.addJob(job.campaignId);
    const listed = await get(sim, jobsPath(job.campaignId, '?per_page=100'));
    expect((listed.json as { data: Array<{ id: number }> }).data.at(-1)?.id).toBe(added.id);
    expect((await get(sim, reportPath(added.campaignId, added.id))).status).toBe(200);

    sim.dataset.removeJob(added.id);
    expect((await get(sim, reportPath(added.campaignId, added.id))).status).toBe(404);
    const relisted = await get(sim, jobsPath(job.campaignId, '?per_page=100'));
    expect((relisted.json as { data: Array<{ id: number }> }).data.map((j) => j.id)).not.toContain(added.id);
  });

  it('counts requests by endpoint and status', async () => {
    const job = findJob(sim, plain);
    await get(sim, `${V1}/verify`);
    await get(sim, `${V1}/campaigns`);
    await get(sim, jobsPath(job.campaignId));
    await get(sim, reportPath(job.campaignId, job.id));
    await get(sim, `${V1}/campaigns?page=0`);
    expect(sim.stats.total).toBe(5);
    expect(sim.stats.byEndpoint).toEqual({ verify: 1, campaigns: 2, jobs: 1, report: 1 });
    expect(sim.stats.byStatus).toEqual({ '200': 4, '422': 1 });
    expect(sim.stats.okTimes).toHaveLength(4);
  });
});
