/**
 * Publishing a closing, in steps that survive timeouts: each output, once written, is recorded
 * under `published/` in the run's state (its manifest entry, and its Parquet footer for the
 * Iceberg commit's metrics), so a finisher that takes the closing up again writes only the
 * outputs not recorded yet. The outputs are the same whoever plans them (the closing's pieces
 * are frozen, and `OutputCutter` is deterministic), so a record names the very file a later
 * finisher would write.
 *
 * Time: an output is at most `maxFileBytes` of staged input (256 MB), so each output takes a
 * bounded time; before starting one, the publish checks the caller's `handOnAt` and, once it has
 * passed, lets the outputs in flight finish, records them, and stops with `HandedOn`. The next
 * finisher carries on. A finisher writes one output at least before it hands on, so every look
 * makes progress however late it starts. Memory: one output's list of inputs per output in flight, and the
 * regroup's own bound (`parquet/regroup.ts`).
 */
import * as z from 'zod';
import type { Storage } from '../../storage/storage.js';
import { STATE_KEYS } from '../layout.js';
import { encodeRecord, type FileEntry, FileEntrySchema, parseRecord, type RunRef } from '../state/records.js';
import { type ClosingRecord, stagedOf } from './closing.js';
import type { ExportDeps } from './context.js';
import {
  DEFAULT_MAX_FILE_BYTES,
  OutputCutter,
  type OutputPlan,
  PUBLISH_CONCURRENCY,
  PUBLISH_GROUPS,
  type PublishOptions,
  writeOutput,
} from './publish.js';

/**
 * The share of its remaining time a scheduled finisher (finish-run) works on closings before it
 * hands the rest on: an output in flight when it stops is at most 256 MB of staged input (about
 * 2 minutes at 1,024 MB), and the Iceberg commit and the state follow, so a look ends within
 * about half its timeout.
 */
export const FINISH_HAND_ON_SHARE = 0.3;

/**
 * The limits of a finisher that has `remainingMs` to live: it hands on once `share` of it has
 * passed, and leases the closing for all of it (it cannot outlive its timeout).
 */
export const finisherLimits = (nowMs: number, remainingMs: number, share = FINISH_HAND_ON_SHARE) => ({
  handOnAt: nowMs + remainingMs * share,
  leaseMs: remainingMs,
});

/** Thrown when a finisher's time is up: what it did is recorded, and the next finisher goes on. */
export class HandedOn extends Error {
  override name = 'HandedOn';
}

const PublishedRecordSchema = z.object({
  file: FileEntrySchema,
  /** The Parquet footer (last bytes of the file), base64. */
  footer: z.string().optional(),
});

export interface PublishedFiles {
  files: FileEntry[];
  footers: Map<string, Uint8Array>;
  /** Outputs this call wrote (the others were recorded by earlier finishers). */
  written: number;
}

/** The outputs recorded as published so far, by key. */
async function recordedOutputs(storage: Storage, runId: string): Promise<Set<string>> {
  const keys = new Set<string>();
  for await (const key of storage.list(STATE_KEYS.publishedPrefix(runId))) keys.add(key);
  return keys;
}

async function readPublished(storage: Storage, runId: string, outputKey: string) {
  const key = STATE_KEYS.published(runId, outputKey);
  const found = await storage.get(key);
  return found ? parseRecord(PublishedRecordSchema, found.body, key) : undefined;
}

/**
 * Publishes a closing's staged files, output by output, skipping those recorded before; returns
 * every published file in publishing order, with the Parquet footers. Throws `HandedOn` once
 * `handOnAt` (epoch ms by `deps.now()`) has passed with outputs left.
 */
export async function publishClosing(
  deps: Pick<ExportDeps, 'storage' | 'now'>,
  run: RunRef,
  closing: ClosingRecord,
  options: PublishOptions & { handOnAt?: number | undefined } = {},
): Promise<PublishedFiles> {
  const { storage } = deps;
  const runId = run.run_id;
  const recorded = await recordedOutputs(storage, runId);
  const result: PublishedFiles = { files: [], footers: new Map(), written: 0 };
  // Outputs in publishing order; each slot is filled when its output is written or read back.
  const slots: (FileEntry | undefined)[] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  let handedOn = false;

  const take = (slot: number, file: FileEntry, footer: Uint8Array | undefined) => {
    slots[slot] = file;
    if (footer) result.footers.set(file.key, footer);
  };
  const publish = async (slot: number, plan: OutputPlan) => {
    const { file, footer } = await writeOutput(storage, run, plan, options);
    await storage.put(
      STATE_KEYS.published(runId, plan.key),
      encodeRecord({ file, ...(footer ? { footer: Buffer.from(footer).toString('base64') } : {}) }),
    );
    take(slot, file, footer);
  };
  // Every finisher writes one output at least before it hands on: each look makes progress.
  const timeIsUp = () =>
    options.handOnAt !== undefined && started > 0 && deps.now().getTime() >= options.handOnAt;
  let started = 0;
  const start = async (plan: OutputPlan) => {
    const slot = slots.push(undefined) - 1;
    if (recorded.has(STATE_KEYS.published(runId, plan.key))) {
      const done = await readPublished(storage, runId, plan.key);
      if (done) return take(slot, done.file, done.footer ? Buffer.from(done.footer, 'base64') : undefined);
    }
    while (inFlight.size >= (options.concurrency ?? PUBLISH_CONCURRENCY)) await Promise.race(inFlight);
    if (failure) return;
    if (handedOn || timeIsUp()) {
      handedOn = true;
      return;
    }
    started++;
    const task = publish(slot, plan)
      .catch((error: unknown) => {
        failure ??= { error };
      })
      .finally(() => inFlight.delete(task));
    inFlight.add(task);
  };

  for (const group of PUBLISH_GROUPS) {
    const cutter = new OutputCutter(run, group, options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES);
    for await (const input of stagedOf(deps, closing, group)) {
      const done = cutter.add(input);
      if (done) await start(done);
      if (failure || handedOn) break;
    }
    const last = failure || handedOn ? undefined : cutter.close();
    if (last) await start(last);
    if (failure || handedOn) break;
  }
  await Promise.all(inFlight);
  if (failure) throw failure.error;
  if (handedOn)
    throw new HandedOn(`run ${runId}: its finisher's time is up; the next one publishes the rest`);
  for (const file of slots) if (file) result.files.push(file);
  result.written = started;
  return result;
}
