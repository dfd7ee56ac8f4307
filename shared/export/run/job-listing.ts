/**
 * A campaign's job listing as plan-campaign reads it: a checkpointed listing
 * (`checkpointed-listing.ts`) of the campaign's jobs, a piece every {@link PAGES_PER_PIECE} pages
 * with the pages' jobs rows and raw lines staged beside it. What is particular to it: each job
 * is remembered with its fingerprint (the incremental state), a retryable failure is always
 * thrown for the message to come back, and a listing that contradicts itself leaves the
 * campaign unlisted in this run.
 */

import { ApiError, describeError, ListingError } from '../../errors.js';
import { jobRow } from '../format/flatten.js';
import { fingerprint } from '../state/fingerprint.js';
import { claimPiece, type ListingPiece, readPieces } from '../state/listing-pieces.js';
import { type Fatal, fatalOf, type PlanMessage, type UnitJob } from '../state/records.js';
import {
  type CheckpointedEnd,
  type CheckpointedListing,
  type ListingDeadline,
  listCheckpointed,
} from './checkpointed-listing.js';
import type { ApiClient, ExportDeps } from './context.js';
import { REQUEST_WORST_MS, stopStartingAfter } from './time-budget.js';

// Where plan-campaign's callers (the handler, the tests) have always found it.
export type { ListingDeadline } from './checkpointed-listing.js';

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

/** What a piece remembers of a job first listed. */
type JobEntry = ListingPiece['jobs'][number];

/** How a job listing stops short of its end, beside complete and handed on. */
export type JobListingStop =
  /** The pages contradicted themselves (ListingError): asking again would read the same. */
  | { kind: 'unlisted'; reason: string }
  /** 404: the campaign went away while it was listed. */
  | { kind: 'gone' }
  /** An answer that stops the run (revoked key, IP restriction). */
  | { kind: 'fatal'; fatal: Fatal };

/** How a delivery's listing ended. */
export type ListingEnd = CheckpointedEnd<JobListingStop>;

/**
 * A delivery's job listing: `listed`, the valid jobs (id and fingerprint); `staged`, the jobs
 * files of the whole listing, none when unlisted (the jobs table holds whole listings only).
 */
export type JobListing = CheckpointedListing<UnitJob, JobListingStop>;

/**
 * Lists a campaign's jobs from where its stored pieces end (page 1 when there are none). With
 * a `deadline`, stops before it: the pages read are checkpointed and the listing ends handed on.
 * A retryable API failure (retries spent) is thrown, after checkpointing the pages read.
 */
export function listCampaignJobs(
  deps: ExportDeps,
  message: PlanMessage,
  api: ApiClient,
  deadline?: ListingDeadline,
): Promise<JobListing> {
  const { campaign_id: campaignId, run_id: runId } = message;
  const logFields = { campaign_id: campaignId };
  return listCheckpointed(
    deps,
    {
      run: message,
      entity: 'jobs',
      campaignId,
      pagesPerPiece: PAGES_PER_PIECE,
      stopMs: listingStopMs,
      label: 'listing',
      logFields,
      pieces: () => readPieces(deps.storage, runId, campaignId),
      claim: (piece) => claimPiece(deps.storage, runId, piece),
      pieceOf: (base, jobs: JobEntry[], invalid): ListingPiece => ({
        campaign_id: campaignId,
        ...base,
        jobs,
        jobs_invalid: invalid,
      }),
      partsOf: (piece) => ({ entries: piece.jobs, invalid: piece.jobs_invalid }),
      idOf: (job) => job.job_id,
      listedOf: (job): UnitJob => ({ job_id: job.job_id, fp: job.fp }),
      pages: (start) => api.jobPages(campaignId, start),
      add: (job, raw, digest, rows, ctx): JobEntry => {
        rows.add('jobs', jobRow(job, campaignId, ctx));
        return { job_id: job.id, fp: fingerprint(raw), digest };
      },
      pieceStem: (piece, token) => `c${campaignId}-p${piece}-${token}`,
      tailStem: (_piece, token) => `c${campaignId}-${token}`,
      throwsRetryable: true,
      stoppedBy: (error): { end: JobListingStop; keepsFiles: boolean } => {
        if (error instanceof ListingError) {
          // Asking again would read the same contradictions: unlisted in this run, tried next
          // run, and no files (the jobs table holds whole listings only).
          const reason = describeError(error);
          deps.log.warn('listing jobs stopped', { ...logFields, error: reason });
          return { end: { kind: 'unlisted', reason }, keepsFiles: false };
        }
        if (error instanceof ApiError && error.status === 404) {
          // Listed a moment ago, gone now: no jobs to account for.
          deps.log.warn('campaign not found while listing its jobs', logFields);
          return { end: { kind: 'gone' }, keepsFiles: true };
        }
        const fatal = fatalOf(error);
        deps.log.error('listing jobs failed', { ...logFields, ...fatal });
        return { end: { kind: 'fatal', fatal }, keepsFiles: true };
      },
    },
    deadline,
  );
}
