/**
 * The Parquet tables of the outside contract (docs/contract.md, docs/query.md#tables): names, columns, logical types and
 * nullability. The single source of truth: the Parquet writer, the Glue tables in CDK, the
 * column reference in docs/query.md and the tests all derive from this module.
 */

import type { SchemaContract } from '../api/schemas.js';
import type { ColumnType, ParquetColumn, ParquetTable } from '../parquet/schema.js';

// The column types, cells and the INT32 range are the Parquet encoder's; re-exported here so
// that the contract's vocabulary stays in one import.
export { type Cell, type ColumnType, INT32_MAX, INT32_MIN, type Row } from '../parquet/schema.js';

/** A column of the contract: a Parquet column (name, type, nullability) and its documentation. */
export interface Column extends ParquetColumn {
  readonly doc: string;
}

/** A table of the contract: a Parquet table with a contract name and documentation. */
export interface TableDef extends ParquetTable {
  readonly name: TableName;
  readonly doc: string;
  readonly columns: readonly Column[];
}

export const TABLE_NAMES = [
  'campaigns',
  'jobs',
  'reports',
  'sections',
  'questions',
  'text_entries',
  'inputs',
  'media_images',
] as const;
export type TableName = (typeof TABLE_NAMES)[number];

/** Tables filled from reports (one file each per batch of reports). */
export const REPORT_TABLES = [
  'reports',
  'sections',
  'questions',
  'text_entries',
  'inputs',
  'media_images',
] as const satisfies readonly TableName[];
export type ReportTableName = (typeof REPORT_TABLES)[number];

/** Raw JSON Lines entities. */
export const RAW_ENTITIES = ['campaigns', 'jobs', 'reports'] as const;
export type RawEntity = (typeof RAW_ENTITIES)[number];

const col = (name: string, type: ColumnType, nullable: boolean, doc: string): Column => ({
  name,
  type,
  nullable,
  doc,
});
const text = (name: string, doc: string) => col(name, 'string', true, doc);

/** Columns every table ends with. */
const RUN_COLUMNS: readonly Column[] = [
  col('run_id', 'string', false, 'the run that wrote the row'),
  col('exported_at', 'timestamp', false, 'when the row was written (UTC)'),
];

/** Columns that place a row of a child table in its report and section. */
const SECTION_KEY: readonly Column[] = [
  col('job_id', 'bigint', false, 'job of the report'),
  col('campaign_id', 'bigint', false, 'campaign of the job (from the request path)'),
  col('section_index', 'int', false, 'position in sections[]'),
  col('section_id', 'string', false, 'sections[].id'),
];

const defs: Record<TableName, Omit<TableDef, 'name'>> = {
  campaigns: {
    doc: "Every run's full campaign listing (a snapshot per run).",
    columns: [
      col('campaign_id', 'bigint', false, 'campaign id'),
      text('campaign_name', 'as received; non-string values as JSON text'),
      text('campaign_status', 'as received; non-string values as JSON text'),
      text('start_date', 'as received; non-string values as JSON text'),
      text('end_date', 'as received; non-string values as JSON text'),
      text('completed_at', 'as received; non-string values as JSON text'),
      text('created_at', 'as received; non-string values as JSON text'),
      col('item_json', 'string', false, 'the whole list item as JSON'),
    ],
  },
  jobs: {
    doc: "Every run's full job listing, per campaign (a snapshot per run).",
    columns: [
      col('job_id', 'bigint', false, 'job id'),
      col('campaign_id', 'bigint', false, 'campaign of the job'),
      col('job_status', 'int', true, 'job_status when it is an integer'),
      text('job_score_percentage', 'as received; non-string values as JSON text'),
      col('item_json', 'string', false, 'the whole list item as JSON'),
    ],
  },
  reports: {
    doc: 'One row per report fetched in the run: job summary, location and survey identity.',
    columns: [
      col('job_id', 'bigint', false, 'data.job.id'),
      col('campaign_id', 'bigint', false, 'campaign id from the request path'),
      col('report_campaign_id', 'bigint', true, 'data.job.campaign.id'),
      text('campaign_name', 'data.job.campaign.campaign_name'),
      col('job_status', 'int', false, 'data.job.job_status'),
      text('job_score_percentage', 'data.job.job_score_percentage'),
      col('location_id', 'bigint', true, 'data.job.location.id'),
      text('location_code', 'data.job.location.location_code'),
      text('location_name', 'data.job.location.location_name'),
      col('is_competitor', 'boolean', false, 'data.job.location.is_competitor'),
      text('competitor_name', 'data.job.location.competitor_name'),
      col('report_id', 'bigint', true, 'data.job.report.id'),
      text('report_type', 'data.job.report.report_type'),
      col('survey_id', 'bigint', true, 'data.job.report.survey_id'),
      text('survey_name', 'data.job.report.survey_name'),
    ],
  },
  sections: {
    doc: 'One row per section of a report.',
    columns: [
      ...SECTION_KEY,
      col('section_title', 'string', false, 'sections[].section_title'),
      col('sort_order', 'string', false, 'sections[].sort_order'),
      text('percentage', 'sections[].percentage'),
      text('obtained_score', 'sections[].obtained_score'),
      col('max_score', 'bigint', true, 'sections[].max_score'),
    ],
  },
  questions: {
    doc: 'One row per question, and one per follow-up (logic) question.',
    columns: [
      ...SECTION_KEY,
      col('question_index', 'int', false, 'position in questions[]'),
      col('logic_index', 'int', true, 'null for a top-level question; position in logic_questions[]'),
      text('reference_code', 'reference_code'),
      text('question', 'question text'),
      text('question_type', 'question_type'),
      text('answer_type', 'answer_type'),
      col('response', 'array<string>', false, 'a scalar response is a one-item array, a null one empty'),
      col('response_is_list', 'boolean', false, 'true when the API sent a list response'),
      col('obtained_score', 'string', false, 'obtained_score'),
      col('max_score', 'string', false, 'max_score'),
      text('comment', 'comment (null for follow-ups)'),
      col('photos', 'array<string>', true, 'photo URLs, null items kept (null for follow-ups)'),
      col('threads_json', 'string', false, 'the threads value as JSON text'),
    ],
  },
  text_entries: {
    doc: 'One row per text entry: sections[].text_entries[] and text_entry items of questions[].',
    columns: [
      ...SECTION_KEY,
      col('entry_index', 'int', false, 'position in the array it came from'),
      col('source', 'string', false, "'text_entries' or 'questions'"),
      text('description', 'description'),
      text('answer', 'answer'),
    ],
  },
  inputs: {
    doc: 'One row per input.',
    columns: [
      ...SECTION_KEY,
      col('input_index', 'int', false, 'position in inputs[]'),
      text('input_type', 'input_type'),
      text('description', 'description'),
      text('answer', 'strings as is, objects and arrays as JSON text'),
      text('measurement', 'measurement (null for text inputs)'),
    ],
  },
  media_images: {
    doc: 'One row per image of a media gallery.',
    columns: [
      ...SECTION_KEY,
      col('gallery_index', 'int', false, 'position in media_galleries[]'),
      col('image_index', 'int', false, 'position in images[]'),
      text('gallery_description', 'media_galleries[].description'),
      col('view_type', 'string', false, 'media_galleries[].view_type'),
      col('url', 'string', false, 'images[].url'),
      col('thumb_url', 'string', false, 'images[].thumb_url'),
      text('caption', 'images[].caption'),
    ],
  },
};

// The schema contracts are the client's (it checks a report or not); re-exported with the tables.
export { DEFAULT_SCHEMA_CONTRACT, SCHEMA_CONTRACTS, type SchemaContract } from '../api/schemas.js';

/**
 * The JSON column of every report table under `evolve`: each value of the row's object that
 * has no column or does not fit its column, nested at its path relative to the row's object.
 */
export const RESCUED_COLUMN = '_rescued';

/**
 * Columns that never hold NULL under `evolve`: the row's place (ids from the request path,
 * positions in arrays) and what the row builder derives, whatever the API sent.
 */
const ALWAYS_SET = new Set([
  'job_id',
  'campaign_id',
  'section_index',
  'question_index',
  'entry_index',
  'source',
  'input_index',
  'gallery_index',
  'image_index',
  'response',
  'response_is_list',
  'run_id',
  'exported_at',
]);

const isReportTable = (name: TableName): boolean => (REPORT_TABLES as readonly TableName[]).includes(name);

function tableOf(name: TableName, contract: SchemaContract): TableDef {
  const columns = [...defs[name].columns, ...RUN_COLUMNS];
  if (contract === 'freeze' || !isReportTable(name)) return { name, doc: defs[name].doc, columns };
  return {
    name,
    doc: defs[name].doc,
    columns: [
      ...columns.map((c) => (c.nullable || ALWAYS_SET.has(c.name) ? c : { ...c, nullable: true })),
      col(
        RESCUED_COLUMN,
        'string',
        true,
        "JSON: the values of the row's object with no column or that did not fit theirs, at their paths (evolve)",
      ),
    ],
  };
}

/**
 * Every table of the contract, in contract order, as an `evolve` run writes them: each ends
 * with run_id and exported_at, and a report table then with `_rescued`. Its columns are those
 * the catalog registers (Glue, Iceberg, views).
 */
export const TABLES = Object.fromEntries(
  TABLE_NAMES.map((name): [TableName, TableDef] => [name, tableOf(name, 'evolve')]),
) as Readonly<Record<TableName, TableDef>>;

/**
 * The tables as a `freeze` run writes them: the columns and nullability of every release
 * before the schema contract, so that its files are byte for byte what they were.
 */
export const FROZEN_TABLES = Object.fromEntries(
  TABLE_NAMES.map((name): [TableName, TableDef] => [name, tableOf(name, 'freeze')]),
) as Readonly<Record<TableName, TableDef>>;

/**
 * The schema contract of a run, from its `schema_contract` (a `RunRef`, a manifest): `freeze`
 * when absent, as in the records of freeze runs and of runs before the option.
 */
export const schemaContractOf = (run: { schema_contract?: SchemaContract | undefined }): SchemaContract =>
  run.schema_contract ?? 'freeze';

/** The tables a run of `contract` writes. */
export const tablesOf = (contract: SchemaContract): Readonly<Record<TableName, TableDef>> =>
  contract === 'freeze' ? FROZEN_TABLES : TABLES;

/** The Glue/Athena type of a column type. */
export function glueType(type: ColumnType): string {
  return type; // The logical names were chosen to be Athena's own.
}
