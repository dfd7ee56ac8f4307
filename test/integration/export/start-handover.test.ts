/**
 * start-run's campaign listing checkpointed and handed on (issue 31): a company of 2,450
 * campaigns (25 pages of 100) listed under a deadline that passes after a few pages, against a
 * scripted API and a folder. Time is virtual: every campaigns page the API serves takes PAGE_MS
 * of it, so the deadline falls after a known page. The deliveries are what the handlers make:
 * start-run's first (`startRunStep`), then continuations on the plan queue (`continueStart`),
 * each sending the plan messages of what it listed (`sendPlans`, as the handlers do).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import type { RequestEvent } from '../../../shared/api/client.js';
import { OutputLockedError } from '../../../shared/errors.js';
import {
  CAMPAIGN_PAGES_PER_PIECE,
  listingTimeUp,
  START_WRAP_UP_MS,
  startListingStopMs,
} from '../../../shared/export/run/campaign-listing.js';
import { closeRuns } from '../../../shared/export/run/close-runs.js';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { sizeBeforeStart } from '../../../shared/export/run/job-counts.js';
import type { ListingDeadline } from '../../../shared/export/run/job-listing.js';
import { PLANS_PER_CHUNK, sendPlans } from '../../../shared/export/run/run-plans.js';
import {
  type ContinueStep,
  continueStart,
  FIRST_RECORD_GRACE_MS,
  type StartRunInput,
  type StartStep,
  startRun,
  startRunStep,
} from '../../../shared/export/run/start-run.js';
import { MAX_TIMEOUT_SHARE, REQUEST_WORST_MS } from '../../../shared/export/run/time-budget.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  type PlanMessage,
  parseRecord,
  RequestCountsSchema,
  type RunRecord,
  RunRecordSchema,
  StartListingMessageSchema,
} from '../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { listAll } from '../../../shared/storage/storage.js';
import { tempDir } from '../../helpers/export.js';
import { SCRIPTED_KEY, scriptedRoute } from '../../helpers/scripted-api.js';
import { startServer, type TestServer } from '../api/server.js';

/** 2,450 campaigns: 25 pages of 100, the last one half full. */
const CAMPAIGNS = 2_450;
const PAGES = 25;
const PER_PAGE = 100;
/** start-run's timeout, and plan-campaign's default (the continuations'). */
const TIMEOUT_MS = 300_000;
/** A slow API: each page takes 10 s. A delivery starts no page after 55 s, so it reads 6 pages. */
const PAGE_MS = 10_000;
const PAGES_PER_DELIVERY = Math.floor(startListingStopMs(TIMEOUT_MS) / PAGE_MS) + 1;
const ids = Array.from({ length: CAMPAIGNS }, (_, i) => 1_000 + i);

let server: TestServer;

beforeAll(async () => {
  // One server for the file (scriptedApi's closes after each test).
  server = await startServer(
    scriptedRoute({
      campaigns: (page) => ({
        body: {
          data: ids.slice((page - 1) * PER_PAGE, page * PER_PAGE).map((id) => ({ id, name: `c${id}` })),
          meta: { current_page: page, per_page: PER_PAGE, total: CAMPAIGNS, last_page: PAGES },
        },
      }),
    }),
  );
});
afterAll(async () => {
  await server?.close();
});

/** An output of its own, with a virtual clock that each campaigns page moves on by `pageMs`. */
async function setUp(pageMs = PAGE_MS) {
  const clock = { ms: 0 };
  const pages: number[] = [];
  /** When each page in `pages` started, on the clock. */
  const pageStarts: number[] = [];
  const onRequest = (event: RequestEvent) => {
    const page = /\/campaigns\?page=(\d+)/.exec(event.path);
    if (!page) return;
    pages.push(Number(page[1]));
    pageStarts.push(clock.ms);
    clock.ms += pageMs;
  };
  const deps: ExportDeps = cliDeps({
    baseUrl: server.url,
    apiKey: SCRIPTED_KEY,
    out: await tempDir('start-handover'),
    concurrency: 4,
    maxRate: 10_000,
    log: silentLog,
    onRequest,
  });
  /** Every plan message sent, in order. */
  const sent: PlanMessage[] = [];
  const send = async (messages: PlanMessage[]) => {
    sent.push(...messages);
  };
  const deadlineFrom = (timeoutMs: number): ListingDeadline => {
    const startedAt = clock.ms;
    return { remainingMs: () => startedAt + timeoutMs - clock.ms, timeoutMs };
  };
  const input: StartRunInput = {
    mode: 'full',
    driver: 'queues',
    lock: { ttlMs: 6 * 3_600_000, owner: 'aws-lambda', recordGraceMs: FIRST_RECORD_GRACE_MS },
  };
  /** start-run's delivery: the run started, listed as far as its deadline, its plans sent as the handler does. */
  const first = async (timeoutMs = TIMEOUT_MS): Promise<StartStep> => {
    const deadline = deadlineFrom(timeoutMs);
    const step = await startRunStep(deps, { ...input, listing: { deadline, send } });
    if (step.kind === 'recorded')
      await sendPlans(deps, step.run, step.record.campaign_ids, send, {
        timeUp: () => listingTimeUp(deadline),
      });
    return step;
  };
  /** A continuation's delivery on the plan queue, as plan-campaign's handler makes it. */
  const next = async (run: StartStep['run'], timeoutMs = TIMEOUT_MS): Promise<ContinueStep> => {
    const deadline = deadlineFrom(timeoutMs);
    const step = await continueStart(deps, run, { deadline, send });
    if (step.kind === 'recorded')
      await sendPlans(deps, run, step.record.campaign_ids, send, { timeUp: () => listingTimeUp(deadline) });
    return step;
  };
  const record = async (runId: string): Promise<RunRecord> => {
    const key = STATE_KEYS.runRecord(runId);
    return parseRecord(RunRecordSchema, (await deps.storage.get(key))!.body, key);
  };
  /** Requests of deliveries that handed on, kept for the manifest. */
  const unrecorded = async (runId: string) => {
    let sum = emptyRequestCounts();
    for (const key of await listAll(deps.storage, STATE_KEYS.requestsPrefix(runId)))
      sum = addRequestCounts(sum, parseRecord(RequestCountsSchema, (await deps.storage.get(key))!.body, key));
    return sum;
  };
  return { deps, clock, pages, pageStarts, sent, send, input, first, next, record, unrecorded };
}

/** Goes on with a handed-on start until its run is recorded; the steps, in order. */
async function toTheEnd(bed: Awaited<ReturnType<typeof setUp>>, step: StartStep, timeoutMs = TIMEOUT_MS) {
  const steps: (StartStep | ContinueStep)[] = [step];
  for (let i = 0; i <= PAGES && steps.at(-1)?.kind !== 'recorded'; i++)
    steps.push(await bed.next(step.run, timeoutMs));
  return steps;
}

/** What a run record says of the listing, without what differs by run (id, time, file names, requests). */
const listed = ({ campaign_ids, campaigns_invalid, duplicates, staged }: RunRecord) => ({
  campaign_ids,
  campaigns_invalid,
  duplicates,
  rows: staged.filter((f) => f.format === 'parquet').reduce((n, f) => n + f.rows, 0),
  lines: staged.filter((f) => f.format === 'jsonl').reduce((n, f) => n + f.rows, 0),
});

describe('a campaign listing longer than one invocation', () => {
  it('hands on before the deadline and resumes from the page reached: each page asked once, the run recorded as one listing records it, each plan sent once', async () => {
    const bed = await setUp();
    const started = await bed.first();
    expect(started).toMatchObject({ kind: 'handed-on', nextPage: PAGES_PER_DELIVERY + 1 });
    // The run holds the output meanwhile: the schedule's next start starts nothing.
    await expect(startRun(bed.deps, bed.input)).rejects.toBeInstanceOf(OutputLockedError);
    expect((await bed.record(started.run.run_id)).starting).toBe(true);

    const steps = await toTheEnd(bed, started);

    expect(PAGES_PER_DELIVERY).toBe(6);
    expect(steps.map((s) => (s.kind === 'handed-on' ? s.nextPage : s.kind))).toEqual([
      7,
      13,
      19,
      25,
      'recorded',
    ]);
    // Every page asked once across the five deliveries: none listed again from page 1.
    expect(bed.pages).toEqual(Array.from({ length: PAGES }, (_, i) => i + 1));
    const resumed = await bed.record(started.run.run_id);
    expect(resumed.starting).toBeUndefined();
    expect(resumed.fatal).toBeUndefined();

    const single = await setUp();
    const whole = await startRun(single.deps, { ...single.input, lock: 'unlocked' });
    expect(listed(resumed)).toEqual(listed(whole.record));
    expect(listed(resumed)).toMatchObject({ campaign_ids: ids, rows: CAMPAIGNS, lines: CAMPAIGNS });
    for (const file of resumed.staged) expect(await bed.deps.storage.get(file.key)).toBeDefined();
    // One plan message per campaign, in listing order, none twice: most went as pieces were stored.
    expect(bed.sent.map((m) => m.campaign_id)).toEqual(ids);
    expect(bed.sent[0]).toEqual({ ...started.run, campaign_id: ids[0] });
    // The manifest counts each page once: the last delivery's in the record, the others' kept
    // apart; every delivery verified the key once.
    const total = addRequestCounts(resumed.requests, await bed.unrecorded(started.run.run_id));
    expect(total.total).toBe(PAGES + steps.length);
  });

  it("keeps an evolve run's schema contract across hand-ons: the recorded run and every plan message say evolve", async () => {
    const bed = await setUp();
    bed.input.schemaContract = 'evolve';
    const started = await bed.first();
    expect(started.kind).toBe('handed-on');
    expect(started.run.schema_contract).toBe('evolve');
    // The continuation as plan-campaign's handler reads it: a message on the queue, its `list` dropped.
    const message = StartListingMessageSchema.parse(
      JSON.parse(JSON.stringify({ ...started.run, list: 'campaigns' })),
    );
    const { list: _list, ...run } = message;

    let last: ContinueStep | undefined;
    for (let i = 0; i <= PAGES && last?.kind !== 'recorded'; i++) last = await bed.next(run);

    expect(last?.kind).toBe('recorded');
    expect((await bed.record(started.run.run_id)).schema_contract).toBe('evolve');
    expect(bed.sent.map((m) => m.campaign_id)).toEqual(ids);
    for (const plan of bed.sent) expect(plan.schema_contract, String(plan.campaign_id)).toBe('evolve');
  });

  it.each([PAGE_MS, 30_000, REQUEST_WORST_MS])(
    'starts no page late enough to pass half its timeout, and none stops early (pages of %i ms)',
    async (pageMs) => {
      const bed = await setUp(pageMs);
      const stopMs = startListingStopMs(TIMEOUT_MS);
      let run: StartStep['run'] | undefined;
      let last: StartStep | ContinueStep | undefined;
      for (let i = 0; i <= PAGES && last?.kind !== 'recorded'; i++) {
        const startedAt = bed.clock.ms;
        const firstPage = bed.pageStarts.length;
        if (run === undefined) {
          const step = await bed.first();
          run = step.run;
          last = step;
        } else {
          last = await bed.next(run);
        }
        const starts = bed.pageStarts.slice(firstPage).map((at) => at - startedAt);
        const lastStart = starts.at(-1) ?? 0;
        // A page is started only before the stop (the first one always): with the longest a page
        // may take and the wrap-up after it, the delivery ends within half its timeout.
        if (starts.length > 1) expect(lastStart).toBeLessThan(stopMs);
        expect(lastStart + REQUEST_WORST_MS + START_WRAP_UP_MS).toBeLessThanOrEqual(
          MAX_TIMEOUT_SHARE * TIMEOUT_MS,
        );
        // And it hands on only once the stop has come: no delivery gives up time it had.
        if (last.kind === 'handed-on') expect(bed.clock.ms - startedAt).toBeGreaterThanOrEqual(stopMs);
      }
      expect(last?.kind).toBe('recorded');
      expect(bed.pages).toEqual(Array.from({ length: PAGES }, (_, i) => i + 1));
    },
  );

  it('holds one piece of rows at a time: a listing of more than a piece is checkpointed as it goes, even in one delivery', async () => {
    const bed = await setUp(1);
    const started = await bed.first();
    expect(started.kind).toBe('recorded');
    // 25 pages: two whole pieces stored (their plans sent as they were), the last 5 pages the tail.
    const pieces = await listAll(bed.deps.storage, STATE_KEYS.campaignListingPrefix(started.run.run_id));
    expect(pieces).toHaveLength(Math.floor((PAGES - 1) / CAMPAIGN_PAGES_PER_PIECE));
    expect(bed.sent.map((m) => m.campaign_id)).toEqual(ids);
  });

  it('records the run once, whichever of two deliveries of a continuation ends first, and sends the plans of a piece a dead delivery stored', async () => {
    const bed = await setUp();
    const started = await bed.first();
    // The next delivery stores a piece, then dies sending its plans (SQS refused).
    const failing = async () => {
      throw new Error('SQS refused');
    };
    const dying = { deadline: { remainingMs: () => 1, timeoutMs: TIMEOUT_MS }, send: failing };
    await expect(continueStart(bed.deps, started.run, dying)).rejects.toThrow('SQS refused');
    const sentBefore = bed.sent.length;
    expect(sentBefore).toBe(PAGES_PER_DELIVERY * PER_PAGE);

    // Its message delivered twice at once, each with a whole invocation ahead.
    const [a, b] = await Promise.all([
      continueStart(bed.deps, started.run, { send: bed.send }),
      continueStart(bed.deps, started.run, { send: bed.send }),
    ]);
    if (a.kind !== 'recorded' || b.kind !== 'recorded') throw new Error('not recorded');
    const stored = await bed.record(started.run.run_id);
    expect(a.record).toEqual(stored);
    expect(b.record).toEqual(stored);
    // The piece the dead delivery stored had its plans sent by the next: every campaign has one.
    const pending = await bed.next(started.run);
    expect(pending.kind).toBe('recorded');
    expect(new Set(bed.sent.map((m) => m.campaign_id))).toEqual(new Set(ids));
    expect(listed(stored)).toMatchObject({ campaign_ids: ids, rows: CAMPAIGNS, lines: CAMPAIGNS });
    // Pages before the dead delivery's piece were asked once.
    expect(bed.pages.filter((p) => p <= PAGES_PER_DELIVERY)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('sends plan messages a chunk at a time, going on where the last delivery stopped', async () => {
    const bed = await setUp(1);
    const { run, record } = await startRun(bed.deps, { ...bed.input, lock: 'unlocked' });
    // Time is up from the start: each delivery sends one chunk and hands the rest on.
    const timeUp = () => true;
    const after: number[] = [];
    for (let done = false; !done; after.push(bed.sent.length))
      done = await sendPlans(bed.deps, run, record.campaign_ids, bed.send, { timeUp });
    expect(after).toEqual([PLANS_PER_CHUNK, 2 * PLANS_PER_CHUNK, CAMPAIGNS]);
    expect(bed.sent.map((m) => m.campaign_id)).toEqual(ids);
    // A late delivery finds them all sent.
    expect(await sendPlans(bed.deps, run, record.campaign_ids, bed.send)).toBe(true);
    expect(bed.sent).toHaveLength(CAMPAIGNS);
  });
});

describe("a full run's estimate asked before the start", () => {
  it('lists no page past half its time, and counts the campaigns by the listing total', async () => {
    const bed = await setUp();
    const deps = { ...bed.deps, now: () => new Date(bed.clock.ms) };
    // start-run's estimate of `{"estimate": "only"}` stops at 75 s of its 300 s.
    const stopAt = 75_000;
    const size = await sizeBeforeStart(deps, { stopAt });
    // Pages at 0, 10, 20 and 30 s; none after 37.5 s, half the time to the stop.
    expect(bed.pages).toEqual([1, 2, 3, 4]);
    expect(size).toMatchObject({ campaigns: CAMPAIGNS, reports: 2 * CAMPAIGNS });
    expect(size.counted).toBeGreaterThan(0);
  });
});

describe('finish-run and a start whose listing was handed on', () => {
  it('leaves the run starting while its listing goes on, and closes it as failed once the listing is dead', async () => {
    const bed = await setUp();
    const started = await bed.first();
    expect(started.kind).toBe('handed-on');
    const look = (now: number) =>
      closeRuns(bed.deps, {
        now,
        deadlineMs: 6 * 3_600_000,
        queuesDrained: async () => true,
        announce: async () => {},
      });
    // Twenty minutes on (start-run's own five have passed): its continuation may still be on it.
    expect((await look(Date.now() + 20 * 60_000)).closed).toEqual([]);
    // Silent for three hours: the continuation died (its message in the DLQ).
    const late = await look(Date.now() + 3 * 3_600_000);
    expect(late.closed.map((c) => c.manifest.status)).toEqual(['failed']);
    expect(await continueStart(bed.deps, started.run, { send: bed.send })).toEqual({ kind: 'gone' });
  });
});
