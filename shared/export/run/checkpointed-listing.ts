/**
 * A listing checkpointed in pieces, whatever it lists: pages read through the API client one
 * after another, every few pages a piece stored (`state/listing-pieces.ts`) with the pages' rows
 * and raw lines staged beside it, so that neither memory nor any one object grows with the
 * listing's pages. A delivery that finds pieces resumes after the last one, with the memory and
 * counts they hold, by the same rules as a listing that never stopped; one given a deadline
 * checkpoints and hands on before it, so that a later delivery lists the rest. Two listings are
 * read this way, each a {@link ListingKind} saying what differs: a campaign's jobs
 * (`job-listing.ts`, plan-campaign) and the run's campaigns (`campaign-listing.ts`, start-run).
 */

import type { ListedPage, ListingMemory, ListingStart } from '../../api/pagination.js';
import { emptyListingMemory } from '../../api/pagination.js';
import { ApiError, describeError } from '../../errors.js';
import type { RowContext } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { cursorOf, type PieceBase } from '../state/listing-pieces.js';
import type { RunRef, StagedFile } from '../state/records.js';
import type { RawEntity } from '../tables.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { ListingTally } from './listing.js';
import { stageStep } from './staging.js';

/** When a listing must have handed on (AWS: the invocation's end). */
export interface ListingDeadline {
  /** Milliseconds left (a Lambda's `context.getRemainingTimeInMillis`, passed in by the handler). */
  remainingMs(): number;
  /**
   * The whole time the delivery had when it started (`remainingMs()` then): no page is started
   * once the listing's stop (`stopMs` of it) has passed.
   */
  timeoutMs: number;
}

/**
 * True once a delivery under `deadline` has run `stopMs(deadline.timeoutMs)` or longer: it starts
 * no further page (nor other work the stop bounds). Never without a deadline.
 */
export const stopReached = (
  deadline: ListingDeadline | undefined,
  stopMs: (timeoutMs: number) => number,
): boolean =>
  deadline !== undefined && deadline.timeoutMs - deadline.remainingMs() >= stopMs(deadline.timeoutMs);

/** How a delivery's listing ended: every page read, handed on, or stopped as the kind says (`E`). */
export type CheckpointedEnd<E> =
  /** Every page read. */
  | { kind: 'complete' }
  /** The deadline came: checkpointed; a later delivery lists from `nextPage` on. */
  | { kind: 'handed-on'; nextPage: number }
  | E;

/** What one delivery's listing came to. */
export interface CheckpointedListing<L, E> {
  end: CheckpointedEnd<E>;
  /** What was listed of the valid items, first copies only, in listing order (the pieces' first). */
  listed: L[];
  /** Items that failed validation. */
  invalid: number;
  /** Items listed again on a later page. */
  duplicates: number;
  /** The staged files of the whole listing; none when it stopped and the kind keeps none. */
  staged: StagedFile[];
  /** Pages this delivery read. */
  pagesRead: number;
}

/**
 * What differs between two checkpointed listings: what is listed (the pages, the pieces, what a
 * piece remembers of an item), what is written per page (the rows), and what ends it.
 *
 * - `T`: a valid item as the API client yields it.
 * - `P`: a stored piece (`PieceBase` and what this listing adds: its entries, its invalid count).
 * - `N`: an entry of a piece: what it remembers of an item first listed, its digest included.
 * - `L`: what the listing hands back of an item.
 * - `E`: the ends an error makes, beside complete and handed on.
 */
export interface ListingKind<
  T extends { id: number },
  P extends PieceBase,
  N extends { digest: string },
  L,
  E,
> {
  /** The run whose rows are staged and whose items are quarantined. */
  run: RunRef;
  /** The listing's raw entity: its staged files' name and rows' table. */
  entity: RawEntity;
  /** The campaign whose jobs are listed (quarantine names and raw lines); none for campaigns. */
  campaignId?: number | undefined;
  /** Pages between two pieces. */
  pagesPerPiece: number;
  /** When a delivery of `timeoutMs` starts no further page, in ms after it starts. */
  stopMs(timeoutMs: number): number;
  /** The listing's name on the log ('listing', 'campaign listing'), and the fields that say which. */
  label: string;
  logFields: Record<string, string | number>;
  /** The stored pieces, in order, one read at a time. */
  pieces(): AsyncIterable<P>;
  /** Stores a piece unless one with its number is; true when this one is the one stored. */
  claim(piece: P): Promise<boolean>;
  /** The piece to store: what every piece holds, and this listing's entries and invalid count. */
  pieceOf(base: PieceBase, entries: N[], invalid: number): P;
  /** A stored piece's entries and invalid count. */
  partsOf(piece: P): { entries: readonly N[]; invalid: number };
  /** The id an entry's item has (the listing's memory tells a repeat by it and its digest). */
  idOf(entry: N): number;
  /** What the listing hands back of an entry. */
  listedOf(entry: N): L;
  /** The pages, from the start (page 1 when none). */
  pages(start: ListingStart | undefined): AsyncIterable<ListedPage<T>>;
  /** Writes a valid item's rows into `rows`; returns what its piece remembers of it. */
  add(item: T, raw: unknown, digest: string, rows: TableBuffer, ctx: RowContext): N;
  /** The name a piece's staged files take (named by the delivery: `token`). */
  pieceStem(piece: number, token: string): string;
  /** The name the files of the pages after the last piece take, at the listing's end. */
  tailStem(piece: number, token: string): string;
  /**
   * Whether an API failure that may pass (retries spent) is thrown, after a checkpoint, so that
   * the message comes back and lists after the pages checkpointed; if not, {@link stoppedBy} judges it.
   */
  throwsRetryable: boolean;
  /** The end an error makes of the listing (the kind logs it), and whether the staged files are kept. */
  stoppedBy(error: unknown): { end: E; keepsFiles: boolean };
  /**
   * Called whenever everything listed is in stored pieces: when a delivery finds pieces, and after
   * each piece it stores (start-run sends the plan messages of the campaigns listed).
   */
  onStored?: ((listed: readonly L[]) => Promise<void>) | undefined;
}

/**
 * Lists from where the stored pieces end (page 1 when there are none). With a `deadline`, stops
 * before it: the pages read are checkpointed and the listing ends handed on. A retryable API
 * failure the kind throws is thrown after checkpointing the pages read.
 */
export async function listCheckpointed<
  T extends { id: number },
  P extends PieceBase,
  N extends { digest: string },
  L,
  E,
>(
  deps: ExportDeps,
  kind: ListingKind<T, P, N, L, E>,
  deadline?: ListingDeadline,
): Promise<CheckpointedListing<L, E>> {
  for (;;) {
    const listing = await listFromPieces(deps, kind, deadline);
    if (listing) return listing;
    // Another delivery stored the piece this one was about to: its chain is the listing; this
    // delivery's pages since its last piece are dropped, and it reads on after it.
    deps.log.info(`${kind.label} checkpointed by another delivery; resuming from its pieces`, kind.logFields);
  }
}

/** The pages a delivery read since its last piece, and the entries, rows and raw lines they gave. */
interface Tail<N> {
  firstPage: number;
  pages: number;
  cursor: PieceBase['cursor'] | undefined;
  entries: N[];
  invalidDigests: string[];
  rows: TableBuffer;
  rawLines: JsonLinesBuffer;
  tally: ListingTally;
}

/** One delivery's listing on the stored chain; undefined when another delivery's piece won. */
async function listFromPieces<
  T extends { id: number },
  P extends PieceBase,
  N extends { digest: string },
  L,
  E,
>(
  deps: ExportDeps,
  kind: ListingKind<T, P, N, L, E>,
  deadline: ListingDeadline | undefined,
): Promise<CheckpointedListing<L, E> | undefined> {
  const { run } = kind;
  const listed: L[] = [];
  const staged: StagedFile[] = [];
  const memory: ListingMemory = emptyListingMemory();
  let invalid = 0;
  let duplicates = 0;
  let last: P | undefined;
  // Streamed: one piece in memory at a time, and what the listing must remember of it.
  for await (const piece of kind.pieces()) {
    const parts = kind.partsOf(piece);
    for (const entry of parts.entries) {
      listed.push(kind.listedOf(entry));
      memory.firstCopy.set(kind.idOf(entry), entry.digest);
    }
    for (const digest of piece.invalid_digests) memory.invalidSeen.add(digest);
    invalid += parts.invalid;
    duplicates += piece.duplicates;
    staged.push(...piece.staged);
    last = piece;
  }
  // A delivery that stored a piece and died before doing what follows it: done now.
  if (last) await kind.onStored?.(listed);
  const start: ListingStart | undefined = last ? { cursor: cursorOf(last), memory } : undefined;
  const exportedAt = last ? last.exported_at : deps.now().toISOString();
  const ctx = { runId: run.run_id, exportedAt: new Date(exportedAt) };
  const token = randomHex(randomOf(deps), 8);
  let pieceNumber = last ? last.piece + 1 : 0;
  const newTail = (firstPage: number, position: number): Tail<N> => {
    const rawLines = new JsonLinesBuffer();
    return {
      firstPage,
      pages: 0,
      cursor: undefined,
      entries: [],
      invalidDigests: [],
      rows: new TableBuffer(run),
      rawLines,
      tally: new ListingTally(deps, run, rawLines, kind.campaignId, position),
    };
  };
  let tail = newTail(last ? last.cursor.next_page : 1, last?.position ?? 0);
  let pagesRead = 0;

  /** Stages the tail's files and stores it as the next piece; false when another delivery's is stored. */
  const checkpoint = async (): Promise<boolean> => {
    if (!tail.cursor) return true; // No page since the last piece.
    const stem = kind.pieceStem(pieceNumber, token);
    const files = await stageStep(deps.storage, run.run_id, kind.entity, stem, tail.rows, tail.rawLines);
    const base: PieceBase = {
      piece: pieceNumber,
      token,
      first_page: tail.firstPage,
      cursor: tail.cursor,
      position: tail.tally.position,
      exported_at: exportedAt,
      invalid_digests: tail.invalidDigests,
      duplicates: tail.tally.duplicates,
      staged: files,
    };
    if (!(await kind.claim(kind.pieceOf(base, tail.entries, tail.tally.invalid)))) return false;
    invalid += tail.tally.invalid;
    duplicates += base.duplicates;
    staged.push(...files);
    pieceNumber++;
    tail = newTail(base.cursor.next_page, base.position);
    await kind.onStored?.(listed);
    return true;
  };

  let end: CheckpointedEnd<E> = { kind: 'complete' };
  let keepsFiles = true;
  try {
    for await (const page of kind.pages(start)) {
      pagesRead++;
      // Every item the tally hands back is a first copy, so the pager learned its digest on this page.
      const digests = new Map(page.learned.firstCopies);
      for (const item of page.items) {
        const value = await tail.tally.take(item);
        if (value === undefined) continue;
        const entry = kind.add(value, item.raw, digests.get(value.id) ?? '', tail.rows, ctx);
        listed.push(kind.listedOf(entry));
        tail.entries.push(entry);
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
      if (tail.pages >= kind.pagesPerPiece && !(await checkpoint())) return undefined;
      // Checked after a page, never before the first: every delivery moves the listing on by a
      // page at least, so handing on cannot go round without end.
      if (stopReached(deadline, kind.stopMs)) {
        if (!(await checkpoint())) return undefined;
        const nextPage = page.cursor.nextPage;
        return { end: { kind: 'handed-on', nextPage }, listed, invalid, duplicates, staged, pagesRead };
      }
    }
  } catch (error) {
    if (kind.throwsRetryable && error instanceof ApiError && error.retryable) {
      // Retries ran out on 5xx/429/timeouts: thrown, so the message is tried again (an SQS
      // redelivery), which starts after the pages read here.
      await checkpoint().catch((checkpointError: unknown) =>
        deps.log.warn(`could not checkpoint the ${kind.label} before handing it back`, {
          ...kind.logFields,
          error: describeError(checkpointError),
        }),
      );
      throw error;
    }
    ({ end, keepsFiles } = kind.stoppedBy(error));
  }
  invalid += tail.tally.invalid;
  duplicates += tail.tally.duplicates;
  if (!keepsFiles) return { end, listed, invalid, duplicates, staged: [], pagesRead };
  // Named by this delivery (but as the kind says): a concurrent delivery stages its own files,
  // and only the files of the record that is stored are ever published.
  const stem = kind.tailStem(pieceNumber, token);
  const files = await stageStep(deps.storage, run.run_id, kind.entity, stem, tail.rows, tail.rawLines);
  return { end, listed, invalid, duplicates, staged: [...staged, ...files], pagesRead };
}
