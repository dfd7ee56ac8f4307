/**
 * A campaign's job listing, checkpointed in pieces (`state/runs/<run>/listing/<campaign>/`):
 * each piece holds a few pages' worth of what the listing learned (the jobs first listed, the
 * digests that tell a repeat, its counts and staged files) and where the listing stands after
 * them. A delivery of the plan message that finds pieces resumes after the last one; each
 * piece is written once (create-if-absent), so two deliveries build on one chain.
 */
import * as z from 'zod';
import type { ListingCursor } from '../../api/pagination.js';
import { PreconditionFailedError, StorageError } from '../../errors.js';
import type { Storage } from '../../storage/storage.js';
import { STATE_KEYS } from '../layout.js';
import { parseRecord, StagedFileSchema } from './records.js';

const int = z.number().int().nonnegative();

export const ListingPieceSchema = z.object({
  campaign_id: int,
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
  /** When the listing started: the `exported_at` of every jobs row of the listing. */
  exported_at: z.string(),
  /**
   * The valid jobs first listed on its pages, in order: id, fingerprint (incremental state) and
   * the digest the listing tells a repeat by.
   */
  jobs: z.array(z.object({ job_id: z.number().int(), fp: z.string(), digest: z.string() })),
  /** Digests of the invalid items first listed on its pages. */
  invalid_digests: z.array(z.string()),
  /** Invalid items and repeats on its pages. */
  jobs_invalid: int,
  duplicates: int,
  /** The jobs files its rows and raw lines were staged in. */
  staged: z.array(StagedFileSchema),
});
export type ListingPiece = z.infer<typeof ListingPieceSchema>;

/** A piece's cursor in the pager's shape. */
export const cursorOf = (piece: ListingPiece): ListingCursor => ({
  nextPage: piece.cursor.next_page,
  firstTotal: piece.cursor.first_total,
  stalePages: piece.cursor.stale_pages,
});

/**
 * The pieces of a campaign's listing, in order, one read at a time: memory holds one piece, not
 * the listing. Throws StorageError when the chain has a gap (a piece missing, pages not following).
 */
export async function* readPieces(
  storage: Storage,
  runId: string,
  campaignId: number,
): AsyncGenerator<ListingPiece> {
  let expected = 0;
  let nextPage = 1;
  for await (const key of storage.list(STATE_KEYS.listingPrefix(runId, campaignId))) {
    const want = STATE_KEYS.listingPiece(runId, campaignId, expected);
    if (key !== want) throw new StorageError(`listing piece ${want} is missing: found ${key}`, key);
    const found = await storage.get(key);
    // Listed a moment ago, gone now: the run was closed and its records removed.
    if (!found) throw new StorageError(`listing piece ${key} vanished while it was read`, key);
    const piece = parseRecord(ListingPieceSchema, found.body, key);
    if (piece.first_page !== nextPage)
      throw new StorageError(`listing piece ${key} starts at page ${piece.first_page}, not ${nextPage}`, key);
    yield piece;
    expected++;
    nextPage = piece.cursor.next_page;
  }
}

/**
 * Writes a piece unless one with its number exists; true when this piece is the one stored (a
 * write whose answer was lost and that the SDK sent again finds its own token), false when
 * another delivery's piece is.
 */
export async function claimPiece(storage: Storage, runId: string, piece: ListingPiece): Promise<boolean> {
  const key = STATE_KEYS.listingPiece(runId, piece.campaign_id, piece.piece);
  try {
    // One line: a piece of 5,000 jobs is half a megabyte, read by machines only.
    await storage.put(key, `${JSON.stringify(piece)}\n`, { ifNoneMatch: '*' });
    return true;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const stored = await storage.get(key);
    if (!stored) throw error;
    return parseRecord(ListingPieceSchema, stored.body, key).token === piece.token;
  }
}
