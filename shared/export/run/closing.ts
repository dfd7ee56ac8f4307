/**
 * A run's closing record (`STATE_KEYS.closing`): everything a finisher needs to close the run,
 * frozen when closing starts, so that whoever finishes it (a second finisher, the next look after
 * a timeout, the next run after a crash) publishes the same files and records the same outcomes.
 *
 * It grows with the run (a million reports: ~120,000 staged files and a million outcomes), so it
 * is written in pieces: JSON Lines objects of at most `PIECE_LINES` lines under
 * `closing/<token>/`, staged files per table and raw entity, outcomes per campaign; then the
 * small record that names the token, with a create-if-absent. A finisher that loses that race
 * reads the winner's pieces; its own are debris, deleted with the run's records. Writing and
 * reading hold one campaign's records and one piece per sink, whatever the run's size.
 * Closing records before 0.5 held the arrays inline; they are read as they are.
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import { RecordedOutcomeSchema } from '../state/incremental.js';
import { ManifestSchema } from '../state/manifest.js';
import {
  encodeRecord,
  type FileFormat,
  parseRecord,
  type StagedFile,
  StagedFileSchema,
} from '../state/records.js';
import { ClosingTally } from './closing-tally.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { type RecordsSource, RunVanished } from './run-records.js';

/** Lines per piece: ~2,000 staged files (~400 KB) or the outcomes of ~2,000 jobs and more. */
const PIECE_LINES = 2_000;

const OutcomesLineSchema = z.object({
  campaign_id: z.number().int(),
  jobs: z.array(RecordedOutcomeSchema),
});
/** The outcomes to record in one campaign's state. */
export type CampaignOutcomes = z.infer<typeof OutcomesLineSchema>;

/** One group of staged files published together: a table's Parquet files or a raw entity's lines. */
export interface StagedGroup {
  name: string;
  format: FileFormat;
}

const groupKey = (group: StagedGroup): string => `${group.format}.${group.name}`;

/** The closing record as written since 0.5: the manifest, and the pieces that hold the rest. */
const PiecedClosingSchema = z.object({
  /** The manifest, its `files` still empty: publishing fills them in. */
  manifest: ManifestSchema,
  /** Who carried the run: a queue-carried run is announced. */
  driver: z.enum(['local', 'queues']).optional(),
  pieces: z.object({
    /** Names the folder of this closing's pieces, `closing/<token>/`. */
    token: z.string(),
    /** Pieces of staged files per group (`<format>.<name>`); a group with none is absent. */
    staged: z.record(z.string(), z.number().int().positive()),
    /** Pieces of outcomes. */
    outcomes: z.number().int().nonnegative(),
  }),
});

/** The closing record of releases before 0.5: the staged files and outcomes inline. */
const InlineClosingSchema = z.object({
  manifest: ManifestSchema,
  staged: z.array(StagedFileSchema),
  outcomes: z.array(OutcomesLineSchema),
  driver: z.enum(['local', 'queues']).optional(),
});

export const ClosingRecordSchema = z.union([PiecedClosingSchema, InlineClosingSchema]);
export type ClosingRecord = z.infer<typeof ClosingRecordSchema>;

/**
 * What a closed run's closing record becomes: it stays (small) as long as the tombstone, so that
 * its create-if-absent keeps failing and no closer ever makes a second closing record.
 */
const ClosedClosingSchema = z.object({ closed: z.literal(true), run_id: z.string() });

const pieceKey = (runId: string, token: string, path: string): string =>
  `${STATE_KEYS.closingPieces(runId, token)}${path}`;
const stagedPieceKey = (runId: string, token: string, group: string, index: number): string =>
  pieceKey(runId, token, `staged/${group}/${String(index).padStart(6, '0')}.jsonl`);
const outcomesPieceKey = (runId: string, token: string, index: number): string =>
  pieceKey(runId, token, `outcomes/${String(index).padStart(6, '0')}.jsonl`);

/** Lines written out as pieces of at most `PIECE_LINES` lines (or one outcomes line of any size). */
class PieceWriter {
  private lines: string[] = [];
  private weight = 0;
  count = 0;

  constructor(
    private readonly deps: Pick<ExportDeps, 'storage'>,
    private readonly keyOf: (index: number) => string,
  ) {}

  async add(value: unknown, weight = 1): Promise<void> {
    this.lines.push(JSON.stringify(value));
    this.weight += weight;
    if (this.weight >= PIECE_LINES) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.lines.length === 0) return;
    const body = `${this.lines.join('\n')}\n`;
    this.lines = [];
    this.weight = 0;
    await this.deps.storage.put(this.keyOf(this.count++), body);
  }
}

/**
 * Writes a run's closing pieces from its records and returns the closing record that names
 * them (not yet written: `startClosing` does). A failed run's record names no piece: it
 * publishes nothing and records nothing, and its jobs are asked for again.
 */
export async function writeClosingPieces(
  deps: Pick<ExportDeps, 'storage' | 'random'>,
  source: RecordsSource,
  finishedAt: Date,
  options: {
    deferUnreported?: boolean | undefined;
    /** Called as each campaign's records are read; throws to give the freeze up (its pieces are left unnamed). */
    checkTime?: (() => void) | undefined;
  } = {},
): Promise<Extract<ClosingRecord, { pieces: unknown }>> {
  const runId = source.record.run_id;
  const token = randomHex(randomOf(deps), 12);
  const tally = new ClosingTally(source.record, source.unrecorded, options.deferUnreported);
  const stagedWriters = new Map<string, PieceWriter>();
  const stagedWriter = (group: string): PieceWriter => {
    let writer = stagedWriters.get(group);
    if (!writer) {
      writer = new PieceWriter(deps, (index) => stagedPieceKey(runId, token, group, index));
      stagedWriters.set(group, writer);
    }
    return writer;
  };
  const outcomes = new PieceWriter(deps, (index) => outcomesPieceKey(runId, token, index));
  const add = async (files: readonly StagedFile[]) => {
    for (const file of files) {
      if (file.rows > 0)
        await stagedWriter(groupKey({ name: file.table_or_entity, format: file.format })).add(file);
    }
  };
  await add(source.record.staged);
  for await (const { campaignId, plan, units } of source.campaigns()) {
    options.checkTime?.();
    const added = tally.add(campaignId, plan, units);
    await add(added.staged);
    if (added.outcomes) await outcomes.add(added.outcomes, Math.max(1, added.outcomes.jobs.length));
  }
  const manifest = tally.manifest(finishedAt);
  const failed = manifest.status === 'failed';
  const staged: Record<string, number> = {};
  if (!failed) {
    await outcomes.flush();
    for (const [group, writer] of stagedWriters) {
      await writer.flush();
      staged[group] = writer.count;
    }
  }
  return {
    manifest,
    ...(source.record.driver ? { driver: source.record.driver } : {}),
    pieces: { token, staged, outcomes: failed ? 0 : outcomes.count },
  };
}

/** Reads one JSON Lines piece; a piece named by a closing record and missing is an error. */
async function* piece<T>(deps: Pick<ExportDeps, 'storage'>, key: string, schema: z.ZodType<T>) {
  const found = await deps.storage.get(key);
  if (!found) throw new RunVanished(`closing piece ${key} is gone`);
  const text = Buffer.from(found.body).toString('utf8');
  let line = 0;
  for (const json of text.split('\n')) {
    line++;
    if (json.length > 0) yield parseRecord(schema, Buffer.from(json), `${key}:${line}`);
  }
}

/** The staged files of one group, in publishing order. */
export async function* stagedOf(
  deps: Pick<ExportDeps, 'storage'>,
  closing: ClosingRecord,
  group: StagedGroup,
): AsyncGenerator<StagedFile> {
  if (!('pieces' in closing)) {
    // Before 0.5: inline, published in key order.
    yield* closing.staged
      .filter((f) => f.format === group.format && f.table_or_entity === group.name && f.rows > 0)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return;
  }
  const { token, staged } = closing.pieces;
  const key = groupKey(group);
  for (let index = 0; index < (staged[key] ?? 0); index++)
    yield* piece(deps, stagedPieceKey(closing.manifest.run_id, token, key, index), StagedFileSchema);
}

/** True when the closing publishes any file. */
export const publishesFiles = (closing: ClosingRecord): boolean =>
  'pieces' in closing ? Object.keys(closing.pieces.staged).length > 0 : closing.staged.length > 0;

/** The outcomes to record, one campaign at a time. */
export async function* outcomesOf(
  deps: Pick<ExportDeps, 'storage'>,
  closing: ClosingRecord,
): AsyncGenerator<CampaignOutcomes> {
  if (!('pieces' in closing)) {
    yield* closing.outcomes;
    return;
  }
  const { token, outcomes } = closing.pieces;
  for (let index = 0; index < outcomes; index++)
    yield* piece(deps, outcomesPieceKey(closing.manifest.run_id, token, index), OutcomesLineSchema);
}

/** The closing record of a run, if its closing has started. */
export async function readClosing(
  deps: Pick<ExportDeps, 'storage'>,
  runId: string,
): Promise<ClosingRecord | undefined> {
  const key = STATE_KEYS.closing(runId);
  const found = await deps.storage.get(key);
  if (!found) return undefined;
  const record = parseRecord(z.union([ClosedClosingSchema, ClosingRecordSchema]), found.body, key);
  return 'closed' in record ? undefined : record;
}

/**
 * Writes the closing record unless one exists; returns the closing record of the run, or
 * `undefined` when the run was closed meanwhile. A finisher that lost the race deletes its pieces.
 */
export async function startClosing(
  deps: Pick<ExportDeps, 'storage'>,
  closing: ClosingRecord,
): Promise<ClosingRecord | undefined> {
  const runId = closing.manifest.run_id;
  try {
    await deps.storage.put(STATE_KEYS.closing(runId), encodeRecord(closing), { ifNoneMatch: '*' });
    return closing;
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // Another finisher started first: finish what it froze. (A 412 whose write was ours, its
    // answer lost, reads back our own record.)
    const stored = await readClosing(deps, runId);
    if ('pieces' in closing && stored && 'pieces' in stored && stored.pieces.token !== closing.pieces.token) {
      const ours: string[] = [];
      for await (const key of deps.storage.list(STATE_KEYS.closingPieces(runId, closing.pieces.token)))
        ours.push(key);
      await deps.storage.delete(ours);
    }
    return stored;
  }
}

/** Marks a closed run's closing record (`ClosedClosingSchema`). */
export const closedClosing = (runId: string): string => encodeRecord({ closed: true, run_id: runId });
