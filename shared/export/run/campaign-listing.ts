/**
 * A run's campaign listing as start-run reads it: page after page, checkpointed every
 * {@link CAMPAIGN_PAGES_PER_PIECE} pages as a piece (`state/listing-pieces.ts`) with the pages'
 * campaigns rows and raw lines staged beside it, so that memory holds a piece's rows, not the
 * listing's (the listing keeps the campaigns' ids and digests only, about 50 bytes a campaign).
 * A delivery that finds pieces resumes after the last one by the same rules as a listing that
 * never stopped; one given a deadline checkpoints and hands on before it, and a later delivery
 * (a continuation message on the plan queue in AWS) lists the rest. The same design as a
 * campaign's job listing (`job-listing.ts`).
 */

import * as z from 'zod';
import type { ListingMemory, ListingStart } from '../../api/pagination.js';
import { emptyListingMemory } from '../../api/pagination.js';
import { ApiError, describeError } from '../../errors.js';
import { campaignRow } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { STATE_KEYS } from '../layout.js';
import {
  type CampaignPiece,
  claimCampaignPiece,
  cursorOf,
  readCampaignPieces,
} from '../state/listing-pieces.js';
import {
  encodeRecord,
  type Fatal,
  fatalOf,
  type PlanMessage,
  type RunRef,
  type StagedFile,
} from '../state/records.js';
import type { ApiClient } from './context.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import type { ListingDeadline } from './job-listing.js';
import { ListingTally } from './listing.js';
import { sendPlans } from './run-plans.js';
import { stageStep } from './staging.js';
import { REQUEST_WORST_MS, stopStartingAfter } from './time-budget.js';

/**
 * Pages per piece: 1,000 campaigns at 100 a page, a piece of ~50 KB and two staged files; the
 * plan messages of one piece are 100 SQS requests, a few seconds. A listing of 100,000
 * campaigns writes 100 pieces, and a crash loses 10 pages at most.
 */
export const CAMPAIGN_PAGES_PER_PIECE = 10;

/**
 * The longest a delivery's wrap-up takes after its last page: a checkpoint (a piece's files
 * staged and the piece written, its 1,000 campaigns' plan messages sent), or at the listing's end
 * the tail staged, the run record written and one chunk of plan messages sent (`run-plans.ts`).
 */
export const START_WRAP_UP_MS = 30_000;

/**
 * When a delivery with `timeoutMs` to live starts no further page of the campaign listing, nor
 * (once listed) a further chunk of plan messages, in ms after it starts: start-run's 300 s, no
 * page after 55 s, the worst end at 150 s (a page of {@link REQUEST_WORST_MS}, then the wrap-up).
 */
export const startListingStopMs = (timeoutMs: number): number =>
  stopStartingAfter(timeoutMs, REQUEST_WORST_MS + START_WRAP_UP_MS);

/** True once a delivery under `deadline` must start no further page or chunk. */
export const listingTimeUp = (deadline: ListingDeadline | undefined): boolean =>
  deadline !== undefined &&
  deadline.timeoutMs - deadline.remainingMs() >= startListingStopMs(deadline.timeoutMs);

/** How a delivery's campaign listing ended. */
export type CampaignListingEnd =
  /** Every page read. */
  | { kind: 'complete' }
  /** An answer that stops the run (revoked key, a listing that contradicts itself). */
  | { kind: 'fatal'; fatal: Fatal }
  /** The deadline came: checkpointed; a later delivery lists from `nextPage` on. */
  | { kind: 'handed-on'; nextPage: number };

export interface CampaignListing {
  end: CampaignListingEnd;
  /** The valid campaigns listed, first copies only, in listing order (the pieces' first). */
  campaignIds: number[];
  /** Items that failed validation. */
  invalid: number;
  /** Items listed again on a later page. */
  duplicates: number;
  /** The campaigns files of the whole listing; none when it stopped fatally. */
  staged: StagedFile[];
  /** Pages this delivery read. */
  pagesRead: number;
}

export interface CampaignListingOptions {
  /** When the delivery must have handed on; without one it lists to the end (CLI). */
  deadline?: ListingDeadline | undefined;
  /**
   * Sends plan messages (AWS: to the plan queue). Given, the campaigns of each piece stored have
   * theirs sent as the listing goes (`run-plans.ts`), so that planning starts before the listing
   * ends and the end does not send them all at once; and those of stored pieces whose plans a
   * dead delivery did not send, when a delivery starts.
   */
  send?: ((messages: PlanMessage[]) => Promise<void>) | undefined;
  /**
   * Whether a retryable API failure (retries spent) stops the run (start-run's first delivery:
   * as a start always did) or is thrown after a checkpoint, for the message to come back (a
   * continuation on the plan queue). Default: it stops the run.
   */
  throwRetryable?: boolean | undefined;
}

/**
 * Lists the run's campaigns from where its stored pieces end (page 1 when there are none). With
 * a `deadline`, stops before it: the pages read are checkpointed and the listing ends handed on.
 */
export async function listCampaigns(
  deps: ExportDeps,
  run: RunRef,
  api: ApiClient,
  options: CampaignListingOptions = {},
): Promise<CampaignListing> {
  for (;;) {
    const listing = await listFromPieces(deps, run, api, options);
    if (listing) return listing;
    // Another delivery stored the piece this one was about to: its chain is the listing.
    deps.log.info('campaign listing checkpointed by another delivery; resuming from its pieces', {
      run_id: run.run_id,
    });
  }
}

/** The pages a delivery read since its last piece, and the rows and raw lines they gave. */
interface Tail {
  firstPage: number;
  pages: number;
  cursor: CampaignPiece['cursor'] | undefined;
  campaigns: CampaignPiece['campaigns'];
  invalidDigests: string[];
  rows: TableBuffer;
  rawLines: JsonLinesBuffer;
  tally: ListingTally;
}

/** One delivery's listing on the stored chain; undefined when another delivery's piece won. */
async function listFromPieces(
  deps: ExportDeps,
  run: RunRef,
  api: ApiClient,
  options: CampaignListingOptions,
): Promise<CampaignListing | undefined> {
  const campaignIds: number[] = [];
  const staged: StagedFile[] = [];
  const memory: ListingMemory = emptyListingMemory();
  let invalid = 0;
  let duplicates = 0;
  let last: CampaignPiece | undefined;
  // Streamed: one piece in memory at a time, and what the listing must remember of it.
  for await (const piece of readCampaignPieces(deps.storage, run.run_id)) {
    for (const campaign of piece.campaigns) {
      campaignIds.push(campaign.id);
      memory.firstCopy.set(campaign.id, campaign.digest);
    }
    for (const digest of piece.invalid_digests) memory.invalidSeen.add(digest);
    invalid += piece.campaigns_invalid;
    duplicates += piece.duplicates;
    staged.push(...piece.staged);
    last = piece;
  }
  const sendListed = async () => {
    if (options.send)
      await sendPlans(deps, run, campaignIds, options.send, {
        timeUp: () => listingTimeUp(options.deadline),
      });
  };
  // A delivery that stored a piece and died before sending its plans: sent now.
  if (last) await sendListed();
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
      campaigns: [],
      invalidDigests: [],
      rows: new TableBuffer(run),
      rawLines,
      tally: new ListingTally(deps, run, rawLines, undefined, position),
    };
  };
  let tail = newTail(last ? last.cursor.next_page : 1, last?.position ?? 0);
  let pagesRead = 0;

  /** Stages the tail's files and stores it as the next piece; false when another delivery's is stored. */
  const checkpoint = async (): Promise<boolean> => {
    if (!tail.cursor) return true; // No page since the last piece.
    const stem = `campaigns-p${pieceNumber}-${token}`;
    const files = await stageStep(deps.storage, run.run_id, 'campaigns', stem, tail.rows, tail.rawLines);
    const piece: CampaignPiece = {
      piece: pieceNumber,
      token,
      first_page: tail.firstPage,
      cursor: tail.cursor,
      position: tail.tally.position,
      exported_at: exportedAt,
      campaigns: tail.campaigns,
      invalid_digests: tail.invalidDigests,
      campaigns_invalid: tail.tally.invalid,
      duplicates: tail.tally.duplicates,
      staged: files,
    };
    if (!(await claimCampaignPiece(deps.storage, run.run_id, piece))) return false;
    invalid += piece.campaigns_invalid;
    duplicates += piece.duplicates;
    staged.push(...files);
    pieceNumber++;
    tail = newTail(piece.cursor.next_page, piece.position);
    await sendListed();
    return true;
  };

  let end: CampaignListingEnd = { kind: 'complete' };
  try {
    for await (const page of api.campaignPages(start)) {
      pagesRead++;
      const digests = new Map(page.learned.firstCopies);
      for (const item of page.items) {
        const campaign = await tail.tally.take(item);
        if (campaign === undefined) continue;
        campaignIds.push(campaign.id);
        tail.campaigns.push({ id: campaign.id, digest: digests.get(campaign.id) ?? '' });
        tail.rows.add('campaigns', campaignRow(campaign, ctx, item.raw));
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
      if (tail.pages >= CAMPAIGN_PAGES_PER_PIECE && !(await checkpoint())) return undefined;
      // Checked after a page, never before the first: every delivery moves the listing on.
      if (listingTimeUp(options.deadline)) {
        if (!(await checkpoint())) return undefined;
        const nextPage = page.cursor.nextPage;
        return { end: { kind: 'handed-on', nextPage }, campaignIds, invalid, duplicates, staged, pagesRead };
      }
    }
  } catch (error) {
    if (options.throwRetryable && error instanceof ApiError && error.retryable) {
      // The message comes back later and lists after the pages checkpointed here.
      await checkpoint().catch((checkpointError: unknown) =>
        deps.log.warn('could not checkpoint the campaign listing before handing it back', {
          run_id: run.run_id,
          error: describeError(checkpointError),
        }),
      );
      throw error;
    }
    // As a start always did: the API's answer stops the run (fatalOf rethrows anything else).
    end = { kind: 'fatal', fatal: fatalOf(error) };
    deps.log.error('run stopped', { run_id: run.run_id, ...end.fatal });
  }
  invalid += tail.tally.invalid;
  duplicates += tail.tally.duplicates;
  if (end.kind === 'fatal') return { end, campaignIds, invalid, duplicates, staged: [], pagesRead };
  const files = await stageStep(
    deps.storage,
    run.run_id,
    'campaigns',
    // The first delivery of a run lists alone: its file keeps the name a start always gave it.
    pieceNumber === 0 ? 'campaigns' : `campaigns-${token}`,
    tail.rows,
    tail.rawLines,
  );
  return { end, campaignIds, invalid, duplicates, staged: [...staged, ...files], pagesRead };
}

/** The note a listing handed on leaves (`listing-handed-on.json`). */
export const HandedOnSchema = z.object({ handed_on_at: z.string() });

/**
 * Notes that the run's campaign listing was handed on now: finish-run judges a start that has
 * not written its run record dead only once this is older than {@link LISTING_HANDED_ON_GRACE_MS}.
 */
export async function markHandedOn(deps: ExportDeps, runId: string): Promise<void> {
  await deps.storage.put(
    STATE_KEYS.listingHandedOn(runId),
    encodeRecord({ handed_on_at: deps.now().toISOString() }),
  );
}

/**
 * How long a handed-on campaign listing may go without a word before finish-run closes its run
 * as failed: the plan queue's visibility timeout at plan-campaign's longest timeout (6 × 900 s:
 * a delivery that died comes back after it), and one more delivery (900 s).
 */
export const LISTING_HANDED_ON_GRACE_MS = 7 * 900_000;
