/**
 * A run's plan messages (AWS: one per campaign on the plan queue), sent in chunks that survive a
 * timeout or a hand-on: `plans-sent.json` says how many of the run's campaigns, in listing
 * order, have had theirs sent, so that a delivery taking the start up again sends only the
 * rest. A crash between a chunk and its note sends that chunk twice, which is harmless: a plan
 * message delivered twice plans its campaign once (`plan-campaign.ts`).
 */
import * as z from 'zod';
import { STATE_KEYS } from '../../layout.js';
import { encodeRecord, type PlanMessage, parseRecord, type RunRef } from '../state/records.js';
import type { ExportDeps } from './context.js';

/**
 * Campaigns whose plan messages are sent between two notes: 100 SQS requests (ten a request),
 * a few seconds; a start hands on between two chunks.
 */
export const PLANS_PER_CHUNK = 1_000;

const PlansSentSchema = z.object({ sent: z.number().int().nonnegative() });

/** How many of the run's campaigns have had their plan messages sent (0 when none is noted). */
export async function plansSent(deps: Pick<ExportDeps, 'storage'>, runId: string): Promise<number> {
  const key = STATE_KEYS.plansSent(runId);
  const found = await deps.storage.get(key);
  return found ? parseRecord(PlansSentSchema, found.body, key).sent : 0;
}

export interface SendPlansOptions {
  /** True once no further chunk may start (one chunk is always sent, so every call moves on). */
  timeUp?: (() => boolean) | undefined;
}

/**
 * Sends the plan messages of `campaignIds` (the run's campaigns listed so far, in listing order)
 * not sent yet, a chunk at a time, noting each; stops between two chunks once `timeUp`. True
 * when every one of them is sent.
 */
export async function sendPlans(
  deps: Pick<ExportDeps, 'storage'>,
  run: RunRef,
  campaignIds: readonly number[],
  send: (messages: PlanMessage[]) => Promise<void>,
  options: SendPlansOptions = {},
): Promise<boolean> {
  let from = await plansSent(deps, run.run_id);
  let chunks = 0;
  while (from < campaignIds.length) {
    if (chunks > 0 && options.timeUp?.()) return false;
    const ids = campaignIds.slice(from, from + PLANS_PER_CHUNK);
    await send(ids.map((campaign_id) => ({ ...runRefOf(run), campaign_id })));
    from += ids.length;
    chunks++;
    await deps.storage.put(STATE_KEYS.plansSent(run.run_id), encodeRecord({ sent: from }));
  }
  return true;
}

/** A run's reference alone (a record carries more): what a plan message holds beside its campaign. */
const runRefOf = (run: RunRef): RunRef => ({
  run_id: run.run_id,
  dt: run.dt,
  mode: run.mode,
  ...(run.table_format && { table_format: run.table_format }),
  ...(run.schema_contract && { schema_contract: run.schema_contract }),
});
