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
 * makes progress however late it starts; one given `maxOutputBytes` (start-run's recovery)
 * leaves a larger output, and all after it, to finish-run's next look. Memory: one output's list of inputs per output in flight, and the
 * regroup's own bound (`parquet/regroup.ts`).
 */
import * as z from 'zod';
import { STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
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
import { stopStartingAfter } from './time-budget.js';

/**
 * The longest one output takes at finish-run's 1,024 MB (0.58 vCPU): at most 256 MB of staged
 * input (`DEFAULT_MAX_FILE_BYTES`), 100-130 s there with V8's default young generation
 * (BENCHMARKS.md, scale: an estimate from the regroup figures; Lambda itself was not measured),
 * and 31% more CPU with finish-run's semi-spaces capped at 16 MB (V8_SEMI_SPACE_MB; the same
 * 100k publish, paired: 64.0 s against 48.8 s): 170 s.
 */
export const OUTPUT_WORST_MS = 170_000;

/**
 * What may still be running when a finisher stops starting outputs: PUBLISH_CONCURRENCY of them,
 * which share its CPU, so each takes that many times as long.
 */
export const PUBLISH_IN_FLIGHT_WORST_MS = PUBLISH_CONCURRENCY * OUTPUT_WORST_MS;

/**
 * How long an output of `bytes` of staged input may take with another beside it in flight, at
 * finish-run's 1,024 MB: {@link OUTPUT_WORST_MS} per 256 MB, doubled for the CPU they share.
 */
export const outputInFlightMs = (bytes: number): number =>
  (PUBLISH_IN_FLIGHT_WORST_MS * bytes) / DEFAULT_MAX_FILE_BYTES;

/** A finisher's wrap-up once its last step ends: the outputs' records, the lease given back. */
const FINISH_WRAP_UP_MS = 10_000;

/**
 * The steps after the publish (the Iceberg commit; the state, announcement and the records'
 * deletion), by the run's jobs: a fixed part, and about 2 minutes for 1,000,000 jobs (the
 * scale bench's second invocation deleted ~81,000 keys and applied ~10,000 campaigns' state; an
 * estimate, not measured apart).
 */
export const tailMs = (jobs: number): number => 5_000 + jobs * 0.12;

/**
 * The limits of a finisher that has `remainingMs` to live, so that it ends within half its time
 * (`time-budget.ts`): by `endBy` (half its time less the wrap-up), it starts an output only if
 * the output could end by then ({@link outputInFlightMs}: a full 256 MB output not after 100 s of
 * finish-run's 900, a small one until near the end), and the commit and the steps after the
 * publish only if their {@link tailMs} fits; a further run is taken up only before `handOnAt`,
 * when a full output and the steps after it still fit. A `share` of the remaining time
 * instead: the simulation's finishers, which hand on at that point. It leases the closing for
 * all of its time (it cannot outlive its timeout).
 */
export function finisherLimits(nowMs: number, remainingMs: number, share?: number) {
  if (share !== undefined) return { handOnAt: nowMs + remainingMs * share, leaseMs: remainingMs };
  const endBy = nowMs + stopStartingAfter(remainingMs, FINISH_WRAP_UP_MS);
  return { endBy, handOnAt: Math.max(nowMs, endBy - PUBLISH_IN_FLIGHT_WORST_MS), leaseMs: remainingMs };
}

/**
 * start-run's recovery of a run left open starts no output after this (ms after it starts)...
 */
export const RECOVERY_STOP_MS = 30_000;

/**
 * ...nor one of more staged input than this: at start-run's 512 MB (0.29 vCPU, half
 * finish-run's CPU) an output takes about twice {@link OUTPUT_WORST_MS} per 256 MB, 21 s for
 * 16 MB, and two in flight about 43 s. Larger outputs are left to finish-run's next look.
 */
export const RECOVERY_OUTPUT_BYTES = 16 * 1024 * 1024;

/**
 * The limits of start-run's recovery, which has `remainingMs` to live and a run of its own to
 * start after it: it freezes a closing and publishes what is small for RECOVERY_STOP_MS at
 * most, so that it ends in about 75 s (a quarter of start-run's 300 s), and hands the rest on to
 * finish-run. A freeze not done by then (about 300k reports at start-run's CPU, BENCHMARKS.md
 * freeze) is given up and left to finish-run whole. `maxOutputBytes`: the largest output it
 * publishes (the simulation's start-runs meet closings larger than that with a smaller one).
 */
export const recoveryLimits = (
  nowMs: number,
  remainingMs: number,
  maxOutputBytes = RECOVERY_OUTPUT_BYTES,
) => ({
  freezeBy: nowMs + RECOVERY_STOP_MS,
  handOnAt: nowMs + RECOVERY_STOP_MS,
  leaseMs: remainingMs,
  maxOutputBytes,
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
  options: PublishOptions & {
    handOnAt?: number | undefined;
    endBy?: number | undefined;
    maxOutputBytes?: number | undefined;
  } = {},
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
  // With `endBy`, an output starts only if it can end by then; else none starts after `handOnAt`.
  const timeIsUp = (bytes: number) => {
    if (started === 0) return false;
    const now = deps.now().getTime();
    if (options.endBy !== undefined) return now + outputInFlightMs(bytes) > options.endBy;
    return options.handOnAt !== undefined && now >= options.handOnAt;
  };
  let started = 0;
  const start = async (plan: OutputPlan) => {
    const slot = slots.push(undefined) - 1;
    if (recorded.has(STATE_KEYS.published(runId, plan.key))) {
      const done = await readPublished(storage, runId, plan.key);
      if (done) return take(slot, done.file, done.footer ? Buffer.from(done.footer, 'base64') : undefined);
    }
    while (inFlight.size >= (options.concurrency ?? PUBLISH_CONCURRENCY)) await Promise.race(inFlight);
    if (failure) return;
    const bytes = plan.inputs.reduce((n, input) => n + input.bytes, 0);
    // An output too large for this finisher's time is left to one that has it (start-run's recovery).
    const tooLarge = options.maxOutputBytes !== undefined && bytes > options.maxOutputBytes;
    if (handedOn || timeIsUp(bytes) || tooLarge) {
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
