/**
 * Step 2 of a run, once per campaign: list the campaign's jobs, stage the jobs snapshot,
 * compare with the incremental state, and cut the reports to fetch into units of work.
 */
import { ApiError, describeError, ListingError, PreconditionFailedError } from '../../errors.js';
import { RUN_DEFAULTS } from '../../run-defaults.js';
import { jobRow } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { STATE_KEYS } from '../layout.js';
import { fingerprint } from '../state/fingerprint.js';
import { loadCampaignState, planJobs } from '../state/incremental.js';
import {
  encodeRecord,
  type Fatal,
  fatalOf,
  type PlanMessage,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  type RunRef,
  type Unit,
  type UnitJob,
} from '../state/records.js';
import { type ExportDeps, randomHex, randomOf, requestCounts } from './context.js';
import { ListingTally } from './listing.js';
import { stageStep } from './staging.js';

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

export async function planCampaign(
  deps: ExportDeps,
  message: PlanMessage,
  unitSize: number = DEFAULT_UNIT_SIZE,
): Promise<PlannedCampaign> {
  const { campaign_id: campaignId, ...run } = message;
  // A plan message delivered again (an SQS duplicate, a partly failed send) re-sends the units
  // it cut the first time: listing again could cut them differently and fetch a job twice.
  const planKey = STATE_KEYS.plan(run.run_id, campaignId);
  const existing = await deps.storage.get(planKey);
  if (existing) {
    const record = parseRecord(PlanRecordSchema, existing.body, planKey);
    return { record, units: unitsOf(run, campaignId, record.fetch, record.unit_size) };
  }
  const api = deps.api();
  const listed: UnitJob[] = [];
  const rows = new TableBuffer(run);
  const rawLines = new JsonLinesBuffer();
  const tally = new ListingTally(deps, message, rawLines, campaignId);
  let gone = false;
  let unlisted: string | undefined;
  let fatal: Fatal | undefined;
  const ctx = { runId: run.run_id, exportedAt: deps.now() };
  try {
    for await (const item of api.jobs(campaignId)) {
      const job = await tally.take(item);
      if (job === undefined) continue;
      listed.push({ job_id: job.id, fp: fingerprint(item.raw) });
      rows.add('jobs', jobRow(job, campaignId, ctx));
    }
  } catch (error) {
    // Retries ran out on 5xx/429/timeouts: throw, so the plan is tried again (an SQS redelivery);
    // a campaign that never gets listed shows in the manifest as unlisted.
    if (error instanceof ApiError && error.retryable) throw error;
    if (error instanceof ListingError) {
      // Asking again would read the same contradictions: unlisted in this run, tried next run.
      unlisted = describeError(error);
      deps.log.warn('listing jobs stopped', { campaign_id: campaignId, error: unlisted });
    } else if (error instanceof ApiError && error.status === 404) {
      gone = true; // Listed a moment ago, gone now: no jobs to account for.
      deps.log.warn('campaign not found while listing its jobs', { campaign_id: campaignId });
    } else {
      fatal = fatalOf(error);
      deps.log.error('listing jobs failed', { campaign_id: campaignId, ...fatal });
    }
  }

  // A listing cut short stages no snapshot: the jobs table holds whole listings only.
  // Named by this delivery: a concurrent delivery of the same message stages its own files, and
  // only the files of the plan that is stored are ever published.
  const stem = `c${campaignId}-${randomHex(randomOf(deps), 8)}`;
  const staged = unlisted ? [] : await stageStep(deps.storage, run.run_id, 'jobs', stem, rows, rawLines);

  let fetch: UnitJob[] = [];
  let unchanged: UnitJob[] = [];
  if (!fatal && !unlisted) {
    const { state } = await loadCampaignState(deps.storage, campaignId);
    const plan = planJobs(state, listed, run.mode);
    unchanged = plan.unchanged;
    fetch = plan.fetch;
  }
  const units = unitsOf(run, campaignId, fetch, unitSize);
  const record: PlanRecord = {
    campaign_id: campaignId,
    jobs: listed.length + tally.invalid,
    units: units.map((u) => u.unit),
    fetch,
    unit_size: unitSize,
    unchanged,
    jobs_invalid: tally.invalid,
    duplicates: tally.duplicates,
    ...(unlisted ? { unlisted } : {}),
    requests: requestCounts(api),
    campaign_gone: gone,
    staged,
    ...(fatal ? { fatal } : {}),
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
    return { record: winner, units: unitsOf(run, campaignId, winner.fetch, winner.unit_size) };
  }
  return { record, units };
}
