/**
 * plan-campaign's listing checkpointed and handed on (issue 31): a campaign of 25 pages listed
 * under a deadline that passes after a few pages, against the API simulator and S3 on fauxqs.
 * Time is virtual: every jobs page the simulator serves takes PAGE_MS of it, so the deadline
 * falls after a known page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import type { RequestEvent } from '../../../shared/api/client.js';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { listingStopMs, PAGES_PER_PIECE, PLAN_WRAP_UP_MS } from '../../../shared/export/run/job-listing.js';
import { type PlanStep, planCampaign, planCampaignStep } from '../../../shared/export/run/plan-campaign.js';
import { startRun } from '../../../shared/export/run/start-run.js';
import { runStep } from '../../../shared/export/run/step.js';
import { MAX_TIMEOUT_SHARE, REQUEST_WORST_MS } from '../../../shared/export/run/time-budget.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  type PlanMessage,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  RequestCountsSchema,
} from '../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import { listAll, type Storage } from '../../../shared/storage/storage.js';
import { tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { SCRIPTED_KEY, scriptedApi } from '../../helpers/scripted-api.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

/** 2,450 jobs: 25 pages of 100 (EXPORT_PER_PAGE), the last one half full. */
const JOBS = 2_450;
const PAGES = 25;
const UNIT_SIZE = 100;
/** plan-campaign's timeout. */
const TIMEOUT_MS = 300_000;
/** A slow API: each page takes 10 s. A delivery starts no page after 55 s, so it reads 6 pages. */
const PAGE_MS = 10_000;
const PAGES_PER_DELIVERY = Math.floor(listingStopMs(TIMEOUT_MS) / PAGE_MS) + 1;
const BUCKET = 'plan-handover';

let simulator: Simulator;
let aws: LocalAws;
let campaignId: number;
let prefixes = 0;

beforeAll(async () => {
  simulator = await startSimulator({ seed: 31, campaigns: 1, jobsPerCampaign: JOBS, reportSize: 'tiny' });
  aws = await startLocalAws();
  await aws.createBucket(BUCKET);
  campaignId = simulator.dataset.campaigns[0]!.id;
});
afterAll(async () => {
  await simulator?.close();
  await aws?.close();
});

/** A run on a prefix of its own, with a virtual clock that each jobs page moves on by `pageMs`. */
async function setUp(pageMs = PAGE_MS) {
  const clock = { ms: 0 };
  const pages: number[] = [];
  /** When each page in `pages` started, on the clock. */
  const pageStarts: number[] = [];
  const onRequest = (event: RequestEvent) => {
    const page = /\/jobs\?page=(\d+)/.exec(event.path);
    if (!page) return;
    pages.push(Number(page[1]));
    pageStarts.push(clock.ms);
    clock.ms += pageMs;
  };
  const storage: Storage = new S3Storage({
    bucket: BUCKET,
    prefix: `t${prefixes++}/`,
    client: aws.s3Client(),
  });
  const base = cliDeps({
    baseUrl: simulator.url,
    apiKey: simulator.keys.valid,
    out: '/unused',
    concurrency: 4,
    maxRate: 10_000,
    log: silentLog,
    onRequest,
  });
  const deps: ExportDeps = { ...base, storage };
  const { run } = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
  const message: PlanMessage = { ...run, campaign_id: campaignId };
  /** One delivery, as the handler makes it: its deadline `timeoutMs` after it starts (null: none). */
  const deliver = async (timeoutMs: number | null = TIMEOUT_MS): Promise<PlanStep> => {
    const startedAt = clock.ms;
    const deadline =
      timeoutMs === null ? undefined : { remainingMs: () => startedAt + timeoutMs - clock.ms, timeoutMs };
    const step = await runStep(deps, run.run_id, (d) =>
      planCampaignStep(d, message, { unitSize: UNIT_SIZE, deadline }),
    );
    if (!step.ran) throw new Error('the run was closed');
    return step.value;
  };
  const storedPlans = () => listAll(storage, STATE_KEYS.plansPrefix(run.run_id));
  const plan = async (): Promise<PlanRecord> => {
    const key = STATE_KEYS.plan(run.run_id, campaignId);
    return parseRecord(PlanRecordSchema, (await storage.get(key))!.body, key);
  };
  /** Requests of deliveries that handed on (or failed), kept for the manifest. */
  const unrecorded = async () => {
    let sum = emptyRequestCounts();
    for (const key of await listAll(storage, STATE_KEYS.requestsPrefix(run.run_id)))
      sum = addRequestCounts(sum, parseRecord(RequestCountsSchema, (await storage.get(key))!.body, key));
    return sum;
  };
  return { deps, storage, run, message, pages, pageStarts, clock, deliver, storedPlans, plan, unrecorded };
}

/** What a plan says about the campaign, without what differs by delivery (file names, requests). */
const planned = ({ staged: _staged, requests: _requests, ...rest }: PlanRecord) => rest;
const rowsOf = (record: PlanRecord, format: 'parquet' | 'jsonl') =>
  record.staged
    .filter((f) => f.format === format && f.table_or_entity === 'jobs')
    .reduce((n, f) => n + f.rows, 0);

describe('a campaign listing longer than one invocation', () => {
  it('hands on before the deadline and resumes from the page reached: each page asked once, the plan as one listing makes it', async () => {
    const bed = await setUp();

    const steps: PlanStep[] = [];
    for (let i = 0; i < 10 && steps.at(-1)?.kind !== 'planned'; i++) steps.push(await bed.deliver());

    expect(PAGES_PER_DELIVERY).toBe(6);
    expect(steps.map((s) => (s.kind === 'handed-on' ? s.nextPage : s.kind))).toEqual([
      7,
      13,
      19,
      25,
      'planned',
    ]);
    // Every page of the campaign asked once across the four deliveries: none listed again.
    expect(bed.pages).toEqual(Array.from({ length: PAGES }, (_, i) => i + 1));
    const resumed = await bed.plan();

    const single = await setUp();
    const whole = await planCampaign(single.deps, single.message, UNIT_SIZE);

    expect(single.pages).toEqual(bed.pages);
    expect(planned(resumed)).toEqual(planned(whole.record));
    expect(resumed).toMatchObject({ jobs: JOBS, duplicates: 0, jobs_invalid: 0, units: expect.any(Array) });
    expect(resumed.units).toHaveLength(Math.ceil(JOBS / UNIT_SIZE));
    // The jobs snapshot is whole: every listed job once in the staged rows and raw lines.
    expect(rowsOf(resumed, 'parquet')).toBe(JOBS);
    expect(rowsOf(resumed, 'jsonl')).toBe(JOBS);
    for (const file of resumed.staged) expect(await bed.storage.get(file.key)).toBeDefined();
    // The manifest counts each page request once: the last delivery's in the plan, the others' kept apart.
    const total = addRequestCounts(resumed.requests, await bed.unrecorded());
    expect(total).toEqual(whole.record.requests);
    expect(total.total).toBe(PAGES);
    // Four hand-ons, one piece each; the uninterrupted listing wrote none (fewer than PAGES_PER_PIECE pages).
    expect(PAGES).toBeLessThan(PAGES_PER_PIECE);
    expect(await listAll(bed.storage, STATE_KEYS.listingPrefix(bed.run.run_id, campaignId))).toHaveLength(4);
    expect(await listAll(single.storage, STATE_KEYS.listingPrefix(single.run.run_id, campaignId))).toEqual(
      [],
    );
  });

  it.each([PAGE_MS, 30_000, REQUEST_WORST_MS])(
    'starts no page late enough to pass half its timeout, and none stops early (pages of %i ms)',
    async (pageMs) => {
      const bed = await setUp(pageMs);
      const stopMs = listingStopMs(TIMEOUT_MS);
      let last: PlanStep | undefined;
      for (let i = 0; i <= PAGES && last?.kind !== 'planned'; i++) {
        const startedAt = bed.clock.ms;
        const firstPage = bed.pageStarts.length;
        last = await bed.deliver();
        const starts = bed.pageStarts.slice(firstPage).map((at) => at - startedAt);
        const lastStart = starts.at(-1) ?? 0;
        // A page is started only before the stop (the first one always): with the longest a page
        // may take and the wrap-up after it, the delivery ends within half its timeout.
        if (starts.length > 1) expect(lastStart).toBeLessThan(stopMs);
        expect(lastStart + REQUEST_WORST_MS + PLAN_WRAP_UP_MS).toBeLessThanOrEqual(
          MAX_TIMEOUT_SHARE * TIMEOUT_MS,
        );
        // And it hands on only once the stop has come: no delivery gives up time it had.
        if (last.kind === 'handed-on') expect(bed.clock.ms - startedAt).toBeGreaterThanOrEqual(stopMs);
      }
      expect(last?.kind).toBe('planned');
      expect(bed.pages).toEqual(Array.from({ length: PAGES }, (_, i) => i + 1));
    },
  );

  it('sends the very same units and writes one plan when the resumed message is delivered twice at once, and again later', async () => {
    const bed = await setUp();
    const first = await bed.deliver();
    expect(first).toMatchObject({ kind: 'handed-on', nextPage: PAGES_PER_DELIVERY + 1 });

    // The continuation delivered twice at once, each with a whole invocation ahead of it.
    const [a, b] = await Promise.all([bed.deliver(null), bed.deliver(null)]);
    const pagesBefore = bed.pages.length;
    // And once more, hours later (SQS redelivered the original after its visibility timeout).
    const late = await bed.deliver();

    if (a.kind !== 'planned' || b.kind !== 'planned' || late.kind !== 'planned')
      throw new Error('not planned');
    const stored = await bed.plan();
    expect(a.record).toEqual(stored);
    expect(b.record).toEqual(stored);
    expect(late.record).toEqual(stored);
    expect(b.units).toEqual(a.units);
    expect(late.units).toEqual(a.units);
    expect(await bed.storedPlans()).toHaveLength(1);
    // The late delivery found the plan: no page asked again.
    expect(bed.pages.length).toBe(pagesBefore);
    // Both resumed after page 6: pages 1–6 were asked once.
    expect(bed.pages.filter((p) => p <= PAGES_PER_DELIVERY)).toEqual([1, 2, 3, 4, 5, 6]);
    // The stored plan is a whole listing: built on the piece, whichever delivery won.
    const single = await setUp();
    const whole = await planCampaign(single.deps, single.message, UNIT_SIZE);
    expect(planned(stored)).toEqual(planned(whole.record));
    expect(rowsOf(stored, 'parquet')).toBe(JOBS);
  });
});

describe('a listing resumed after its list shifted', () => {
  const PER_PAGE = 2;
  /** Pages of `ids` at PER_PAGE, `changed` with another job_status. */
  const pageOf = (ids: number[], page: number, changed: ReadonlySet<number>) => ({
    body: {
      data: ids
        .slice((page - 1) * PER_PAGE, page * PER_PAGE)
        .map((id) => ({ id, job_status: changed.has(id) ? 1 : 2 })),
      meta: {
        current_page: page,
        per_page: PER_PAGE,
        total: ids.length,
        last_page: Math.ceil(ids.length / PER_PAGE),
      },
    },
  });
  const before = Array.from({ length: 10 }, (_, i) => i + 1);
  // After page 2 is served: job 0 created at the head (job 4 moves onto page 3), and job 4 changed.
  const after = [0, ...before];

  /** A run against a scripted list that shifts once page 2 has been served. */
  async function shiftingRun() {
    const state = { served: 0, shifted: false, clock: 0 };
    const server = await scriptedApi({
      jobs: (_campaign, page) => {
        const reply = state.shifted ? pageOf(after, page, new Set([4])) : pageOf(before, page, new Set());
        state.clock += PAGE_MS;
        if (++state.served === 2) state.shifted = true;
        return reply;
      },
    });
    const deps = cliDeps({
      baseUrl: server.url,
      apiKey: SCRIPTED_KEY,
      out: await tempDir('plan-shift'),
      concurrency: 4,
      maxRate: 10_000,
      log: silentLog,
    });
    const { run } = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
    return { deps, state, message: { ...run, campaign_id: 1 } };
  }

  it('counts a job the shift carried onto the next page as a duplicate, and keeps its first copy, as one listing does', async () => {
    const interrupted = await shiftingRun();
    // A deadline that passes after two pages of PAGE_MS: 220 s, no page started after 15 s.
    const timeoutMs = 220_000;
    expect(listingStopMs(timeoutMs)).toBe(15_000);
    const deadline = { remainingMs: () => timeoutMs - interrupted.state.clock, timeoutMs };
    const first = await planCampaignStep(interrupted.deps, interrupted.message, { unitSize: 3, deadline });
    const resumed = await planCampaign(interrupted.deps, interrupted.message, 3);

    const single = await shiftingRun();
    const whole = await planCampaign(single.deps, single.message, 3);

    expect(first).toMatchObject({ kind: 'handed-on', nextPage: 3 });
    expect(interrupted.state.served).toBe(6);
    expect(planned(resumed.record)).toEqual(planned(whole.record));
    // Job 0 came after the pages it landed on were read; job 4's second copy (changed) is a duplicate.
    expect(resumed.record).toMatchObject({ jobs: 10, duplicates: 1, jobs_invalid: 0 });
    expect(resumed.record.fetch.map((j) => j.job_id)).toEqual(before);
  });
});
