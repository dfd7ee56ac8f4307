/**
 * Incremental state: one object per campaign, `state/campaigns/<id>.json`, recording for each
 * job the fingerprint of its list item and its outcome in the latest run that saw it.
 * Reading costs one GET per campaign; updates are compare-and-swap (ETag), so two runs
 * finishing at once cannot lose each other's updates, and the later run always wins.
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { encodeRecord, JobOutcomeSchema, type Mode, parseRecord, type UnitJob } from './records.js';

export const JobStateSchema = z.object({
  fp: z.string(),
  outcome: JobOutcomeSchema.exclude(['unchanged']),
  run_id: z.string(),
});
export type JobState = z.infer<typeof JobStateSchema>;

export const CampaignStateSchema = z.object({
  campaign_id: z.number().int(),
  jobs: z.record(z.string(), JobStateSchema),
});
export type CampaignState = z.infer<typeof CampaignStateSchema>;

export interface LoadedState {
  state: CampaignState;
  /** undefined when the campaign has no state yet. */
  etag: string | undefined;
}

/** Reads a campaign's state (one GET); an empty state when there is none. */
export async function loadCampaignState(storage: Storage, campaignId: number): Promise<LoadedState> {
  const key = STATE_KEYS.campaign(campaignId);
  const found = await storage.get(key);
  if (!found) return { state: { campaign_id: campaignId, jobs: {} }, etag: undefined };
  return { state: parseRecord(CampaignStateSchema, found.body, key), etag: found.etag };
}

export interface JobPlan {
  fetch: UnitJob[];
  unchanged: UnitJob[];
}

/**
 * Which listed jobs to fetch. Full: all. Incremental: a job never exported, whose list item
 * changed since its export, or whose last outcome was anything but exported.
 */
export function planJobs(state: CampaignState, listed: readonly UnitJob[], mode: Mode): JobPlan {
  const plan: JobPlan = { fetch: [], unchanged: [] };
  for (const job of listed) {
    const previous = state.jobs[job.job_id];
    const unchanged = mode === 'incremental' && previous?.outcome === 'exported' && previous.fp === job.fp;
    (unchanged ? plan.unchanged : plan.fetch).push(job);
  }
  return plan;
}

/**
 * A job's outcome in a run, as recorded in the state. `unchanged`: the run did not fetch it, its
 * entry stays as it is (naming the run whose rows hold it). Closing records before 0.3 wrote
 * unchanged jobs as `exported`.
 */
export const RecordedOutcomeSchema = z.object({
  job_id: z.number().int(),
  fp: z.string(),
  outcome: z.union([JobStateSchema.shape.outcome, z.literal('unchanged')]),
});
export type RecordedOutcome = z.infer<typeof RecordedOutcomeSchema>;

/** Applies one run's outcomes to a state: entries of later runs are kept; jobs the run did not list are dropped. */
export function applyOutcomes(
  state: CampaignState,
  runId: string,
  outcomes: readonly RecordedOutcome[],
  listed: ReadonlySet<number>,
): CampaignState {
  const jobs: Record<string, JobState> = {};
  for (const [id, entry] of Object.entries(state.jobs)) {
    if (listed.has(Number(id)) || entry.run_id > runId) jobs[id] = entry;
  }
  for (const o of outcomes) {
    const current = jobs[o.job_id];
    if (current && current.run_id > runId) continue;
    // Unchanged: its rows are where its entry says. (No entry: the next run fetches it.)
    if (o.outcome === 'unchanged') continue;
    // Deferred (not fetched before the run's deadline): rows exported before for the same list
    // item still stand; anything else is asked for again.
    if (o.outcome === 'deferred' && current?.outcome === 'exported' && current.fp === o.fp) continue;
    // The same outcome for the same list item: the entry stands (an exported job's rows are in
    // its run too), so a run that changed nothing writes nothing.
    if (current && current.fp === o.fp && current.outcome === o.outcome) continue;
    jobs[o.job_id] = { fp: o.fp, outcome: o.outcome, run_id: runId };
  }
  return { campaign_id: state.campaign_id, jobs };
}

/** Attempts before a contended state update gives up (each one re-reads the object). */
const MAX_STATE_WRITE_ATTEMPTS = 8;

/**
 * Records a run's outcomes for one campaign with compare-and-swap, retrying lost races. A state
 * the outcomes do not change is not written again: an incremental run over unchanged jobs
 * writes nothing.
 */
export async function saveOutcomes(
  storage: Storage,
  campaignId: number,
  runId: string,
  outcomes: readonly RecordedOutcome[],
  listed: ReadonlySet<number>,
  jitter: { random?: (() => number) | undefined; sleep?: ((ms: number) => Promise<void>) | undefined } = {},
): Promise<void> {
  const random = jitter.random ?? Math.random;
  const sleep = jitter.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const key = STATE_KEYS.campaign(campaignId);
  let loaded = await loadCampaignState(storage, campaignId);
  for (let attempt = 1; ; attempt++) {
    const next = applyOutcomes(loaded.state, runId, outcomes, listed);
    if (loaded.etag !== undefined && sameState(loaded.state, next)) return;
    try {
      await storage.put(key, encodeRecord(next), {
        ...(loaded.etag ? { ifMatch: loaded.etag } : { ifNoneMatch: '*' }),
      });
      return;
    } catch (error) {
      if (!(error instanceof PreconditionFailedError) || attempt >= MAX_STATE_WRITE_ATTEMPTS) throw error;
      await sleep(random() * 50 * attempt);
      loaded = await loadCampaignState(storage, campaignId);
    }
  }
}

/** Two states with the same entries, in any key order. */
function sameState(a: CampaignState, b: CampaignState): boolean {
  const ids = Object.keys(a.jobs);
  if (ids.length !== Object.keys(b.jobs).length) return false;
  return ids.every((id) => {
    const x = a.jobs[id];
    const y = b.jobs[id];
    return y !== undefined && x?.fp === y.fp && x.outcome === y.outcome && x.run_id === y.run_id;
  });
}

/** The campaigns that have a state (one listing of `state/campaigns/`). */
export async function campaignsWithState(storage: Storage): Promise<number[]> {
  const prefix = STATE_KEYS.campaign(0).slice(0, -'0.json'.length);
  const ids: number[] = [];
  for await (const key of storage.list(prefix)) {
    const id = Number(key.slice(prefix.length, -'.json'.length));
    if (key.endsWith('.json') && Number.isInteger(id)) ids.push(id);
  }
  return ids;
}

/**
 * Forgets, in one campaign's state, the entries of runs before `runId`: a full run that switches
 * the output's table format does so for every campaign before recording the switch, since those
 * runs' rows are in the other format's tables. A job such a run exported and the switching run
 * did not (its campaign never planned, its unit lost, deferred) is then asked for again by the
 * next run, instead of counting unchanged with rows the new format's tables lack. Entries of the
 * switching run and of later runs stay; forgetting again changes nothing.
 */
export function forgetRunsBefore(
  storage: Storage,
  campaignId: number,
  runId: string,
  jitter: Parameters<typeof saveOutcomes>[5] = {},
): Promise<void> {
  // No outcomes and nothing listed: only entries of later runs are kept (`applyOutcomes`).
  return saveOutcomes(storage, campaignId, runId, [], new Set(), jitter);
}
