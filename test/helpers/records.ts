/** Builders for the run records tests put in storage or hand to the finisher. */
import type { RunRecord } from '../../shared/export/state/records.js';

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
