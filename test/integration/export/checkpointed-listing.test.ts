/**
 * The checkpointed listing (`shared/export/run/checkpointed-listing.ts`) where its two listings'
 * own tests do not reach: a retryable failure after pages were read, through each listing that
 * throws one (plan-campaign's job listing; start-run's campaign listing as a continuation lists
 * it). Against a scripted API on 127.0.0.1 and a run folder; the client retries nothing, so a
 * 503 is a failure whose retries are spent.
 */
import { describe, expect, it } from 'vitest';
import { AdaptiveRateLimiter, IntegrationApiClient } from '../../../shared/api/client.js';
import { ApiError, StorageError } from '../../../shared/errors.js';
import { listCampaigns } from '../../../shared/export/run/campaign-listing.js';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { listCampaignJobs } from '../../../shared/export/run/job-listing.js';
import type { RunRef, StagedFile } from '../../../shared/export/state/records.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { tempDir } from '../../helpers/export.js';
import { recordingLog, SCRIPTED_KEY, scriptedApi } from '../../helpers/scripted-api.js';
import { errorReply, type Reply } from '../api/server.js';

const PER_PAGE = 2;
const PAGES = 5;
/** The page that answers 503 once: pages 1–3 are read before it. */
const FAILING_PAGE = 4;
const IDS = Array.from({ length: PAGES * PER_PAGE }, (_, i) => i + 1);

/** A folder whose writes fail while `failing` is set (a storage outage). */
class OutageStorage extends LocalStorage {
  failing = false;
  override async put(...args: Parameters<LocalStorage['put']>): ReturnType<LocalStorage['put']> {
    if (this.failing) throw new StorageError(`write refused: ${args[0]}`, args[0]);
    return super.put(...args);
  }
}

type Listed = 'jobs' | 'campaigns';

/** A listing of PAGES pages whose FAILING_PAGE answers 503 the first time it is asked. */
async function setUp(what: Listed) {
  const asked: number[] = [];
  const state = { failed: false };
  const storage = new OutageStorage(await tempDir('checkpointed-listing'));
  const reply = (page: number): Reply => {
    asked.push(page);
    if (page === FAILING_PAGE && !state.failed) {
      state.failed = true;
      return errorReply(503, 'SERVICE_UNAVAILABLE', 'The service is busy; try again later.');
    }
    const ids = IDS.slice((page - 1) * PER_PAGE, page * PER_PAGE);
    return {
      body: {
        data: ids.map((id) => (what === 'jobs' ? { id, job_status: 2 } : { id })),
        meta: { current_page: page, per_page: PER_PAGE, total: IDS.length, last_page: PAGES },
      },
    };
  };
  const server = await scriptedApi(
    what === 'jobs' ? { jobs: (_campaign, page) => reply(page) } : { campaigns: reply },
  );
  const limiter = new AdaptiveRateLimiter({ maxRate: 10_000 });
  const log = recordingLog();
  const deps: ExportDeps = {
    api: () =>
      new IntegrationApiClient({
        baseUrl: server.url,
        apiKey: SCRIPTED_KEY,
        limiter,
        retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
      }),
    storage,
    log,
    now: () => new Date(),
  };
  const run: RunRef = { run_id: '20261126T230000Z-a1b2c3', dt: '2026-11-26', mode: 'full' };
  /** One delivery of the listing, to its end (no deadline): the ids listed and the files staged. */
  const deliver = async (): Promise<{ ids: number[]; staged: StagedFile[] }> => {
    if (what === 'jobs') {
      const listing = await listCampaignJobs(deps, { ...run, campaign_id: 7 }, deps.api());
      return { ids: listing.listed.map((job) => job.job_id), staged: listing.staged };
    }
    const listing = await listCampaigns(deps, run, deps.api(), { throwRetryable: true });
    return { ids: listing.campaignIds, staged: listing.staged };
  };
  return { asked, storage, log, deliver };
}

const rowsOf = (staged: StagedFile[], format: 'parquet' | 'jsonl') =>
  staged.filter((file) => file.format === format).reduce((n, file) => n + file.rows, 0);

describe.each<Listed>(['jobs', 'campaigns'])('a %s listing that a retryable failure stops', (what) => {
  it('checkpoints the pages read before it, and the next delivery lists on from the page that failed', async () => {
    const bed = await setUp(what);

    const failure = await bed.deliver().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ status: 503, retryable: true });
    expect(bed.asked).toEqual([1, 2, 3, FAILING_PAGE]);

    const resumed = await bed.deliver();

    // Pages 1–3 are not asked again: the second delivery starts at the page that failed.
    expect(bed.asked).toEqual([1, 2, 3, FAILING_PAGE, FAILING_PAGE, 5]);
    expect(resumed.ids).toEqual(IDS);
    // Every item once in the staged rows and raw lines: the checkpoint's files and the tail's.
    expect(rowsOf(resumed.staged, 'parquet')).toBe(IDS.length);
    expect(rowsOf(resumed.staged, 'jsonl')).toBe(IDS.length);
  });

  it("throws the API's failure, not the storage's, when the checkpoint cannot be written either, and the next delivery lists it all", async () => {
    const bed = await setUp(what);
    bed.storage.failing = true;

    const failure = await bed.deliver().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ status: 503, retryable: true });
    const warning = bed.log.lines.find((line) => line.message.startsWith('could not checkpoint the'));
    expect(warning).toMatchObject({
      level: 'warn',
      fields: { error: expect.stringContaining('write refused') },
    });

    bed.storage.failing = false;
    const resumed = await bed.deliver();

    // Nothing was checkpointed: the next delivery lists from page 1, and lists every item once.
    expect(bed.asked).toEqual([1, 2, 3, FAILING_PAGE, 1, 2, 3, FAILING_PAGE, 5]);
    expect(resumed.ids).toEqual(IDS);
    expect(rowsOf(resumed.staged, 'parquet')).toBe(IDS.length);
  });
});
