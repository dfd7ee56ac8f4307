/**
 * Step 2 of a run, once per campaign: list the campaign's jobs (checkpointed, so that a listing
 * longer than one invocation resumes: `job-listing.ts`), stage the jobs snapshot, compare with
 * the incremental state, and cut the reports to fetch into units of work.
 */
import { ExporterError, PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import { RUN_DEFAULTS } from '../../run-defaults.js';
import { loadCampaignState, planJobs } from '../state/incremental.js';
import {
  encodeRecord,
  type PlanMessage,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  type RunRef,
  type Unit,
  type UnitJob,
} from '../state/records.js';
import { type ExportDeps, requestCounts } from './context.js';
import { recordUnrecordedRequests } from './finish-run.js';
import { type ListingDeadline, listCampaignJobs } from './job-listing.js';

/** Reports per unit of work by default (RUN_DEFAULTS.unitSize): one file per table per unit, so a unit costs about eight storage writes. */
export const DEFAULT_UNIT_SIZE: number = RUN_DEFAULTS.unitSize.value;

export interface PlannedCampaign {
  record: PlanRecord;
  units: Unit[];
}

/** The units of a campaign's fetch list: consecutive chunks of `unitSize` jobs, named by position. */
export function unitsOf(
  run: RunRef,
  campaignId: number,
  fetch: readonly UnitJob[],
  unitSize: number,
): Unit[] {
  const units: Unit[] = [];
  for (let i = 0; i * unitSize < fetch.length; i++) {
    units.push({
      ...run,
      campaign_id: campaignId,
      unit: `c${campaignId}-u${i}`,
      jobs: fetch.slice(i * unitSize, (i + 1) * unitSize),
    });
  }
  return units;
}

export interface PlanOptions {
  /** Reports per unit (default {@link DEFAULT_UNIT_SIZE}). */
  unitSize?: number | undefined;
  /** When the step must have handed on (AWS: the invocation's end); without one it lists to the end. */
  deadline?: ListingDeadline | undefined;
}

/** What one delivery of a plan message came to: the plan, or a listing handed on to a later delivery. */
export type PlanStep =
  | ({ kind: 'planned' } & PlannedCampaign)
  /** Checkpointed before the deadline: a later delivery of the message lists from `nextPage` on. */
  | { kind: 'handed-on'; nextPage: number; pagesRead: number };

/**
 * Plans one campaign to the end, in this process (the CLI, the tests): no deadline, so the
 * listing never hands on, though it is checkpointed all the same.
 */
export async function planCampaign(
  deps: ExportDeps,
  message: PlanMessage,
  unitSize: number = DEFAULT_UNIT_SIZE,
): Promise<PlannedCampaign> {
  const step = await planCampaignStep(deps, message, { unitSize });
  if (step.kind === 'handed-on') {
    // Only a deadline hands on; kept as a check so that a change to that shows here at once.
    throw new ExporterError(`campaign ${message.campaign_id}: the listing handed on without a deadline`);
  }
  return { record: step.record, units: step.units };
}

/**
 * One delivery of a plan message: the stored plan if there is one; otherwise lists the
 * campaign's jobs from where its checkpointed pieces end, and either plans it (stages the jobs
 * snapshot, compares with the incremental state, cuts the units, stores the plan record) or,
 * when `deadline` comes first, hands on. Any number of deliveries, at once or apart, store one
 * plan and return its units.
 *
 * @example
 * const step = await planCampaignStep(deps, message, { deadline: { remainingMs: () => ctx.getRemainingTimeInMillis() } });
 * if (step.kind === 'handed-on') await sendAgain(message); // the next delivery resumes
 */
export async function planCampaignStep(
  deps: ExportDeps,
  message: PlanMessage,
  options: PlanOptions = {},
): Promise<PlanStep> {
  const unitSize = options.unitSize ?? DEFAULT_UNIT_SIZE;
  const { campaign_id: campaignId, ...run } = message;
  // A plan message delivered again (an SQS duplicate, a partly failed send) re-sends the units
  // it cut the first time: listing again could cut them differently and fetch a job twice.
  const planKey = STATE_KEYS.plan(run.run_id, campaignId);
  const existing = await deps.storage.get(planKey);
  if (existing) {
    const record = parseRecord(PlanRecordSchema, existing.body, planKey);
    return { kind: 'planned', record, units: unitsOf(run, campaignId, record.fetch, record.unit_size) };
  }
  const api = deps.api();
  const listing = await listCampaignJobs(deps, message, api, options.deadline);
  const { end } = listing;
  if (end.kind === 'handed-on') {
    // This delivery's requests have no plan record to go in: kept for the manifest as a failed step's are.
    await recordUnrecordedRequests(deps, run.run_id, requestCounts(api));
    deps.log.info('listing handed on before the deadline', {
      campaign_id: campaignId,
      pages_read: listing.pagesRead,
      next_page: end.nextPage,
    });
    return { kind: 'handed-on', nextPage: end.nextPage, pagesRead: listing.pagesRead };
  }

  let fetch: UnitJob[] = [];
  let unchanged: UnitJob[] = [];
  if (end.kind === 'complete' || end.kind === 'gone') {
    const { state } = await loadCampaignState(deps.storage, campaignId);
    const plan = planJobs(state, listing.listed, run.mode);
    unchanged = plan.unchanged;
    fetch = plan.fetch;
  }
  const units = unitsOf(run, campaignId, fetch, unitSize);
  const record: PlanRecord = {
    campaign_id: campaignId,
    jobs: listing.listed.length + listing.invalid,
    units: units.map((u) => u.unit),
    fetch,
    unit_size: unitSize,
    unchanged,
    jobs_invalid: listing.invalid,
    duplicates: listing.duplicates,
    ...(end.kind === 'unlisted' ? { unlisted: end.reason } : {}),
    requests: requestCounts(api),
    campaign_gone: end.kind === 'gone',
    staged: listing.staged,
    ...(end.kind === 'fatal' ? { fatal: end.fatal } : {}),
  };
  try {
    // Claimed: of two deliveries at once, the first plan stored is the plan, and both send its units.
    await deps.storage.put(planKey, encodeRecord(record), { ifNoneMatch: '*' });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const stored = await deps.storage.get(planKey);
    if (!stored) throw error;
    const winner = parseRecord(PlanRecordSchema, stored.body, planKey);
    deps.log.info('campaign planned by another delivery of its message', { campaign_id: campaignId });
    return {
      kind: 'planned',
      record: winner,
      units: unitsOf(run, campaignId, winner.fetch, winner.unit_size),
    };
  }
  return { kind: 'planned', record, units };
}
