/**
 * What each function does with the data lake, as data: the object keys it reads, writes and
 * deletes, as IAM key patterns relative to the data prefix (`*` is any run of characters, as in
 * an IAM resource). The grants are exactly this table (DataLake.grantAccess), and
 * test/integration/aws/access.test.ts runs the real handlers and checks that every key each one
 * touched matches its patterns for that operation.
 */
import {
  ICEBERG_ROOT,
  manifestKey,
  PARQUET_ROOT,
  QUARANTINE_ROOT,
  RAW_ROOT,
  STATE_KEYS,
  STATE_ROOT,
  type TableFormat,
} from '../../shared/layout.js';
import type { FunctionName } from './functions.js';

/** Key patterns of one function's object operations (s3:ListBucket is bucket-wide: see DataLake.grantAccess). */
export interface DataLakeAccess {
  /** s3:GetObject. */
  readonly read: readonly string[];
  /** s3:PutObject and s3:AbortMultipartUpload (large bodies and publishing are multipart uploads). */
  readonly write: readonly string[];
  /** s3:DeleteObject. */
  readonly delete: readonly string[];
}

/** Any run id, campaign, unit or file name. */
const ANY = '*';

/** The layout's keys as patterns (shared/layout.ts is the one source of each). */
export const KEY_PATTERNS = {
  lock: STATE_KEYS.lock,
  /** A lock taker's write that reads the storage's clock (a lease that looks over). */
  lockClock: STATE_KEYS.lockClock,
  /** When a run last ended well (finish-run's NoFinishedRun metric). */
  heartbeat: STATE_KEYS.heartbeat,
  /** The output's table format: read before a run starts, written when a run publishes. */
  tableFormat: STATE_KEYS.tableFormat,
  /**
   * What the limiters learnt of the API's windows: read once by each container that calls the
   * API, written by export-reports when its limiter learnt something new (state/api-windows.ts).
   */
  apiWindows: STATE_KEYS.apiWindows,
  campaignState: `${STATE_ROOT}/campaigns/${ANY}`,
  /** Everything a run keeps while open: its records, staged files, closing record. */
  runState: `${STATE_KEYS.runsPrefix}${ANY}`,
  runRecord: STATE_KEYS.runRecord(ANY),
  plans: `${STATE_KEYS.plansPrefix(ANY)}${ANY}`,
  /** A campaign's job listing in progress, checkpointed in pieces (plan-campaign). */
  listingPieces: `${STATE_KEYS.runsPrefix}${ANY}/listing/${ANY}`,
  /** The run's campaign listing in progress, in pieces; when it was last handed on; its plan messages sent. */
  campaignListing: `${STATE_KEYS.campaignListingPrefix(ANY)}${ANY}`,
  listingHandedOn: STATE_KEYS.listingHandedOn(ANY),
  plansSent: STATE_KEYS.plansSent(ANY),
  units: `${STATE_KEYS.unitsPrefix(ANY)}${ANY}`,
  requests: `${STATE_KEYS.requestsPrefix(ANY)}${ANY}`,
  staged: STATE_KEYS.staged(ANY, ANY),
  closing: STATE_KEYS.closing(ANY),
  /** The pieces of a closing record: staged files and outcomes, JSON Lines. */
  closingPieces: `${STATE_KEYS.closingPieces(ANY, ANY)}${ANY}`,
  /** One finisher at a time on a closing. */
  closingLease: STATE_KEYS.closingLease(ANY),
  /** Each output of a closing's publish, recorded as it completes. */
  published: `${STATE_KEYS.publishedPrefix(ANY)}${ANY}`,
  /** The claim of a run's ExportRunFinished event (created if absent before the event is put). */
  announced: STATE_KEYS.announced(ANY),
  /** A closed run's tombstone: whoever might close or step into the run reads it first. */
  closed: STATE_KEYS.closed(ANY),
  drainMark: STATE_KEYS.drainMark(ANY),
  /** A schedule's claim on one scheduled time (created if absent, given back by a start that started nothing). */
  scheduledStart: STATE_KEYS.scheduledStart(ANY, ANY),
  manifests: manifestKey(ANY, ANY),
  parquet: `${PARQUET_ROOT}/${ANY}`,
  raw: `${RAW_ROOT}/${ANY}`,
  quarantine: `${QUARANTINE_ROOT}/${ANY}`,
  /** The Iceberg tables' metadata and data files (`tableFormat` iceberg). */
  iceberg: `${ICEBERG_ROOT}/${ANY}`,
  /** Each Iceberg table's last committed metadata file, kept by its committers. */
  icebergPointer: STATE_KEYS.icebergPointer(ANY),
} as const;

const K = KEY_PATTERNS;

/**
 * start-run first claims its scheduled time (a schedule's invocation: created if absent, read
 * when another delivery has it, deleted to give it back when no run started). It takes the
 * lock, then closes the runs interrupted ones left open: closing a run is finishing it (read its
 * records and staged files, the closing record and its pieces under the closing lease, publish
 * with each output recorded, manifest, state, announcement claim, tombstone, delete its
 * records). Then it checks the output's table format, stages the campaigns, quarantines invalid
 * items, and writes its run record; a listing too long for its time is checkpointed in pieces
 * (and noted as handed on), and the plan messages it sent are noted.
 * Its reads and deletes under a run (`runState`) cover the run's claim and tombstone.
 * A full run's estimate (its campaigns' job counts) keeps its requests for the manifest. Its
 * container reads the API's windows before its first request.
 */
export const START_RUN_ACCESS: DataLakeAccess = {
  read: [
    K.scheduledStart,
    K.lock,
    K.lockClock,
    K.runState,
    K.campaignState,
    K.manifests,
    K.tableFormat,
    K.apiWindows,
  ],
  write: [
    K.tableFormat,
    K.scheduledStart,
    K.lock,
    K.lockClock,
    K.runRecord,
    K.campaignListing,
    K.listingHandedOn,
    K.plansSent,
    K.staged,
    K.closing,
    K.closingPieces,
    K.closingLease,
    K.published,
    K.announced,
    K.closed,
    K.campaignState,
    K.manifests,
    K.parquet,
    K.raw,
    K.quarantine,
    K.requests,
  ],
  delete: [K.scheduledStart, K.runState],
};

/**
 * plan-campaign checks the run is open (neither closing nor closed), reads a plan written by an
 * earlier delivery (or its own, created if absent, on a lost race) and the campaign's state;
 * stages the jobs (a long listing checkpointed in pieces), quarantines invalid items, writes the
 * plan, and keeps the requests of a listing that failed before its plan. It also goes on with a
 * run's start that start-run handed on: the campaign listing's pieces, the run record written
 * over its `starting` one, the plan messages it sent noted. Its container reads the API's
 * windows before its first request.
 */
export const PLAN_CAMPAIGN_ACCESS: DataLakeAccess = {
  read: [
    K.apiWindows,
    K.runRecord,
    K.closing,
    K.closed,
    K.plans,
    K.listingPieces,
    K.campaignListing,
    K.plansSent,
    K.campaignState,
  ],
  write: [
    K.plans,
    K.listingPieces,
    K.runRecord,
    K.campaignListing,
    K.listingHandedOn,
    K.plansSent,
    K.staged,
    K.requests,
    K.quarantine,
  ],
  delete: [],
};

/**
 * export-reports checks the run is open (neither closing nor closed), resumes from the unit's
 * summary, stages the reports, quarantines invalid bodies, writes the summary (conditionally),
 * and keeps the requests of a unit that failed before its summary. It never writes published
 * data nor the incremental state. Its container reads the API's windows before its first
 * request, and writes them after a unit when its limiter learnt something new.
 */
export const EXPORT_REPORTS_ACCESS: DataLakeAccess = {
  read: [K.runRecord, K.closing, K.closed, K.units, K.apiWindows],
  write: [K.units, K.staged, K.requests, K.quarantine, K.apiWindows],
  delete: [],
};

/**
 * finish-run reads the open runs' records, marks drained ones, and closes runs: the closing
 * record and its pieces, the closing lease, publishing the staged files (each output recorded), the manifest, the incremental state, the announcement's
 * claim, the tombstone, then deletes the run's records and releases the lock. On every look it
 * reads and updates the heartbeat. Its reads and deletes under a run (`runState`) cover the
 * run's claim and tombstone.
 */
export const FINISH_RUN_ACCESS: DataLakeAccess = {
  read: [K.lock, K.heartbeat, K.runState, K.campaignState, K.manifests, K.tableFormat],
  write: [
    K.tableFormat,
    K.lock,
    K.heartbeat,
    K.closing,
    K.closingPieces,
    K.closingLease,
    K.published,
    K.drainMark,
    K.announced,
    K.closed,
    K.campaignState,
    K.manifests,
    K.parquet,
    K.raw,
  ],
  delete: [K.runState],
};

export const DATA_LAKE_ACCESS: Readonly<Record<FunctionName, DataLakeAccess>> = {
  'start-run': START_RUN_ACCESS,
  'plan-campaign': PLAN_CAMPAIGN_ACCESS,
  'export-reports': EXPORT_REPORTS_ACCESS,
  'finish-run': FINISH_RUN_ACCESS,
};

/**
 * The functions that commit Iceberg tables: those that close runs (finish-run, and start-run for
 * the runs interrupted ones left open). A commit reads the current metadata and the files it
 * builds on, writes data files, manifests, manifest lists and metadata, and deletes what a
 * commit that lost its race or was cut short left behind.
 */
export const ICEBERG_COMMITTERS = ['start-run', 'finish-run'] as const satisfies readonly FunctionName[];

const ICEBERG_ACCESS: DataLakeAccess = {
  read: [K.iceberg, K.icebergPointer],
  write: [K.iceberg, K.icebergPointer],
  delete: [K.iceberg],
};

/** What each function does with the data lake under a table format: the Hive table plus Iceberg's files for the committers. */
export function dataLakeAccess(format: TableFormat): Readonly<Record<FunctionName, DataLakeAccess>> {
  if (format === 'hive') return DATA_LAKE_ACCESS;
  const withIceberg = (access: DataLakeAccess): DataLakeAccess => ({
    read: [...access.read, ...ICEBERG_ACCESS.read],
    write: [...access.write, ...ICEBERG_ACCESS.write],
    delete: [...access.delete, ...ICEBERG_ACCESS.delete],
  });
  return Object.fromEntries(
    Object.entries(DATA_LAKE_ACCESS).map(([name, access]) => [
      name,
      (ICEBERG_COMMITTERS as readonly string[]).includes(name) ? withIceberg(access) : access,
    ]),
  ) as Record<FunctionName, DataLakeAccess>;
}

/** True when `key` matches an IAM key pattern: `*` any run of characters, `?` any one. */
export function keyMatches(pattern: string, key: string): boolean {
  const escaped = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`, 's').test(key);
}
