/**
 * A run's campaign listing as start-run reads it: a checkpointed listing
 * (`checkpointed-listing.ts`) of the campaigns, a piece every {@link CAMPAIGN_PAGES_PER_PIECE}
 * pages with the pages' campaigns rows and raw lines staged beside it, so that memory holds a
 * piece's rows, not the listing's (the listing keeps the campaigns' ids and digests only, about
 * 50 bytes a campaign). A delivery given a deadline checkpoints and hands on before it, and a
 * later delivery (a continuation message on the plan queue in AWS) lists the rest. What is
 * particular to it: the plan messages of each piece stored are sent as the listing goes, and
 * any failure but a retryable one a continuation throws stops the run.
 */

import * as z from 'zod';
import { STATE_KEYS } from '../../layout.js';
import { campaignRow } from '../format/flatten.js';
import { type CampaignPiece, claimCampaignPiece, readCampaignPieces } from '../state/listing-pieces.js';
import {
  encodeRecord,
  type Fatal,
  fatalOf,
  type PlanMessage,
  type RunRef,
  type StagedFile,
} from '../state/records.js';
import { type ListingDeadline, listCheckpointed, stopReached } from './checkpointed-listing.js';
import type { ApiClient, ExportDeps } from './context.js';
import { sendPlans } from './run-plans.js';
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
  stopReached(deadline, startListingStopMs);

/** What a piece remembers of a campaign first listed. */
type CampaignEntry = CampaignPiece['campaigns'][number];

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
  const { send, deadline } = options;
  const { listed, ...listing } = await listCheckpointed(
    deps,
    {
      run,
      entity: 'campaigns',
      pagesPerPiece: CAMPAIGN_PAGES_PER_PIECE,
      stopMs: startListingStopMs,
      label: 'campaign listing',
      logFields: { run_id: run.run_id },
      pieces: () => readCampaignPieces(deps.storage, run.run_id),
      claim: (piece) => claimCampaignPiece(deps.storage, run.run_id, piece),
      pieceOf: (base, campaigns: CampaignEntry[], invalid): CampaignPiece => ({
        ...base,
        campaigns,
        campaigns_invalid: invalid,
      }),
      partsOf: (piece) => ({ entries: piece.campaigns, invalid: piece.campaigns_invalid }),
      idOf: (campaign) => campaign.id,
      listedOf: (campaign) => campaign.id,
      pages: (start) => api.campaignPages(start),
      add: (campaign, raw, digest, rows, ctx): CampaignEntry => {
        rows.add('campaigns', campaignRow(campaign, ctx, raw));
        return { id: campaign.id, digest };
      },
      pieceStem: (piece, token) => `campaigns-p${piece}-${token}`,
      // The first delivery of a run lists alone: its file keeps the name a start always gave it.
      tailStem: (piece, token) => (piece === 0 ? 'campaigns' : `campaigns-${token}`),
      throwsRetryable: options.throwRetryable ?? false,
      stoppedBy: (error) => {
        // As a start always did: the API's answer stops the run (fatalOf rethrows anything else).
        const fatal = fatalOf(error);
        deps.log.error('run stopped', { run_id: run.run_id, ...fatal });
        return { end: { kind: 'fatal', fatal } as const, keepsFiles: false };
      },
      onStored: send
        ? async (campaignIds) => {
            await sendPlans(deps, run, campaignIds, send, { timeUp: () => listingTimeUp(deadline) });
          }
        : undefined,
    },
    deadline,
  );
  return { ...listing, campaignIds: listed };
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
