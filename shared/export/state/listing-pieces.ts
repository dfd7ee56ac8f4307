/**
 * A listing, checkpointed in pieces: a campaign's job listing (plan-campaign,
 * `state/runs/<run>/listing/<campaign>/`) and the run's campaign listing (start-run,
 * `state/runs/<run>/campaign-listing/`). Each piece holds a few pages' worth of what the listing
 * learned (the items first listed, the digests that tell a repeat, its counts and staged files)
 * and where the listing stands after them. A delivery that finds pieces resumes after the last
 * one; each piece is written once (create-if-absent), so two deliveries build on one chain.
 */
import * as z from 'zod';
import type { ListingCursor } from '../../api/pagination.js';
import { PreconditionFailedError, StorageError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { parseRecord, StagedFileSchema } from './records.js';

const int = z.number().int().nonnegative();

/** What every piece holds, whatever it lists. */
const PieceBaseSchema = z.object({
  /** 0, 1, 2…: its place in the chain. */
  piece: int,
  /** Written by this delivery (a random token): a writer whose answer was lost knows its own piece. */
  token: z.string(),
  /** The first page it holds; the pages up to `cursor.next_page` (excluded) are its. */
  first_page: int,
  /** Where the listing stands after the piece's last page (see `ListingCursor`). */
  cursor: z.object({ next_page: int, first_total: int, stale_pages: int }),
  /** Items taken so far, the piece's included: the next item's position (quarantine names). */
  position: int,
  /** When the listing started: the `exported_at` of every row of the listing. */
  exported_at: z.string(),
  /** Digests of the invalid items first listed on its pages. */
  invalid_digests: z.array(z.string()),
  /** Repeats on its pages. */
  duplicates: int,
  /** The files its rows and raw lines were staged in. */
  staged: z.array(StagedFileSchema),
});
/** What every piece holds, whatever it lists. */
export type PieceBase = z.infer<typeof PieceBaseSchema>;

/** A piece of a campaign's job listing (plan-campaign). */
export const ListingPieceSchema = PieceBaseSchema.extend({
  campaign_id: int,
  /**
   * The valid jobs first listed on its pages, in order: id, fingerprint (incremental state) and
   * the digest the listing tells a repeat by.
   */
  jobs: z.array(z.object({ job_id: z.number().int(), fp: z.string(), digest: z.string() })),
  /** Invalid items on its pages. */
  jobs_invalid: int,
});
export type ListingPiece = z.infer<typeof ListingPieceSchema>;

/** A piece of a run's campaign listing (start-run, and the deliveries it hands on to). */
export const CampaignPieceSchema = PieceBaseSchema.extend({
  /** The valid campaigns first listed on its pages, in order, and the digest that tells a repeat. */
  campaigns: z.array(z.object({ id: z.number().int(), digest: z.string() })),
  /** Invalid items on its pages. */
  campaigns_invalid: int,
});
export type CampaignPiece = z.infer<typeof CampaignPieceSchema>;

/** A piece's cursor in the pager's shape. */
export const cursorOf = (piece: Pick<ListingPiece, 'cursor'>): ListingCursor => ({
  nextPage: piece.cursor.next_page,
  firstTotal: piece.cursor.first_total,
  stalePages: piece.cursor.stale_pages,
});

/** Where a chain of pieces is kept, and what its pieces are. */
interface Chain<P> {
  prefix: string;
  keyOf(piece: number): string;
  schema: z.ZodType<P>;
}

const jobChain = (runId: string, campaignId: number): Chain<ListingPiece> => ({
  prefix: STATE_KEYS.listingPrefix(runId, campaignId),
  keyOf: (piece) => STATE_KEYS.listingPiece(runId, campaignId, piece),
  schema: ListingPieceSchema,
});

const campaignChain = (runId: string): Chain<CampaignPiece> => ({
  prefix: STATE_KEYS.campaignListingPrefix(runId),
  keyOf: (piece) => STATE_KEYS.campaignListingPiece(runId, piece),
  schema: CampaignPieceSchema,
});

/**
 * The pieces of a campaign's job listing, in order, one read at a time: memory holds one piece,
 * not the listing. Throws StorageError when the chain has a gap (a piece missing, pages not following).
 */
export const readPieces = (
  storage: Storage,
  runId: string,
  campaignId: number,
): AsyncGenerator<ListingPiece> => readChain(storage, jobChain(runId, campaignId));

/** The pieces of a run's campaign listing, in order, one read at a time (as {@link readPieces}). */
export const readCampaignPieces = (storage: Storage, runId: string): AsyncGenerator<CampaignPiece> =>
  readChain(storage, campaignChain(runId));

/**
 * Writes a piece of a job listing unless one with its number exists; true when this piece is
 * the one stored (a write whose answer was lost and that the SDK sent again finds its own
 * token), false when another delivery's is.
 */
export const claimPiece = (storage: Storage, runId: string, piece: ListingPiece): Promise<boolean> =>
  claimOne(storage, jobChain(runId, piece.campaign_id), piece);

/** Writes a piece of a run's campaign listing unless one with its number exists (as {@link claimPiece}). */
export const claimCampaignPiece = (storage: Storage, runId: string, piece: CampaignPiece): Promise<boolean> =>
  claimOne(storage, campaignChain(runId), piece);

async function* readChain<P extends PieceBase>(storage: Storage, chain: Chain<P>): AsyncGenerator<P> {
  let expected = 0;
  let nextPage = 1;
  for await (const key of storage.list(chain.prefix)) {
    const want = chain.keyOf(expected);
    if (key !== want) throw new StorageError(`listing piece ${want} is missing: found ${key}`, key);
    const found = await storage.get(key);
    // Listed a moment ago, gone now: the run was closed and its records removed.
    if (!found) throw new StorageError(`listing piece ${key} vanished while it was read`, key);
    const piece = parseRecord(chain.schema, found.body, key);
    if (piece.first_page !== nextPage)
      throw new StorageError(`listing piece ${key} starts at page ${piece.first_page}, not ${nextPage}`, key);
    yield piece;
    expected++;
    nextPage = piece.cursor.next_page;
  }
}

async function claimOne<P extends PieceBase>(storage: Storage, chain: Chain<P>, piece: P): Promise<boolean> {
  const key = chain.keyOf(piece.piece);
  try {
    // One line: a piece of 5,000 items is half a megabyte, read by machines only.
    await storage.put(key, `${JSON.stringify(piece)}\n`, { ifNoneMatch: '*' });
    return true;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const stored = await storage.get(key);
    if (!stored) throw error;
    return parseRecord(chain.schema, stored.body, key).token === piece.token;
  }
}
