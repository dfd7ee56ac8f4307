/**
 * Step 1 of a run: verify the key, list every campaign, write the campaigns snapshot, and
 * record the run. A fatal API error is recorded (the run then ends as failed), not thrown.
 */

import type { CampaignItem } from '../../api/schemas.js';
import { campaignRow } from '../format/flatten.js';
import { JsonLinesBuffer } from '../format/jsonl.js';
import { TableBuffer } from '../format/table-buffer.js';
import { dtOf, STATE_KEYS } from '../layout.js';
import { quarantine } from '../state/quarantine.js';
import {
  encodeRecord,
  type Fatal,
  fatalOf,
  type Mode,
  type RunRecord,
  type RunRef,
} from '../state/records.js';
import { type ExportDeps, newRunId, requestCounts } from './context.js';
import { writeRaw, writeTables } from './staging.js';

export interface StartRunInput {
  mode: Mode;
  /** The dt= partition; default: the start date, UTC. */
  dt?: string | undefined;
  /** Who carries the run's steps: this process (CLI) or the queues (AWS). */
  driver: RunRecord['driver'];
}

export interface StartedRun {
  run: RunRef;
  record: RunRecord;
  campaigns: CampaignItem[];
}

export async function startRun(deps: ExportDeps, input: StartRunInput): Promise<StartedRun> {
  const startedAt = deps.now();
  const run: RunRef = { run_id: newRunId(startedAt), dt: input.dt ?? dtOf(startedAt), mode: input.mode };
  const api = deps.api();
  const campaigns: CampaignItem[] = [];
  const rawLines = new JsonLinesBuffer();
  const rows = new TableBuffer();
  const ctx = { runId: run.run_id, exportedAt: deps.now() };
  let invalid = 0;
  let fatal: Fatal | undefined;
  try {
    const { companyName } = await api.verify();
    deps.log.info('key verified', { company: companyName, run_id: run.run_id });
    let position = 0;
    for await (const listed of api.campaigns()) {
      const fetchedAt = deps.now().toISOString();
      rawLines.add({ run_id: run.run_id, fetched_at: fetchedAt, data: listed.raw });
      if (listed.valid) {
        campaigns.push(listed.item);
        rows.add('campaigns', campaignRow(listed.item, ctx, listed.raw));
      } else {
        invalid++;
        await quarantine(deps.storage, run, {
          name: `campaigns-item-${position}`,
          body: listed.raw,
          issues: listed.issues,
          fetched_at: fetchedAt,
        });
      }
      position++;
    }
  } catch (error) {
    fatal = fatalOf(error);
    deps.log.error('run stopped', { run_id: run.run_id, ...fatal });
  }

  if (!fatal) {
    const stem = `${run.run_id}-campaigns`;
    await Promise.all([
      writeRaw(deps.storage, 'campaigns', run.dt, stem, rawLines),
      writeTables(deps.storage, run.dt, stem, rows),
    ]);
  }
  const record: RunRecord = {
    ...run,
    driver: input.driver,
    started_at: startedAt.toISOString(),
    campaign_ids: campaigns.map((c) => c.id),
    campaigns_invalid: invalid,
    requests: requestCounts(api),
    ...(fatal ? { fatal } : {}),
  };
  await deps.storage.put(STATE_KEYS.runRecord(run.run_id), encodeRecord(record));
  return { run, record, campaigns };
}
