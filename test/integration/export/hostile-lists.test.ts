/**
 * Whole runs against list endpoints that misbehave on purpose (issue 8): every listed item ends
 * in a count, a listing that would never end stops with a reason naming the endpoint, and a
 * person is told on the log.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { onePage, recordingLog, runAgainst, scriptedApi } from '../../helpers/scripted-api.js';
import type { Reply } from '../api/server.js';

const JOBS_PATH = '/integration/v1/client/campaigns/1/jobs';

/** A page with a meta of its own making. */
const pageOf = (data: unknown[], meta: Record<string, number>): Reply => ({ body: { data, meta } });

async function quarantined(out: string): Promise<Record<string, unknown>[]> {
  const files: Record<string, unknown>[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else files.push(JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>);
    }
  };
  await walk(join(out, 'quarantine'));
  return files;
}

describe('a run against hostile lists', () => {
  it('counts a campaign item whose id is a string as invalid, quarantines it, says so, and ends partial', async () => {
    const server = await scriptedApi({
      campaigns: () => onePage([{ id: 1 }, { id: '41', campaign_name: 'X' }]),
    });
    const log = recordingLog();

    const { manifest, out } = await runAgainst(server, { log });

    expect(manifest.status).toBe('partial');
    expect(manifest.counts).toMatchObject({ campaigns: 2, campaigns_invalid: 1, reports_exported: 2 });
    const [kept] = await quarantined(out);
    expect(kept).toMatchObject({ name: 'campaigns-item-1', body: { id: '41', campaign_name: 'X' } });
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        message: 'campaign item quarantined',
        fields: expect.objectContaining({ issue: expect.stringMatching(/^id: /) }),
      }),
    );
  });

  it('stops a jobs listing whose last_page grows with every page: campaign unlisted, run partial, it ends', async () => {
    const server = await scriptedApi({
      campaignIds: [1, 2],
      jobs: (campaignId, page) =>
        campaignId === 2
          ? onePage([{ id: 21 }])
          : pageOf(
              Array.from({ length: 100 }, (_, i) => ({ id: page * 100 + i })),
              { current_page: page, per_page: 100, total: 100 * (page + 1), last_page: page + 1 },
            ),
    });
    const log = recordingLog();

    const { manifest } = await runAgainst(server, { log });

    expect(manifest.status).toBe('partial');
    expect(manifest.unlisted_campaigns).toEqual([1]);
    // Campaign 2 is whole; campaign 1's jobs are uncounted, none fetched.
    expect(manifest.counts).toMatchObject({ jobs: 1, reports_exported: 1 });
    const jobPages = server.requests.filter((r) => r.path === JOBS_PATH);
    expect(jobPages.length).toBeLessThan(10);
    const warning = log.lines.find((l) => l.message === 'listing jobs stopped');
    expect(warning?.fields?.error).toMatch(`GET ${JOBS_PATH} page`);
    expect(warning?.fields?.error).toMatch(/the list grew from 200 to \d+ items while it was read/);
  });

  it('fails the run when the campaign pages echo the request with the same item and last_page 1,000,000', async () => {
    const server = await scriptedApi({
      campaigns: (page) =>
        pageOf([{ id: 1 }], { current_page: page, per_page: 100, total: 100_000_000, last_page: 1_000_000 }),
    });

    const { manifest } = await runAgainst(server);

    expect(manifest.status).toBe('failed');
    expect(manifest.error?.message).toMatch(
      /GET \/integration\/v1\/client\/campaigns page 3: 2 pages in a row brought no item not seen before/,
    );
    expect(server.requests.filter((r) => r.path.endsWith('/campaigns'))).toHaveLength(3);
  });

  it('fails the run at once when the campaigns meta claims pages its total does not hold', async () => {
    const server = await scriptedApi({
      campaigns: (page) =>
        pageOf([{ id: page }], { current_page: page, per_page: 100, total: 1, last_page: 1_000_000 }),
    });

    const { manifest } = await runAgainst(server);

    expect(manifest.status).toBe('failed');
    expect(manifest.error?.message).toMatch(/page 1: meta.last_page 1000000 does not match meta.total 1/);
  });

  it('counts the same job id twice with other content as a duplicate, keeps the first, quarantines the second', async () => {
    const server = await scriptedApi({
      jobs: (_campaign, page) =>
        pageOf(
          page === 1 ? [{ id: 11, job_status: 1 }, { id: 12 }] : [{ id: 11, job_status: 2 }, { id: 13 }],
          {
            current_page: page,
            per_page: 2,
            total: 4,
            last_page: 2,
          },
        ),
    });

    const { manifest, out } = await runAgainst(server);

    expect(manifest.counts).toMatchObject({ jobs: 3, duplicates: 1, reports_exported: 3 });
    expect(manifest.status).toBe('succeeded');
    const [kept] = await quarantined(out);
    expect(kept).toMatchObject({
      name: 'campaign-1-jobs-item-2',
      body: { id: 11, job_status: 2 },
      issues: [{ path: 'id', code: 'duplicate' }],
    });
    expect(server.requests.filter((r) => r.path.endsWith('/jobs/11/report'))).toHaveLength(1);
  });

  it('leaves a campaign whose jobs page is larger than --max-body-mb unlisted, and goes on', async () => {
    const big = Array.from({ length: 100 }, (_, i) => ({ id: i + 1, notes: 'x'.repeat(20_000) }));
    const server = await scriptedApi({
      campaignIds: [1, 2],
      jobs: (campaignId) => onePage(campaignId === 1 ? big : [{ id: 21 }]),
    });
    const log = recordingLog();

    const { manifest } = await runAgainst(server, { log, maxBodyMiB: 1 });

    expect(manifest.status).toBe('partial');
    expect(manifest.unlisted_campaigns).toEqual([1]);
    expect(manifest.counts).toMatchObject({ jobs: 1, reports_exported: 1 });
    const warning = log.lines.find((l) => l.message === 'listing jobs stopped');
    expect(warning?.fields?.error).toMatch(
      `GET ${JOBS_PATH}?page=1&per_page=100: answer of 1.9 MiB announced by Content-Length, larger than 1 MiB`,
    );
  });

  it('quarantines a campaign item nested too deep to write as text, with no raw line, and ends partial', async () => {
    // Written out by hand: JSON.stringify itself cannot write it.
    const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
    const meta = '{"current_page":1,"per_page":100,"total":2,"last_page":1}';
    const server = await scriptedApi({
      campaigns: () => ({ body: `{"data":[{"id":1},{"id":2,"extra":${deep}}],"meta":${meta}}` }),
    });

    const { manifest, out } = await runAgainst(server);

    expect(manifest.status).toBe('partial');
    expect(manifest.counts).toMatchObject({ campaigns: 2, campaigns_invalid: 1, reports_exported: 2 });
    const [kept] = await quarantined(out);
    expect(kept).toMatchObject({
      name: 'campaigns-item-1',
      body_format: 'json_text',
      issues: [{ code: 'too_deep' }],
    });
    expect(kept?.body).toBe(`{"id":2,"extra":${deep}}`);
  });
});
