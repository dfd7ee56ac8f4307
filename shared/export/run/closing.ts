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
import { STATE_KEYS } from '../layout.js';
import { RecordedOutcomeSchema } from '../state/incremental.js';
import { emptyCounts, type Manifest, ManifestSchema, OUTCOME_COUNTER, runStatus } from '../state/manifest.js';
import {
  addRequestCounts,
  encodeRecord,
  type Fatal,
  type FileEntry,
  FileEntrySchema,
  type FileFormat,
  type PlanRecord,
  parseRecord,
  type RunRecord,
  type UnitSummary,
} from '../state/records.js';
import { RAW_ENTITIES, TABLE_NAMES } from '../tables.js';
import { type ExportDeps, randomHex, randomOf } from './context.js';
import { type RecordsSource, type RunRecords, RunVanished } from './run-records.js';

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

/** Every group, in publishing order: raw entities, then tables. */
export const STAGED_GROUPS: readonly StagedGroup[] = [
  ...RAW_ENTITIES.map((name) => ({ name, format: 'jsonl' as const })),
  ...TABLE_NAMES.map((name) => ({ name, format: 'parquet' as const })),
];

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
  staged: z.array(FileEntrySchema),
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
 * Counts, requests and status of a run, added up one campaign at a time; every listed job gets
 * exactly one outcome.
 */
export class ClosingTally {
  readonly counts = emptyCounts();
  private requests;
  private fatal: Fatal | undefined;
  private readonly unlisted: number[] = [];
  private readonly partlyListed: number[] = [];
  private readonly notFound: number[] = [];

  constructor(
    private readonly record: RunRecord,
    unrecorded: RecordsSource['unrecorded'],
    /** Jobs whose unit never reported are deferred (the run's deadline cut it), not failed. */
    private readonly deferUnreported = false,
  ) {
    this.requests = addRequestCounts(record.requests, unrecorded);
    this.fatal = record.fatal;
    this.counts.campaigns = record.campaign_ids.length + record.campaigns_invalid;
    this.counts.campaigns_invalid = record.campaigns_invalid;
    this.counts.duplicates = record.duplicates;
  }

  /**
   * Adds one campaign; returns the staged files it lists and, when its listing completed, the
   * outcomes to record in its state.
   */
  add(
    campaignId: number,
    plan: PlanRecord | undefined,
    units: ReadonlyMap<string, UnitSummary>,
  ): { staged: FileEntry[]; outcomes: CampaignOutcomes | undefined } {
    // A campaign whose jobs were never listed (its plan kept failing, or its pages contradicted
    // themselves): its jobs are unknown.
    if (!this.record.fatal && (plan === undefined || plan.unlisted !== undefined))
      this.unlisted.push(campaignId);
    if (!plan) return { staged: [], outcomes: undefined };
    const staged = [...plan.staged];
    this.requests = addRequestCounts(this.requests, plan.requests);
    this.counts.duplicates += plan.duplicates;
    for (const name of plan.units) staged.push(...(units.get(name)?.staged ?? []));
    if (plan.unlisted !== undefined) return { staged, outcomes: undefined };
    this.fatal ??= plan.fatal;
    if (plan.jobs_invalid > 0) this.partlyListed.push(plan.campaign_id);
    this.counts.jobs += plan.jobs;
    this.counts.reports_unchanged += plan.unchanged.length;
    this.counts.reports_invalid += plan.jobs_invalid;
    let accounted = plan.unchanged.length + plan.jobs_invalid;
    // The outcomes to record: none for a plan stopped by a fatal answer (its jobs are asked for
    // again). A campaign that answered 404 for its jobs listed none: its state forgets them all,
    // as the latest views and current tables do, so that they are fetched again should it come back.
    const jobs: CampaignOutcomes['jobs'] = plan.fatal
      ? []
      : plan.unchanged.map((j) => ({ ...j, outcome: 'unchanged' as const }));
    // A job counts once, whatever unit it stands in (units are cut once per plan; this is a guard).
    const counted = new Set<string>();
    for (const name of plan.units) {
      const unit = units.get(name);
      if (unit) {
        this.requests = addRequestCounts(this.requests, unit.requests);
        this.fatal ??= unit.fatal;
      }
      for (const [jobId, result] of Object.entries(unit?.jobs ?? {})) {
        // A job still pending when the run ends failed in it; the next run asks again.
        const outcome = result.outcome === 'pending' ? 'failed' : result.outcome;
        if (!plan.fatal) jobs.push({ job_id: Number(jobId), fp: result.fp, outcome });
        if (result.outcome === 'pending' || counted.has(jobId)) continue;
        counted.add(jobId);
        this.counts[OUTCOME_COUNTER[result.outcome]]++;
        if (result.outcome === 'not_found') this.notFound.push(Number(jobId));
        accounted++;
      }
    }
    const missing = plan.jobs - accounted;
    if (this.deferUnreported && !plan.fatal) {
      // Jobs of units that never reported wait for the next run, which asks for them again.
      let deferred = 0;
      plan.units.forEach((name, i) => {
        if (units.has(name)) return;
        for (const job of plan.fetch.slice(i * plan.unit_size, (i + 1) * plan.unit_size)) {
          jobs.push({ ...job, outcome: 'deferred' });
          deferred++;
        }
      });
      this.counts.reports_deferred = (this.counts.reports_deferred ?? 0) + deferred;
      this.counts.reports_failed += missing - deferred;
    } else {
      // Jobs listed but never brought to an outcome (unit lost, still pending, listing cut short).
      this.counts.reports_failed += missing;
    }
    return { staged, outcomes: plan.fatal ? undefined : { campaign_id: plan.campaign_id, jobs } };
  }

  /** The manifest, `files` empty: publishing fills them in. */
  manifest(finishedAt: Date): Manifest {
    const { record } = this;
    const counts = { ...this.counts };
    if (!counts.reports_deferred) delete counts.reports_deferred;
    return ManifestSchema.parse({
      run_id: record.run_id,
      dt: record.dt,
      mode: record.mode,
      status: runStatus(counts, this.fatal !== undefined, this.unlisted.length),
      started_at: record.started_at,
      finished_at: finishedAt.toISOString(),
      counts,
      requests: this.requests,
      files: [],
      ...(record.company_name !== undefined ? { company_name: record.company_name } : {}),
      ...(record.table_format !== undefined ? { table_format: record.table_format } : {}),
      ...(this.unlisted.length > 0 ? { unlisted_campaigns: this.unlisted } : {}),
      ...(this.partlyListed.length > 0
        ? { partially_listed_campaigns: [...this.partlyListed].sort((a, b) => a - b) }
        : {}),
      ...(this.notFound.length > 0 ? { not_found_jobs: [...this.notFound].sort((a, b) => a - b) } : {}),
      ...(this.fatal
        ? {
            error: {
              message: this.fatal.message,
              ...(this.fatal.error_code ? { error_code: this.fatal.error_code } : {}),
            },
          }
        : {}),
    });
  }
}

/** Counts, requests and status of a run from its records held in memory (`files` empty). */
export function buildManifest(records: RunRecords, finishedAt: Date): Manifest {
  const tally = new ClosingTally(records.record, records.unrecorded);
  for (const campaignId of records.record.campaign_ids) {
    const plan = records.plans.get(campaignId);
    tally.add(campaignId, plan, records.units);
  }
  return tally.manifest(finishedAt);
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
  options: { deferUnreported?: boolean } = {},
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
  const add = async (files: readonly FileEntry[]) => {
    for (const file of files) {
      if (file.rows > 0)
        await stagedWriter(groupKey({ name: file.table_or_entity, format: file.format })).add(file);
    }
  };
  await add(source.record.staged);
  for await (const { campaignId, plan, units } of source.campaigns()) {
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
): AsyncGenerator<FileEntry> {
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
    yield* piece(deps, stagedPieceKey(closing.manifest.run_id, token, key, index), FileEntrySchema);
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
