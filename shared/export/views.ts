/**
 * The lake's SQL surface beyond the Parquet tables: the `runs` table over the run manifests and
 * the `*_latest` views over the report tables. One source for the Glue catalog (CDK) and for
 * DuckDB (the CLI and the demo): the view SQL is the same text on Athena (Trino) and DuckDB, and
 * every column type is written once and spelled for each engine here.
 */
import type { TableFormat } from '../layout.js';
import { RAW_LINE_COLUMNS } from './raw-lines.js';
import type { RunStatus } from './state/manifest.js';
import { type ColumnType, REPORT_TABLES, type ReportTableName, TABLES, type TableName } from './tables.js';

/**
 * A column type: a contract column type, or a nested type of the `runs` table (a map's keys are
 * strings). Rendered by {@link hiveType} (Glue), {@link prestoType} (Athena views) and
 * {@link duckdbType}.
 */
export type SqlType =
  | ColumnType
  | { readonly array: SqlType }
  | { readonly map: SqlType }
  | { readonly struct: Readonly<Record<string, SqlType>> };

export interface SqlColumn {
  readonly name: string;
  readonly type: SqlType;
  readonly doc: string;
}

const SCALARS = {
  string: { hive: 'string', presto: 'varchar', duckdb: 'VARCHAR' },
  int: { hive: 'int', presto: 'integer', duckdb: 'INTEGER' },
  bigint: { hive: 'bigint', presto: 'bigint', duckdb: 'BIGINT' },
  boolean: { hive: 'boolean', presto: 'boolean', duckdb: 'BOOLEAN' },
  // Athena reads a Hive timestamp as timestamp(3); the Parquet is TIMESTAMP(MILLIS, adjusted to UTC),
  // which DuckDB reads as TIMESTAMP WITH TIME ZONE.
  timestamp: { hive: 'timestamp', presto: 'timestamp(3)', duckdb: 'TIMESTAMP WITH TIME ZONE' },
  'array<string>': { hive: 'array<string>', presto: 'array(varchar)', duckdb: 'VARCHAR[]' },
} as const satisfies Record<ColumnType, Record<'hive' | 'presto' | 'duckdb', string>>;

/** The Glue (Hive DDL) spelling: `struct<a:bigint,b:map<string,bigint>>`. */
export function hiveType(type: SqlType): string {
  if (typeof type === 'string') return SCALARS[type].hive;
  if ('array' in type) return `array<${hiveType(type.array)}>`;
  if ('map' in type) return `map<string,${hiveType(type.map)}>`;
  return `struct<${Object.entries(type.struct)
    .map(([k, t]) => `${k}:${hiveType(t)}`)
    .join(',')}>`;
}

/** The Presto/Trino spelling stored in an Athena view definition: `row(a bigint, b array(varchar))`. */
export function prestoType(type: SqlType): string {
  if (typeof type === 'string') return SCALARS[type].presto;
  if ('array' in type) return `array(${prestoType(type.array)})`;
  if ('map' in type) return `map(varchar, ${prestoType(type.map)})`;
  return `row(${Object.entries(type.struct)
    .map(([k, t]) => `${k} ${prestoType(t)}`)
    .join(', ')})`;
}

/** The DuckDB spelling: `STRUCT("a" BIGINT, "b" VARCHAR[])`. */
export function duckdbType(type: SqlType): string {
  if (typeof type === 'string') return SCALARS[type].duckdb;
  if ('array' in type) return `${duckdbType(type.array)}[]`;
  if ('map' in type) return `MAP(VARCHAR, ${duckdbType(type.map)})`;
  return `STRUCT(${Object.entries(type.struct)
    .map(([k, t]) => `"${k}" ${duckdbType(t)}`)
    .join(', ')})`;
}

// ---- runs: one row per run manifest ----------------------------------------------------------

/** The table (Glue) and view (DuckDB) over the run manifests, `runs/dt=YYYY-MM-DD/<run_id>.json`. */
export const RUNS_TABLE = 'runs';

/** The partition column every table and view ends with (the export date, `YYYY-MM-DD`). */
const DT_COLUMN: SqlColumn = { name: 'dt', type: 'string', doc: 'export date (UTC) of the run, YYYY-MM-DD' };

const COUNT = 'bigint';
const COUNTS = [
  'campaigns',
  'jobs',
  'reports_exported',
  'reports_unchanged',
  'reports_not_ready',
  'reports_not_found',
  'reports_invalid',
  'reports_failed',
  'campaigns_invalid',
  'duplicates',
  'reports_deferred',
] as const;

/**
 * The columns of `runs`, mirroring the manifest (`ManifestSchema`) field by field, except `dt`:
 * the partition supplies it (Glue) or the manifest's own `dt` does (DuckDB), as the last column.
 * Times stay ISO 8601 text as written; `from_iso8601_timestamp()` converts them on Athena.
 */
export const RUNS_COLUMNS: readonly SqlColumn[] = [
  { name: 'run_id', type: 'string', doc: 'the run (ids sort by start time)' },
  { name: 'mode', type: 'string', doc: "'incremental' or 'full'" },
  {
    name: 'status',
    type: 'string',
    doc: "'succeeded', 'partial' or 'failed' (a failed run publishes no data)",
  },
  { name: 'started_at', type: 'string', doc: 'ISO 8601 UTC as written' },
  { name: 'finished_at', type: 'string', doc: 'ISO 8601 UTC as written' },
  {
    name: 'counts',
    type: { struct: Object.fromEntries(COUNTS.map((c) => [c, COUNT])) },
    doc: 'campaigns and jobs listed, and one outcome per listed job (reports_*)',
  },
  {
    name: 'requests',
    type: { struct: { total: COUNT, retried: COUNT, by_status: { map: COUNT } } },
    doc: 'HTTP requests sent, retries included; by_status: status code (or "error") to count',
  },
  {
    name: 'files',
    type: {
      array: {
        struct: { key: 'string', table_or_entity: 'string', format: 'string', rows: COUNT, bytes: COUNT },
      },
    },
    doc: 'the files the run published (format: parquet or jsonl); key relative to the output root',
  },
  { name: 'company_name', type: 'string', doc: 'the company of the API key, as verify named it' },
  { name: 'unlisted_campaigns', type: { array: 'bigint' }, doc: 'campaigns whose jobs could not be listed' },
  {
    name: 'partially_listed_campaigns',
    type: { array: 'bigint' },
    doc: 'campaigns whose job listing held invalid items (their listing deletes no job)',
  },
  { name: 'not_found_jobs', type: { array: 'bigint' }, doc: 'jobs whose report answered 404 in the run' },
  { name: 'recovered_by', type: 'string', doc: 'the run that closed this interrupted run' },
  { name: 'table_format', type: 'string', doc: "'iceberg' when the run wrote Iceberg tables (NULL: Hive)" },
  {
    name: 'iceberg',
    type: {
      struct: {
        catalog: 'string',
        tables: { map: { struct: { snapshot_id: 'bigint', metadata_location: 'string' } } },
      },
    },
    doc: "an Iceberg run's catalog (file or glue) and, per table, its snapshot id and metadata file",
  },
  {
    name: 'schema_contract',
    type: 'string',
    doc: "'evolve' when the run kept reports that differ from the spec, their misfits in _rescued (NULL: freeze)",
  },
  {
    name: 'schema_drift',
    type: {
      array: {
        struct: {
          path: 'string',
          kind: 'string',
          count: COUNT,
          reports: COUNT,
          first_job_id: 'bigint',
          seen: 'array<string>',
        },
      },
    },
    doc: 'evolve runs: how the reports differed from the spec, per path and kind (new_field, type_mismatch, unlisted_value, new_variant, missing_field); [] when they did not, NULL for freeze runs',
  },
  {
    name: 'error',
    type: { struct: { message: 'string', error_code: 'string' } },
    doc: "a failed run's one-line reason and the API's error_code",
  },
];

/** Every column of the `runs` table or view, `dt` last. */
export const RUNS_VIEW_COLUMNS: readonly SqlColumn[] = [...RUNS_COLUMNS, DT_COLUMN];

// ---- *_latest: the current state, deletions honoured --------------------------------------------

/** Runs whose data counts: a failed run publishes none (and its rows, were there any, are ignored). */
export const PUBLISHED_STATUSES = ['succeeded', 'partial'] as const satisfies readonly RunStatus[];

export interface ViewDef {
  readonly name: string;
  readonly doc: string;
  /** The view's columns in order: the table's, then `dt`. */
  readonly columns: readonly SqlColumn[];
  /** A SELECT that runs unchanged on Athena (engine v3) and DuckDB; tables unqualified. */
  readonly sql: string;
}

/** The name of a table's latest view: `campaigns_latest`, `jobs_latest`, `reports_latest`, … */
export const latestViewName = (table: TableName): string => `${table}_latest`;

/** The columns of a contract table as the catalog and DuckDB expose them: the table's, then `dt`. */
export const tableColumns = (table: keyof typeof TABLES): readonly SqlColumn[] => [
  ...TABLES[table].columns.map(({ name, type, doc }) => ({ name, type, doc })),
  DT_COLUMN,
];

const SELECT_LINE = 100;

/** `t.a, t.b, …` wrapped at about {@link SELECT_LINE} characters, indented. */
function selectList(columns: readonly SqlColumn[]): string {
  const lines: string[] = [];
  let line = '';
  for (const c of columns) {
    const item = `t.${c.name}`;
    if (line && line.length + item.length + 2 > SELECT_LINE) {
      lines.push(`${line},`);
      line = item;
    } else line = line ? `${line}, ${item}` : item;
  }
  lines.push(line);
  return lines
    .map((l) => `       ${l}`)
    .join('\n')
    .trimStart();
}

/*
 * What "latest" means (docs/query.md, "Snapshots, reports and the latest views", says the same):
 * - Only published runs count: status succeeded or partial.
 * - A run's campaign listing is complete when no campaign item failed validation
 *   (counts.campaigns_invalid = 0). campaigns_latest: each campaign's row from the newest run
 *   that listed it, unless a newer complete campaign listing left it out (the campaign is gone).
 * - A run's listing of a campaign's jobs is complete when the run listed the campaign, listed
 *   its jobs to the end (not in unlisted_campaigns) and found every item valid (not in
 *   partially_listed_campaigns); a campaign that answered 404 for its jobs listed none, which
 *   is complete. An incomplete listing adds what it holds and deletes nothing.
 * - A job is deleted in a run whose complete listing of its campaign leaves it out, or in which
 *   its report answered 404 (not_found_jobs). A campaign that leaves the campaign listing gets
 *   no listing of its jobs, so its jobs stay as last listed.
 * - jobs_latest: each job's row from the newest run that listed it, unless it was deleted in
 *   that run or since.
 * - <report table>_latest: the rows of each job's newest report, unless the job was deleted
 *   since that report's run (a job listed again after a deletion shows a report again once one
 *   is exported: a job no longer listed is fetched again when it comes back).
 * The Iceberg `_current` tables apply the same deletions at each commit (commit-iceberg.ts). The
 * text is the same on both engines: CROSS JOIN UNNEST, contains(), max_by() and struct field
 * access are shared by Trino and DuckDB.
 */
const PUBLISHED_CTE = `published AS (
  SELECT p.run_id, p.counts, p.unlisted_campaigns, p.partially_listed_campaigns, p.not_found_jobs
  FROM ${RUNS_TABLE} p
  WHERE p.status IN (${PUBLISHED_STATUSES.map((s) => `'${s}'`).join(', ')})
)`;

/** `complete_listing` (campaign_id, run_id): every complete listing of a campaign's jobs; `not_found` (job_id, run_id): each job's newest 404. */
const DELETION_CTES = `complete_listing AS (
  SELECT c.campaign_id, c.run_id
  FROM campaigns c
  JOIN published p ON p.run_id = c.run_id
  WHERE NOT coalesce(contains(p.unlisted_campaigns, c.campaign_id), false)
    AND NOT coalesce(contains(p.partially_listed_campaigns, c.campaign_id), false)
),
not_found AS (
  SELECT u.job_id, max(p.run_id) AS run_id
  FROM published p
  CROSS JOIN UNNEST(p.not_found_jobs) AS u (job_id)
  GROUP BY u.job_id
)`;

/** The SQL of `campaigns_latest` (see the definition above). */
export function campaignsLatestSql(): string {
  return `WITH ${PUBLISHED_CTE},
campaign_newest AS (
  SELECT c.campaign_id, max(c.run_id) AS run_id
  FROM campaigns c
  JOIN published p ON p.run_id = c.run_id
  GROUP BY c.campaign_id
)
SELECT ${selectList(tableColumns('campaigns'))}
FROM campaigns t
JOIN campaign_newest n ON n.campaign_id = t.campaign_id AND n.run_id = t.run_id
WHERE t.run_id >= (
  SELECT coalesce(max(p.run_id), '') FROM published p WHERE coalesce(p.counts.campaigns_invalid, 0) = 0
)`;
}

/**
 * The SQL of `jobs_latest` (see the definition above). A job left out of a complete listing
 * newer than its own newest listing was deleted then: the newest complete listing of its
 * campaign is enough to tell.
 */
export function jobsLatestSql(): string {
  return `WITH ${PUBLISHED_CTE},
${DELETION_CTES},
job_newest AS (
  SELECT j.job_id, max(j.run_id) AS run_id
  FROM jobs j
  JOIN published p ON p.run_id = j.run_id
  GROUP BY j.job_id
),
campaign_listed AS (
  SELECT l.campaign_id, max(l.run_id) AS run_id
  FROM complete_listing l
  GROUP BY l.campaign_id
)
SELECT ${selectList(tableColumns('jobs'))}
FROM jobs t
JOIN job_newest n ON n.job_id = t.job_id AND n.run_id = t.run_id
LEFT JOIN campaign_listed l ON l.campaign_id = t.campaign_id
LEFT JOIN not_found f ON f.job_id = t.job_id
WHERE (l.run_id IS NULL OR t.run_id >= l.run_id)
  AND (f.run_id IS NULL OR f.run_id < t.run_id)`;
}

/**
 * The SQL of `<table>_latest` (see the definition above): per job, the rows of its newest
 * report, unless a complete listing of its campaign since left the job out (fewer of those
 * listings hold it than there are) or its report answered 404 since; child tables take the
 * rows of that same (job_id, run_id).
 */
export function latestViewSql(table: ReportTableName): string {
  return `WITH ${PUBLISHED_CTE},
${DELETION_CTES},
report_newest AS (
  SELECT r.job_id, max_by(r.campaign_id, r.run_id) AS campaign_id, max(r.run_id) AS run_id
  FROM reports r
  JOIN published p ON p.run_id = r.run_id
  GROUP BY r.job_id
),
unlisted_since AS (
  SELECT n.job_id
  FROM report_newest n
  JOIN complete_listing l ON l.campaign_id = n.campaign_id AND l.run_id > n.run_id
  LEFT JOIN jobs j ON j.run_id = l.run_id AND j.campaign_id = l.campaign_id AND j.job_id = n.job_id
  GROUP BY n.job_id
  HAVING count(j.job_id) < count(*)
),
latest AS (
  SELECT n.job_id, n.run_id
  FROM report_newest n
  LEFT JOIN unlisted_since u ON u.job_id = n.job_id
  LEFT JOIN not_found f ON f.job_id = n.job_id
  WHERE u.job_id IS NULL AND (f.run_id IS NULL OR f.run_id < n.run_id)
)
SELECT ${selectList(tableColumns(table))}
FROM ${table} t
JOIN latest l ON l.job_id = t.job_id AND l.run_id = t.run_id`;
}
/** The views of the newest listings: `campaigns_latest`, `jobs_latest` (both table formats). */
export const LISTING_VIEWS: readonly ViewDef[] = [
  {
    name: latestViewName('campaigns'),
    doc: 'The newest listing of each campaign still listed: its row from the newest published run that listed it.',
    columns: tableColumns('campaigns'),
    sql: campaignsLatestSql(),
  },
  {
    name: latestViewName('jobs'),
    doc: 'The newest listing of each job still listed: gone once a complete listing of its campaign leaves it out or its report answers 404.',
    columns: tableColumns('jobs'),
    sql: jobsLatestSql(),
  },
];

/** One `*_latest` view per report table, in table order (Hive; Iceberg has the `_current` tables). */
export const REPORT_LATEST_VIEWS: readonly ViewDef[] = REPORT_TABLES.map((table) => ({
  name: latestViewName(table),
  doc: `The ${table} rows of each job's newest report from a succeeded or partial run, unless the job was deleted since.`,
  columns: tableColumns(table),
  sql: latestViewSql(table),
}));

/** Every `*_latest` view: the listing views, then one per report table. */
export const LATEST_VIEWS: readonly ViewDef[] = [...LISTING_VIEWS, ...REPORT_LATEST_VIEWS];

/**
 * The views the Glue catalog of an output in `format` registers, and so the ones the `sql`
 * command creates: every `*_latest` view for Hive tables; for Iceberg tables the listing views
 * only, the report tables' `_current` tables taking their place. One list for both, so a query
 * tried locally names nothing Athena lacks.
 */
export function athenaViews(format: TableFormat): readonly ViewDef[] {
  return format === 'iceberg' ? LISTING_VIEWS : LATEST_VIEWS;
}

// ---- raw_reports: the raw report lines ------------------------------------------------------

/** The table over the raw report JSON Lines, `raw/reports/dt=YYYY-MM-DD/<stem>.jsonl.gz`. */
export const RAW_REPORTS_TABLE = 'raw_reports';

/** The columns of `raw_reports`: the raw report line's fields (`data` as JSON text), then `dt`. */
export const RAW_REPORTS_COLUMNS: readonly SqlColumn[] = [
  ...RAW_LINE_COLUMNS.reports.map(({ name, type, doc }) => ({ name, type, doc })),
  DT_COLUMN,
];
