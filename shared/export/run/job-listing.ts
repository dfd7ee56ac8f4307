/**
 * A campaign's job listing as plan-campaign reads it: page after page, checkpointed every
 * {@link PAGES_PER_PIECE} pages as a piece (`state/listing-pieces.ts`) with the pages' jobs rows
 * and raw lines staged beside it, so that neither memory nor any one object grows with the
 * campaign's pages. A delivery that finds pieces resumes after the last one, with the memory
 * and counts they hold, by the same rules as a listing that never stopped; one given a deadline
 * checkpoints and hands on before it, so that the rest is listed by a later delivery.
 */

import type { ListingMemory, ListingStart } from '../../api/pagination.js';
import { emptyListingMemory } from '../../api/pagination.js';
import { ApiError, describeError, ListingError } from '../../errors.js';
import { jobRow } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { fingerprint } from '../state/fingerprint.js';
import { claimPiece, cursorOf, type ListingPiece, readPieces } from '../state/listing-pieces.js';
import { type Fatal, fatalOf, type PlanMessage, type StagedFile, type UnitJob } from '../state/records.js';
import type { ApiClient } from './context.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { ListingTally } from './listing.js';
import { stageStep } from './staging.js';
import { REQUEST_WORST_MS, stopStartingAfter } from './time-budget.js';

/**
 * Pages per piece: 5,000 jobs at 100 a page, a piece of about 0.5 MB and two staged files. A
 * listing of 1,000 pages writes 20 pieces and 40 files, and a crash loses 50 pages at most.
 */
export const PAGES_PER_PIECE = 50;

/**
 * The longest a delivery's wrap-up takes after its last page: a checkpoint (staging a piece's
 * files and writing it: seconds), or at the listing's end the tail staged, the campaign's state
 * read, the plan stored and its units sent (a campaign of 100,000 jobs: 3.5 s of CPU, ~12 s at
 * plan-campaign's 0.29 vCPU, and 100 SQS batches).
 */
export const PLAN_WRAP_UP_MS = 30_000;

/**
 * When a delivery with `timeoutMs` to live starts no further page, in ms after it starts: a
 * page started just before may take {@link REQUEST_WORST_MS}, and the wrap-up
 * {@link PLAN_WRAP_UP_MS}, and the delivery still ends within half its timeout. plan-campaign's
 * 300 s: no page after 55 s, the worst end at 150 s.
 */
export const listingStopMs = (timeoutMs: number): number =>
  stopStartingAfter(timeoutMs, REQUEST_WORST_MS + PLAN_WRAP_UP_MS);

/** When a listing must have handed on (AWS: the invocation's end). */
export interface ListingDeadline {
  /** Milliseconds left (a Lambda's `context.getRemainingTimeInMillis`, passed in by the handler). */
  remainingMs(): number;
  /**
   * The whole time the delivery had when it started (`remainingMs()` then): no page is started
   * once {@link listingStopMs} of it has passed.
   */
  timeoutMs: number;
}

/** How a delivery's listing ended. */
export type ListingEnd =
  /** Every page read. */
  | { kind: 'complete' }
  /** The pages contradicted themselves (ListingError): asking again would read the same. */
  | { kind: 'unlisted'; reason: string }
  /** 404: the campaign went away while it was listed. */
  | { kind: 'gone' }
  /** An answer that stops the run (revoked key, IP restriction). */
  | { kind: 'fatal'; fatal: Fatal }
  /** The deadline came: checkpointed; a later delivery lists from `nextPage` on. */
  | { kind: 'handed-on'; nextPage: number };

export interface JobListing {
  end: ListingEnd;
  /** The valid jobs listed, first copies only, in listing order (the pieces' first). */
  listed: UnitJob[];
  /** Items that failed validation. */
  invalid: number;
  /** Items listed again on a later page. */
  duplicates: number;
  /** The jobs files of the whole listing; none when unlisted (the jobs table holds whole listings only). */
  staged: StagedFile[];
  /** Pages this delivery read. */
  pagesRead: number;
}

/**
 * Lists a campaign's jobs from where its stored pieces end (page 1 when there are none). With
 * a `deadline`, stops before it: the pages read are checkpointed and the listing ends handed on.
 * A retryable API failure (retries spent) is thrown, after checkpointing the pages read.
 */
export async function listCampaignJobs(
  deps: ExportDeps,
  message: PlanMessage,
  api: ApiClient,
  deadline?: ListingDeadline,
): Promise<JobListing> {
  for (;;) {
    const listing = await listFromPieces(deps, message, api, deadline);
    if (listing) return listing;
    // Another delivery of the message stored the piece this one was about to: its chain is the
    // listing; this delivery's pages since its last piece are dropped, and it reads on after it.
    deps.log.info('listing checkpointed by another delivery; resuming from its pieces', {
      campaign_id: message.campaign_id,
    });
  }
}

/** The pages a delivery read since its last piece, and the jobs rows and raw lines they gave. */
interface Tail {
  firstPage: number;
  pages: number;
  cursor: ListingPiece['cursor'] | undefined;
  jobs: ListingPiece['jobs'];
  invalidDigests: string[];
  rows: TableBuffer;
  rawLines: JsonLinesBuffer;
  tally: ListingTally;
}

/** One delivery's listing on the stored chain; undefined when another delivery's piece won. */
async function listFromPieces(
  deps: ExportDeps,
  message: PlanMessage,
  api: ApiClient,
  deadline: ListingDeadline | undefined,
): Promise<JobListing | undefined> {
  const { campaign_id: campaignId, ...run } = message;
  const listed: UnitJob[] = [];
  const staged: StagedFile[] = [];
  const memory: ListingMemory = emptyListingMemory();
  let invalid = 0;
  let duplicates = 0;
  let last: ListingPiece | undefined;
  // Streamed: one piece in memory at a time, and what the listing must remember of it.
  for await (const piece of readPieces(deps.storage, run.run_id, campaignId)) {
    for (const job of piece.jobs) {
      listed.push({ job_id: job.job_id, fp: job.fp });
      memory.firstCopy.set(job.job_id, job.digest);
    }
    for (const digest of piece.invalid_digests) memory.invalidSeen.add(digest);
    invalid += piece.jobs_invalid;
    duplicates += piece.duplicates;
    staged.push(...piece.staged);
    last = piece;
  }
  const start: ListingStart | undefined = last ? { cursor: cursorOf(last), memory } : undefined;
  const exportedAt = last ? last.exported_at : deps.now().toISOString();
  const ctx = { runId: run.run_id, exportedAt: new Date(exportedAt) };
  const token = randomHex(randomOf(deps), 8);
  let pieceNumber = last ? last.piece + 1 : 0;
  const newTail = (firstPage: number, position: number): Tail => {
    const rawLines = new JsonLinesBuffer();
    return {
      firstPage,
      pages: 0,
      cursor: undefined,
      jobs: [],
      invalidDigests: [],
      rows: new TableBuffer(run),
      rawLines,
      tally: new ListingTally(deps, message, rawLines, campaignId, position),
    };
  };
  let tail = newTail(last ? last.cursor.next_page : 1, last?.position ?? 0);
  let pagesRead = 0;

  /** Stages the tail's files and stores it as the next piece; false when another delivery's is stored. */
  const checkpoint = async (): Promise<boolean> => {
    if (!tail.cursor) return true; // No page since the last piece.
    const stem = `c${campaignId}-p${pieceNumber}-${token}`;
    const files = await stageStep(deps.storage, run.run_id, 'jobs', stem, tail.rows, tail.rawLines);
    const piece: ListingPiece = {
      campaign_id: campaignId,
      piece: pieceNumber,
      token,
      first_page: tail.firstPage,
      cursor: tail.cursor,
      position: tail.tally.position,
      exported_at: exportedAt,
      jobs: tail.jobs,
      invalid_digests: tail.invalidDigests,
      jobs_invalid: tail.tally.invalid,
      duplicates: tail.tally.duplicates,
      staged: files,
    };
    if (!(await claimPiece(deps.storage, run.run_id, piece))) return false;
    invalid += piece.jobs_invalid;
    duplicates += piece.duplicates;
    staged.push(...files);
    pieceNumber++;
    tail = newTail(piece.cursor.next_page, piece.position);
    return true;
  };
  const timeUp = () =>
    deadline !== undefined &&
    deadline.timeoutMs - deadline.remainingMs() >= listingStopMs(deadline.timeoutMs);

  let end: ListingEnd = { kind: 'complete' };
  try {
    for await (const page of api.jobPages(campaignId, start)) {
      pagesRead++;
      // Every item the tally hands back is a first copy, so the pager learned its digest on this page.
      const digests = new Map(page.learned.firstCopies);
      for (const item of page.items) {
        const job = await tail.tally.take(item);
        if (job === undefined) continue;
        const fp = fingerprint(item.raw);
        listed.push({ job_id: job.id, fp });
        tail.jobs.push({ job_id: job.id, fp, digest: digests.get(job.id) ?? '' });
        tail.rows.add('jobs', jobRow(job, campaignId, ctx));
      }
      tail.invalidDigests.push(...page.learned.invalidDigests);
      tail.cursor = {
        next_page: page.cursor.nextPage,
        first_total: page.cursor.firstTotal,
        stale_pages: page.cursor.stalePages,
      };
      tail.pages++;
      // After the last page the pager ends the listing (or refuses a stale last page) itself.
      if (page.last) continue;
      if (tail.pages >= PAGES_PER_PIECE && !(await checkpoint())) return undefined;
      // Checked after a page, never before the first: every delivery moves the listing on by a
      // page at least, so handing on cannot go round without end.
      if (timeUp()) {
        if (!(await checkpoint())) return undefined;
        const nextPage = page.cursor.nextPage;
        return { end: { kind: 'handed-on', nextPage }, listed, invalid, duplicates, staged, pagesRead };
      }
    }
  } catch (error) {
    if (error instanceof ApiError && error.retryable) {
      // Retries ran out on 5xx/429/timeouts: thrown, so the plan is tried again (an SQS
      // redelivery), which starts after the pages read here.
      await checkpoint().catch((checkpointError: unknown) =>
        deps.log.warn('could not checkpoint the listing before handing it back', {
          campaign_id: campaignId,
          error: describeError(checkpointError),
        }),
      );
      throw error;
    }
    if (error instanceof ListingError) {
      // Asking again would read the same contradictions: unlisted in this run, tried next run.
      end = { kind: 'unlisted', reason: describeError(error) };
      deps.log.warn('listing jobs stopped', { campaign_id: campaignId, error: end.reason });
    } else if (error instanceof ApiError && error.status === 404) {
      end = { kind: 'gone' }; // Listed a moment ago, gone now: no jobs to account for.
      deps.log.warn('campaign not found while listing its jobs', { campaign_id: campaignId });
    } else {
      end = { kind: 'fatal', fatal: fatalOf(error) };
      deps.log.error('listing jobs failed', { campaign_id: campaignId, ...end.fatal });
    }
  }
  invalid += tail.tally.invalid;
  duplicates += tail.tally.duplicates;
  if (end.kind === 'unlisted') return { end, listed, invalid, duplicates, staged: [], pagesRead };
  // Named by this delivery: a concurrent delivery of the same message stages its own files, and
  // only the files of the plan that is stored are ever published.
  const files = await stageStep(
    deps.storage,
    run.run_id,
    'jobs',
    `c${campaignId}-${token}`,
    tail.rows,
    tail.rawLines,
  );
  return { end, listed, invalid, duplicates, staged: [...staged, ...files], pagesRead };
}
