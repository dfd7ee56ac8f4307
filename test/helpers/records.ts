/** Builders for the run records tests put in storage or hand to the finisher. */

import {
  encodeRecord,
  type PlanRecord,
  type RequestCounts,
  type RunRecord,
  type UnitSummary,
} from '../../shared/export/state/records.js';
import { STATE_KEYS } from '../../shared/layout.js';
import type { Storage } from '../../shared/storage/storage.js';

export const TEST_RUN_ID = '20261122T031500Z-a1b2c3';

/** A run record of a run with campaign 1, overridable field by field. */
export function runRecord(overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: TEST_RUN_ID,
    dt: '2026-11-22',
    mode: 'incremental',
    driver: 'queues',
    started_at: '2026-11-22T03:15:00.000Z',
    campaign_ids: [1],
    campaigns_invalid: 0,
    duplicates: 0,
    staged: [],
    requests: { total: 0, retried: 0, by_status: {} },
    ...overrides,
  };
}

/** A plan of campaign 1 with one unit `c1-u0` and nothing else listed, overridable field by field. */
export function planRecord(overrides: Partial<PlanRecord> = {}): PlanRecord {
  return {
    campaign_id: 1,
    jobs: 0,
    units: ['c1-u0'],
    fetch: [],
    unit_size: 100,
    unchanged: [],
    jobs_invalid: 0,
    duplicates: 0,
    requests: { total: 0, retried: 0, by_status: {} },
    campaign_gone: false,
    staged: [],
    ...overrides,
  };
}

/**
 * Keys under `state/runs/` that belong to runs not closed: a closed run keeps its tombstone and
 * its shrunk closing record for a day (shared/export/state/tombstone.ts), nothing else.
 */
export function openRunKeys(keys: readonly string[]): string[] {
  const closed = new Set(keys.filter((k) => k.endsWith('/closed.json')).map((k) => k.split('/')[2]));
  return keys.filter((k) => !closed.has(k.split('/')[2]));
}

/**
 * Stores the records of a run of campaign 1 as a finisher finds them: two jobs, 11 exported and
 * 12 not ready, in unit `c1-u0`; every step sent `requests`.
 */
export async function storeRecordedRun(
  storage: Storage,
  requests: RequestCounts = { total: 0, retried: 0, by_status: {} },
): Promise<void> {
  const unit: UnitSummary = {
    unit: 'c1-u0',
    campaign_id: 1,
    attempt: 1,
    staged: [],
    jobs: { 11: { fp: 'a', outcome: 'exported' }, 12: { fp: 'b', outcome: 'not_ready' } },
    requests,
  };
  await storage.put(STATE_KEYS.runRecord(TEST_RUN_ID), encodeRecord(runRecord({ requests })));
  await storage.put(STATE_KEYS.plan(TEST_RUN_ID, 1), encodeRecord(planRecord({ jobs: 2, requests })));
  await storage.put(STATE_KEYS.unit(TEST_RUN_ID, 'c1-u0'), encodeRecord(unit));
}
