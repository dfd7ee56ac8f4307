/**
 * The records a run leaves in storage while it is in progress, and the messages that carry
 * work between its steps (SQS bodies in AWS, in-process values in the CLI). Validated with
 * zod wherever they are read back.
 */
import * as z from 'zod';
import { ApiError, StorageError } from '../../errors.js';
import { DT_PATTERN, TABLE_FORMATS } from '../../layout.js';
import { SchemaDriftSchema } from '../schema-drift.js';
import { SCHEMA_CONTRACTS } from '../tables.js';

const int = z.number().int();

export const ModeSchema = z.enum(['incremental', 'full']);
export type Mode = z.infer<typeof ModeSchema>;

export const RunIdSchema = z
  .string()
  .regex(/^\d{8}T\d{6}Z-[0-9a-f]{6}$/, 'a run id like 20261122T031500Z-a1b2c3');
export const DtSchema = z
  .string()
  .regex(DT_PATTERN, 'a date like 2026-11-22')
  .refine((dt) => {
    const instant = Date.parse(`${dt}T00:00:00Z`);
    return !Number.isNaN(instant) && new Date(instant).toISOString().startsWith(dt);
  }, 'a real calendar date');

/** Requests sent to the API (contract: manifest `requests`). */
export const RequestCountsSchema = z.object({
  total: int,
  retried: int,
  by_status: z.record(z.string(), int),
});
export type RequestCounts = z.infer<typeof RequestCountsSchema>;

/** What a data file holds: a Parquet table's rows, or a raw entity's JSON Lines. */
export const FileFormatSchema = z.enum(['parquet', 'jsonl']);
export type FileFormat = z.infer<typeof FileFormatSchema>;

/** A data file a step staged, or the run published: where it is, what it holds, how big. */
export const FileEntrySchema = z.object({
  /** Relative to the output root. */
  key: z.string(),
  /** The table (Parquet) or the raw entity (JSON Lines): `campaigns` is both, `format` tells which. */
  table_or_entity: z.string(),
  format: FileFormatSchema,
  rows: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
});
export type FileEntry = z.infer<typeof FileEntrySchema>;

/**
 * A file a step staged: a step stages its files as one object, one after another (one request
 * where a file each cost up to seven), so `offset` says where the file's `bytes` start in the
 * object `key`. Without it (records before 0.6, and the benches' synthesized runs) the file is
 * the whole object.
 */
export const StagedFileSchema = FileEntrySchema.extend({
  offset: z.number().int().nonnegative().optional(),
});
export type StagedFile = z.infer<typeof StagedFileSchema>;

/** A fatal error that stopped a step: what the manifest and the CLI report. */
export const FatalSchema = z.object({
  message: z.string(),
  error_code: z.string().optional(),
  status: z.number().int().optional(),
});
export type Fatal = z.infer<typeof FatalSchema>;

/** The fatal-error fields of an API error; anything else is not the API's and is rethrown. */
export function fatalOf(error: unknown): Fatal {
  if (!(error instanceof ApiError)) throw error;
  return {
    message: error.hint ? `${error.message}. ${error.hint}` : error.message,
    ...(error.errorCode ? { error_code: error.errorCode } : {}),
    ...(error.status ? { status: error.status } : {}),
  };
}

/**
 * How a run's tables are written (docs/contract.md): `hive`, Parquet under `parquet/<table>/dt=…/`;
 * `iceberg`, Iceberg v2 tables under `iceberg/<table>/`. Chosen when the run starts.
 */
export const TableFormatSchema = z.enum(TABLE_FORMATS);
export type TableFormat = z.infer<typeof TableFormatSchema>;

/**
 * Where a run is going: shared by every step of it. `table_format` is absent for Hive (and in
 * records and messages of runs before 0.4), so that a Hive run's records are as they were.
 */
export const RunRefSchema = z.object({
  run_id: RunIdSchema,
  dt: DtSchema,
  mode: ModeSchema,
  table_format: TableFormatSchema.optional(),
  /**
   * How the run treats reports that differ from the spec (`SchemaContract`). Absent for
   * `freeze` (and in records and messages of runs before the option), so that a frozen run's records
   * are as they were.
   */
  schema_contract: z.enum(SCHEMA_CONTRACTS).optional(),
});

/** The table format of a run (Hive when its records predate the option). */
export const tableFormatOf = (run: Pick<RunRef, 'table_format'>): TableFormat => run.table_format ?? 'hive';
export type RunRef = z.infer<typeof RunRefSchema>;

/** Written by start-run. */
export const RunRecordSchema = RunRefSchema.extend({
  /**
   * `local`: one process runs every step and finishes the run itself (CLI); `queues`: the
   * Lambdas do, and finish-run closes it. finish-run leaves local runs alone until their deadline.
   */
  driver: z.enum(['local', 'queues']),
  started_at: z.string(),
  campaign_ids: z.array(int),
  /** Campaign list items that failed validation (kept in raw/ and quarantine/). */
  campaigns_invalid: int,
  /** Campaign items listed again on a later page (absent in records before 0.2). */
  duplicates: int.nonnegative().default(0),
  /** The company the key belongs to, as verify named it. */
  company_name: z.string().optional(),
  /** The campaigns files it staged. */
  staged: z.array(StagedFileSchema),
  requests: RequestCountsSchema,
  fatal: FatalSchema.optional(),
  /**
   * Written first, the moment the run holds the output, before anything it stages: a run
   * interrupted while it starts is known, and closed as failed (its `fatal` says so) by whoever
   * finds it; start-run overwrites it with the whole record.
   */
  starting: z.literal(true).optional(),
});
export type RunRecord = z.infer<typeof RunRecordSchema>;

/** The body of a plan-queue message: list one campaign's jobs. */
export const PlanMessageSchema = RunRefSchema.extend({ campaign_id: int });
export type PlanMessage = z.infer<typeof PlanMessageSchema>;

/**
 * The body of a plan-queue message that goes on with a run's start: its campaign listing was
 * handed on before start-run's (or the previous delivery's) deadline.
 */
export const StartListingMessageSchema = RunRefSchema.extend({ list: z.literal('campaigns') });
export type StartListingMessage = z.infer<typeof StartListingMessageSchema>;

/** What the plan queue carries: a campaign to plan, or a run's campaign listing to go on with. */
export const PlanQueueMessageSchema = z.union([PlanMessageSchema, StartListingMessageSchema]);

/** One job to fetch, with the fingerprint of its list item (for the incremental state). */
export const UnitJobSchema = z.object({ job_id: int, fp: z.string() });
export type UnitJob = z.infer<typeof UnitJobSchema>;

/** The body of a report-queue message: a unit of work, the reports of up to N jobs of one campaign. */
export const UnitSchema = RunRefSchema.extend({
  campaign_id: int,
  /** Unique in the run; names the unit's files, so a redelivered unit overwrites, never duplicates. */
  unit: z.string().regex(/^c\d+-u\d+$/),
  jobs: z.array(UnitJobSchema).min(1),
});
export type Unit = z.infer<typeof UnitSchema>;

/** What happened to one listed job in a run (contract: manifest `counts`). */
export const JobOutcomeSchema = z.enum([
  'exported',
  'unchanged',
  'not_ready',
  'not_found',
  'invalid',
  'failed',
  /** Not fetched: the run's deadline closed it while its work was still queued; the next run asks again. */
  'deferred',
]);
export type JobOutcome = z.infer<typeof JobOutcomeSchema>;

/** Written by plan-campaign. */
export const PlanRecordSchema = z.object({
  campaign_id: int,
  /** Listed jobs (valid or not). */
  jobs: int,
  units: z.array(z.string()),
  /** The jobs to fetch, in unit order, so a redelivered plan sends the very same units. */
  fetch: z.array(UnitJobSchema),
  unit_size: int,
  unchanged: z.array(UnitJobSchema),
  /** Job list items that failed validation: counted invalid. */
  jobs_invalid: int,
  /** Job items listed again on a later page (absent in records before 0.2). */
  duplicates: int.nonnegative().default(0),
  /**
   * Why the listing stopped before its end when the API's pages contradicted themselves
   * (ListingError): the campaign counts as unlisted, its jobs uncounted, its state untouched.
   */
  unlisted: z.string().optional(),
  requests: RequestCountsSchema,
  /** 404 on listing: the campaign went away between the listings. */
  campaign_gone: z.boolean(),
  /** The jobs files it staged. */
  staged: z.array(StagedFileSchema),
  fatal: FatalSchema.optional(),
});
export type PlanRecord = z.infer<typeof PlanRecordSchema>;

export const UnitJobResultSchema = z.object({
  fp: z.string(),
  /** `pending`: a retryable failure; another delivery of the unit will try again. */
  outcome: z.union([JobOutcomeSchema.exclude(['unchanged', 'deferred']), z.literal('pending')]),
  detail: z.string().optional(),
});
export type UnitJobResult = z.infer<typeof UnitJobResultSchema>;

/** Written by export-reports after each delivery of a unit; the next delivery resumes from it. */
export const UnitSummarySchema = z.object({
  unit: z.string(),
  campaign_id: int,
  attempt: int,
  jobs: z.record(z.string(), UnitJobResultSchema),
  /** The files of every delivery so far (each delivery stages its own, named by attempt). */
  staged: z.array(StagedFileSchema),
  requests: RequestCountsSchema,
  fatal: FatalSchema.optional(),
  /** How the unit's exported reports differed from the spec, every delivery so far (`evolve` runs; absent when none did). */
  drift: SchemaDriftSchema.optional(),
});
export type UnitSummary = z.infer<typeof UnitSummarySchema>;

export const emptyRequestCounts = (): RequestCounts => ({ total: 0, retried: 0, by_status: {} });

/** Adds request counts (manifest totals are sums over the run's steps). */
export function addRequestCounts(a: RequestCounts, b: RequestCounts): RequestCounts {
  const by_status = { ...a.by_status };
  for (const [status, n] of Object.entries(b.by_status)) by_status[status] = (by_status[status] ?? 0) + n;
  return { total: a.total + b.total, retried: a.retried + b.retried, by_status };
}

/** Reads a JSON record from bytes, validated; throws a clear error naming the key. */
export function parseRecord<T>(schema: z.ZodType<T>, body: Uint8Array, key: string): T {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch (cause) {
    throw new StorageError(`${key} is not JSON`, key, { cause });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success)
    throw new StorageError(`${key} is not a valid record: ${z.prettifyError(parsed.error)}`, key);
  return parsed.data;
}

export const encodeRecord = (record: unknown): string => `${JSON.stringify(record, null, 2)}\n`;
