/**
 * The output key layout (docs/ingest.md#output-layout), identical on a local folder and on
 * S3. The writer, the Glue tables' partition projection (CDK) and the tests derive from it.
 * Below both the export and the Iceberg writer, so it imports nothing of either: a table or
 * raw entity is named by its string here.
 */

/** The partition column of every table and raw entity. */
export const PARTITION_KEY = 'dt';
/** `dt` values: the export date, `YYYY-MM-DD` (UTC). */
export const DT_PATTERN = /^\d{4}-\d{2}-\d{2}$/;
/** Athena partition projection's format for `dt` (Java date format). */
export const DT_PROJECTION_FORMAT = 'yyyy-MM-dd';

export const PARQUET_ROOT = 'parquet';
export const RAW_ROOT = 'raw';
export const RUNS_ROOT = 'runs';
export const QUARANTINE_ROOT = 'quarantine';
export const STATE_ROOT = 'state';
/** The Iceberg tables' root (`tableFormat` iceberg): one folder per table, `metadata/` and `data/`. */
export const ICEBERG_ROOT = 'iceberg';

/** How the contract tables are stored: Hive-style Parquet under `parquet/`, or Iceberg v2 under `iceberg/`. */
export const TABLE_FORMATS = ['hive', 'iceberg'] as const;
export type TableFormat = (typeof TABLE_FORMATS)[number];
/** Hive: an existing deployment or output keeps its layout. */
export const DEFAULT_TABLE_FORMAT: TableFormat = 'hive';

/** Prefix of one table's files (the Glue table's location, relative to the root). */
export const tablePrefix = (table: string): string => `${PARQUET_ROOT}/${table}/`;
/** An Iceberg table's folder (its location, relative to the root): `iceberg/<table>`. */
export const icebergTablePrefix = (table: string): string => `${ICEBERG_ROOT}/${table}`;
/** The Iceberg table holding the newest report per job of a report table: `<table>_current`. */
export const currentTableName = <T extends string>(table: T): `${T}_current` => `${table}_current`;
/** Prefix of one raw entity's files. */
export const rawPrefix = (entity: string): string => `${RAW_ROOT}/${entity}/`;
/** Prefix of the run manifests (the `runs` table's location, relative to the root). */
export const RUNS_PREFIX = `${RUNS_ROOT}/`;
/** The storage location template for partition projection, relative to the root. */
export const partitionTemplate = (prefix: string): string =>
  `${prefix}${PARTITION_KEY}=\${${PARTITION_KEY}}/`;

export const parquetKey = (table: string, dt: string, stem: string): string =>
  `${tablePrefix(table)}${PARTITION_KEY}=${dt}/${stem}.parquet`;
/** A data file of an Iceberg table: under its `data/`, partitioned by `dt` as the Hive files are. */
export const icebergDataKey = (table: string, dt: string, stem: string): string =>
  `${ICEBERG_ROOT}/${table}/data/${PARTITION_KEY}=${dt}/${stem}.parquet`;
export const rawKey = (entity: string, dt: string, stem: string): string =>
  `${rawPrefix(entity)}${PARTITION_KEY}=${dt}/${stem}.jsonl.gz`;
export const manifestKey = (dt: string, runId: string): string =>
  `${RUNS_ROOT}/${PARTITION_KEY}=${dt}/${runId}.json`;
/** A body that failed validation, kept as received with its issues; `name` says what it was. */
export const quarantineKey = (dt: string, runId: string, name: string): string =>
  `${QUARANTINE_ROOT}/${PARTITION_KEY}=${dt}/${runId}/${name}.json`;

/**
 * The `index`-th published file of a run for one table or raw entity: `<run_id>-<index>`. One
 * file per table per run unless the run's data is larger than the split size; names are
 * deterministic, so a publish done again after a crash writes the very same keys.
 */
export const publishedStem = (runId: string, index: number): string => `${runId}-${index}`;

/** The export date of an instant, UTC. */
export const dtOf = (instant: Date): string => instant.toISOString().slice(0, 10);

/**
 * Keys of the incremental state and of runs in progress (layout free per the contract).
 * `state/campaigns/<id>.json` holds what the last runs did with each job of a campaign;
 * `state/runs/<run_id>/` holds a run's records until finish-run turns them into the manifest.
 */
export const STATE_KEYS = {
  campaign: (campaignId: number): string => `${STATE_ROOT}/campaigns/${campaignId}.json`,
  runsPrefix: `${STATE_ROOT}/runs/`,
  runPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/`,
  runRecord: (runId: string): string => `${STATE_ROOT}/runs/${runId}/run.json`,
  plan: (runId: string, campaignId: number): string => `${STATE_ROOT}/runs/${runId}/plans/${campaignId}.json`,
  plansPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/plans/`,
  /**
   * A campaign's job listing in progress, in pieces of a few pages each (`<piece>.json`, six
   * digits, so that the keys list in order): plan-campaign resumes from the last one.
   */
  listingPrefix: (runId: string, campaignId: number): string =>
    `${STATE_ROOT}/runs/${runId}/listing/${campaignId}/`,
  listingPiece: (runId: string, campaignId: number, piece: number): string =>
    `${STATE_ROOT}/runs/${runId}/listing/${campaignId}/${String(piece).padStart(6, '0')}.json`,
  /**
   * The run's campaign listing in progress, in pieces of a few pages each (six digits, in order):
   * a start handed on before its listing ended resumes from the last one.
   */
  campaignListingPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/campaign-listing/`,
  campaignListingPiece: (runId: string, piece: number): string =>
    `${STATE_ROOT}/runs/${runId}/campaign-listing/${String(piece).padStart(6, '0')}.json`,
  /** How many of the run's campaigns (in listing order) have had their plan messages sent (AWS). */
  plansSent: (runId: string): string => `${STATE_ROOT}/runs/${runId}/plans-sent.json`,
  /** When the run's campaign listing was last handed on: finish-run's judge of a start still alive. */
  listingHandedOn: (runId: string): string => `${STATE_ROOT}/runs/${runId}/listing-handed-on.json`,
  unit: (runId: string, unit: string): string => `${STATE_ROOT}/runs/${runId}/units/${unit}.json`,
  unitsPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/units/`,
  /** Requests of a step that failed before writing its record (counted in the manifest). */
  requests: (runId: string, id: string): string => `${STATE_ROOT}/runs/${runId}/requests/${id}.json`,
  requestsPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/requests/`,
  /** Set by finish-run when it first finds the queues empty while the run is not complete. */
  drainMark: (runId: string): string => `${STATE_ROOT}/runs/${runId}/drained.json`,
  /**
   * The run's staging area: its steps write their Parquet and raw files here, and the finish
   * step publishes them into `parquet/` and `raw/`. `path` is `steps/<entity>/<stem>.staged` (a
   * step's files in one object: `stagedStepKey`), or `parquet/<table>/<stem>.parquet` and
   * `raw/<entity>/<stem>.jsonl.gz` (one file an object: records before 0.6, the benches).
   */
  staged: (runId: string, path: string): string => `${STATE_ROOT}/runs/${runId}/staged/${path}`,
  /**
   * Written once, when a run starts to close: the manifest to write and the files to publish,
   * frozen, so that whoever finishes the run (a second finisher, the next run after a crash)
   * publishes exactly the same files.
   */
  closing: (runId: string): string => `${STATE_ROOT}/runs/${runId}/closing.json`,
  /** The pieces a closing record names (`run/closing.ts`): staged files and outcomes, JSON Lines. */
  closingPieces: (runId: string, token: string): string => `${STATE_ROOT}/runs/${runId}/closing/${token}/`,
  /**
   * One finisher at a time works on a run's closing: who holds it and until when
   * (`state/closing-lease.ts`).
   */
  closingLease: (runId: string): string => `${STATE_ROOT}/runs/${runId}/closing-lease.json`,
  /** Each published output as it completes, so that a closing taken up again publishes only the rest. */
  published: (runId: string, outputKey: string): string =>
    `${STATE_ROOT}/runs/${runId}/published/${outputKey.replaceAll('/', '~')}.json`,
  publishedPrefix: (runId: string): string => `${STATE_ROOT}/runs/${runId}/published/`,
  /**
   * The announcement's claim: created once, before the run's `ExportRunFinished` event is put,
   * so that two finishers announce a run once.
   */
  announced: (runId: string): string => `${STATE_ROOT}/runs/${runId}/announced.json`,
  /**
   * The run's tombstone, written once its manifest, state and announcement are done and before
   * its other records are deleted: a closer that comes late (a duplicate, a stalled finisher)
   * finds it and changes nothing. Removed by later runs once no actor of the run can be alive.
   */
  closed: (runId: string): string => `${STATE_ROOT}/runs/${runId}/closed.json`,
  /** One run at a time per output: who holds the output and until when. */
  lock: `${STATE_ROOT}/lock.json`,
  /**
   * A reader's write that tells the storage's clock (its stamp, S3's LastModified), made only
   * when a lock's lease looks over: the lease is judged on that clock (export/state/lock-clock.ts).
   */
  lockClock: `${STATE_ROOT}/lock-clock.json`,
  /**
   * A schedule's claim on one scheduled time (AWS): the first start-run invocation for it
   * creates this object, and every other delivery of the same time finds it and starts nothing.
   */
  scheduledStart: (mode: string, scheduledTime: string): string =>
    `${STATE_ROOT}/scheduled-starts/${mode}/${scheduledTime}.json`,
  /**
   * The metadata file of an Iceberg table's last commit by the exporter: what a commit builds on
   * when the catalog lost its pointer (a stack update resets a Glue table's parameters).
   */
  icebergPointer: (table: string): string => `${STATE_ROOT}/iceberg/${table}.json`,
  /** The table format the output holds (`state/table-format.ts`). */
  tableFormat: `${STATE_ROOT}/table-format.json`,
  /** When a run last ended succeeded or partial, for the NoFinishedRun alarm's heartbeat (AWS). */
  heartbeat: `${STATE_ROOT}/heartbeat.json`,
  /** What the runs learnt of the API's fixed windows, for the next run's limiter (`state/api-windows.ts`). */
  apiWindows: `${STATE_ROOT}/api-windows.json`,
} as const;

/** Where a run stages one Parquet file of `table` before publishing it. */
export const stagedParquetKey = (runId: string, table: string, stem: string): string =>
  STATE_KEYS.staged(runId, `${PARQUET_ROOT}/${table}/${stem}.parquet`);
/** Where a run stages one raw JSON Lines file of `entity` before publishing it. */
export const stagedRawKey = (runId: string, entity: string, stem: string): string =>
  STATE_KEYS.staged(runId, `${RAW_ROOT}/${entity}/${stem}.jsonl.gz`);

/**
 * Where a step (a unit's delivery, a campaign's listing, the campaigns snapshot) stages its files
 * as one object: its raw lines and its Parquet tables one after another (`run/staging.ts`).
 */
export const stagedStepKey = (runId: string, entity: string, stem: string): string =>
  STATE_KEYS.staged(runId, `steps/${entity}/${stem}.staged`);

/** The run id a key under `state/runs/` belongs to. */
export const runIdOfStateKey = (key: string): string | undefined =>
  key.startsWith(STATE_KEYS.runsPrefix) ? key.slice(STATE_KEYS.runsPrefix.length).split('/')[0] : undefined;
