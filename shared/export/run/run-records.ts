/**
 * Reading a run's records (`state/runs/<run_id>/`): the run record start-run wrote, one plan
 * record per campaign and one summary per unit. A run of a million reports has about ten
 * thousand unit records (~30 KB of heap each once parsed), so the closing reads them as a stream,
 * one campaign at a time (`campaignsOf`): its memory is one campaign's records, whatever the
 * run's size; so does `aws status` (functions/cli/aws-runs.ts). `readRunRecords` holds them all, for tests.
 */

import { STATE_KEYS } from '../../layout.js';
import { listAll, type Storage } from '../../storage/storage.js';
import {
  addRequestCounts,
  emptyRequestCounts,
  type PlanRecord,
  PlanRecordSchema,
  parseRecord,
  type RequestCounts,
  RequestCountsSchema,
  type RunRecord,
  RunRecordSchema,
  type UnitSummary,
  UnitSummarySchema,
} from '../state/records.js';
import type { ExportDeps } from './context.js';
import { mapPool } from './pool.js';

/** Records read at once. */
const READ_CONCURRENCY = 8;

/** A run's records, all in memory. */
export interface RunRecords {
  record: RunRecord;
  plans: Map<number, PlanRecord>;
  units: Map<string, UnitSummary>;
  /** Requests of steps that failed before writing their records. */
  unrecorded: RequestCounts;
}

/** One campaign's records: its plan (absent when it was never planned) and its units' summaries. */
export interface CampaignRecords {
  campaignId: number;
  plan: PlanRecord | undefined;
  units: ReadonlyMap<string, UnitSummary>;
}

/**
 * A run's records as a closing reads them: the run record, and its campaigns one at a time, in
 * the run record's order. `campaigns()` may be iterated more than once.
 */
export interface RecordsSource {
  record: RunRecord;
  unrecorded: RequestCounts;
  campaigns(): AsyncIterable<CampaignRecords>;
}

/** Thrown inside a read when a record listed a moment ago is gone: another finisher closed the run. */
export class RunVanished extends Error {
  override name = 'RunVanished';
}

async function readRecord<T>(
  storage: Storage,
  key: string,
  schema: Parameters<typeof parseRecord<T>>[0],
): Promise<T | undefined> {
  const found = await storage.get(key);
  return found ? parseRecord(schema, found.body, key) : undefined;
}

/** The run record alone (one GET); `undefined` when the run has none. */
export function readRunRecord(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<RunRecord | undefined> {
  return readRecord(deps.storage, STATE_KEYS.runRecord(runId), RunRecordSchema);
}

/** The requests of a run's steps that failed before writing their records. */
async function readUnrecorded(storage: Storage, runId: string): Promise<RequestCounts> {
  let total = emptyRequestCounts();
  const keys = await listAll(storage, STATE_KEYS.requestsPrefix(runId));
  await mapPool(keys, READ_CONCURRENCY, async (key) => {
    const counts = await readRecord(storage, key, RequestCountsSchema);
    if (counts) total = addRequestCounts(total, counts);
  });
  return total;
}

/** The plan of each campaign that has one, by listing (no reads). */
async function plannedCampaigns(storage: Storage, runId: string): Promise<Set<number>> {
  const prefix = STATE_KEYS.plansPrefix(runId);
  const ids = new Set<number>();
  for (const key of await listAll(storage, prefix)) {
    const id = Number(key.slice(prefix.length).replace(/\.json$/, ''));
    if (Number.isInteger(id)) ids.add(id);
  }
  return ids;
}

/** Unit names that have a summary, by listing (no reads). */
async function recordedUnits(storage: Storage, runId: string): Promise<Set<string>> {
  const prefix = STATE_KEYS.unitsPrefix(runId);
  const names = new Set<string>();
  for await (const key of storage.list(prefix)) names.add(key.slice(prefix.length).replace(/\.json$/, ''));
  return names;
}

/**
 * A run's records in storage as a `RecordsSource`; `undefined` when the run has no run record.
 * Reading a campaign throws `RunVanished` when a record listed a moment ago is gone.
 */
export async function recordsInStorage(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<RecordsSource | undefined> {
  const { storage } = deps;
  const record = await readRunRecord(deps, runId);
  if (!record) return undefined;
  const unrecorded = await readUnrecorded(storage, runId);
  return {
    record,
    unrecorded,
    async *campaigns() {
      const planned = await plannedCampaigns(storage, runId);
      const recorded = await recordedUnits(storage, runId);
      for (const campaignId of record.campaign_ids) {
        if (!planned.has(campaignId)) {
          yield { campaignId, plan: undefined, units: new Map() };
          continue;
        }
        const plan = await readRecord(storage, STATE_KEYS.plan(runId, campaignId), PlanRecordSchema);
        if (!plan) throw new RunVanished(`plan ${campaignId} of run ${runId} is gone`);
        const units = new Map<string, UnitSummary>();
        await mapPool(
          plan.units.filter((name) => recorded.has(name)),
          READ_CONCURRENCY,
          async (name) => {
            const unit = await readRecord(storage, STATE_KEYS.unit(runId, name), UnitSummarySchema);
            if (!unit) throw new RunVanished(`unit ${name} of run ${runId} is gone`);
            units.set(name, unit);
          },
        );
        yield { campaignId, plan, units };
      }
    },
  };
}

/** Records held in memory as a `RecordsSource` (a CLI's own run, tests). */
export function recordsInMemory(records: RunRecords): RecordsSource {
  return {
    record: records.record,
    unrecorded: records.unrecorded,
    async *campaigns() {
      for (const campaignId of records.record.campaign_ids) {
        const plan = records.plans.get(campaignId);
        const units = new Map<string, UnitSummary>();
        for (const name of plan?.units ?? []) {
          const unit = records.units.get(name);
          if (unit) units.set(name, unit);
        }
        yield { campaignId, plan, units };
      }
    },
  };
}

/**
 * Reads all of a run's records into memory; `undefined` when the run has none (finished
 * already, or unknown). For tests: a closing and `aws status` stream them.
 */
export async function readRunRecords(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<RunRecords | undefined> {
  try {
    const source = await recordsInStorage(deps, runId);
    if (!source) return undefined;
    const plans = new Map<number, PlanRecord>();
    const units = new Map<string, UnitSummary>();
    for await (const campaign of source.campaigns()) {
      if (campaign.plan) plans.set(campaign.campaignId, campaign.plan);
      for (const [name, unit] of campaign.units) units.set(name, unit);
    }
    // The run record read last, as before: a run closed meanwhile has lost it.
    if (!(await readRunRecord(deps, runId))) return undefined;
    return { record: source.record, plans, units, unrecorded: source.unrecorded };
  } catch (error) {
    if (error instanceof RunVanished) return undefined;
    throw error;
  }
}

/** True when every campaign was planned and every planned job has a final outcome. */
export function isComplete({ record, plans, units }: RunRecords): boolean {
  if (record.fatal) return true;
  if (record.campaign_ids.some((id) => !plans.has(id))) return false;
  for (const plan of plans.values()) {
    for (const name of plan.units) {
      const unit = units.get(name);
      if (!unit || Object.values(unit.jobs).some((r) => r.outcome === 'pending')) return false;
    }
  }
  return true;
}

/**
 * `isComplete` over records in storage, reading as little as it can: the plans' and units'
 * listings first (a campaign not planned or a unit not recorded settles it), then one campaign's
 * records at a time. False when the run vanished meanwhile.
 */
export async function isCompleteInStorage(
  deps: Pick<ExportDeps, 'storage'>,
  record: RunRecord,
): Promise<boolean> {
  if (record.fatal) return true;
  const runId = record.run_id;
  const planned = await plannedCampaigns(deps.storage, runId);
  if (record.campaign_ids.some((id) => !planned.has(id))) return false;
  const recorded = await recordedUnits(deps.storage, runId);
  for (const campaignId of record.campaign_ids) {
    const plan = await readRecord(deps.storage, STATE_KEYS.plan(runId, campaignId), PlanRecordSchema);
    if (!plan || plan.units.some((name) => !recorded.has(name))) return false;
    let pending = false;
    await mapPool(plan.units, READ_CONCURRENCY, async (name) => {
      if (pending) return;
      const unit = await readRecord(deps.storage, STATE_KEYS.unit(runId, name), UnitSummarySchema);
      if (!unit || Object.values(unit.jobs).some((r) => r.outcome === 'pending')) pending = true;
    });
    if (pending) return false;
  }
  return true;
}
