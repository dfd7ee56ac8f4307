/**
 * The raw JSON Lines (docs/ingest.md#output-layout): the one definition of a raw line's fields, in
 * order, for each entity. The steps build their lines with {@link rawLine}, and the Glue table
 * over the raw reports takes its columns from {@link RAW_LINE_COLUMNS}.
 */
import type { Column, RawEntity } from './tables.js';

const RUN_ID: Column = { name: 'run_id', type: 'string', nullable: false, doc: 'the run that fetched it' };
const FETCHED_AT: Column = {
  name: 'fetched_at',
  type: 'string',
  nullable: false,
  doc: 'when it was fetched, ISO 8601 UTC as written; from_iso8601_timestamp() converts',
};
const CAMPAIGN_ID: Column = {
  name: 'campaign_id',
  type: 'bigint',
  nullable: false,
  doc: 'campaign id from the request path',
};
const JOB_ID: Column = {
  name: 'job_id',
  type: 'bigint',
  nullable: false,
  doc: 'job id from the request path',
};
/** `data` is any JSON; as a Glue column it is its JSON text (the OpenX SerDe hands it over so). */
const DATA: Column = {
  name: 'data',
  type: 'string',
  nullable: false,
  doc: 'what the API sent, lossless (the list item, or the report response data object); as JSON text in Athena: use json_extract',
};

/** The fields of each entity's raw lines, in the order they are written. */
export const RAW_LINE_COLUMNS: Readonly<Record<RawEntity, readonly Column[]>> = {
  campaigns: [RUN_ID, FETCHED_AT, DATA],
  jobs: [RUN_ID, FETCHED_AT, CAMPAIGN_ID, DATA],
  reports: [RUN_ID, FETCHED_AT, CAMPAIGN_ID, JOB_ID, DATA],
};

/** One raw line: what the API sent as `data`, with the run and the ids of the request path. */
export interface RawLine {
  run_id: string;
  fetched_at: string;
  campaign_id?: number;
  job_id?: number;
  data: unknown;
}

/**
 * The raw line of `data` fetched at `fetchedAt` by run `runId`; `path` holds the ids of the
 * request path (none for campaigns, `campaign_id` for jobs, both for reports).
 *
 * @example
 * rawLines.add(rawLine(run.run_id, fetchedAt, item.raw, { campaign_id: 12 }));
 */
export function rawLine(
  runId: string,
  fetchedAt: string,
  data: unknown,
  path: { campaign_id?: number; job_id?: number } = {},
): RawLine {
  return { run_id: runId, fetched_at: fetchedAt, ...path, data };
}
