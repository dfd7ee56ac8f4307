/**
 * `reports` rows written as a run writes them (through its TableBuffer, in the Parquet of each
 * schema contract, with the pinned field ids), for tests that commit them with `commitRun`.
 */
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import type { Row, SchemaContract } from '../../shared/export/tables.js';
import { parseJson } from '../../shared/iceberg/json.js';
import { keyOfLocation } from '../../shared/iceberg/locations.js';
import { dataFileMetrics } from '../../shared/iceberg/metrics.js';
import { icebergParquetTable } from '../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import { icebergDataKey } from '../../shared/layout.js';
import type { LocalStorage } from '../../shared/storage/local.js';

/** A `reports` row with every column of the frozen form set. */
export const reportRow = (jobId: number, runId: string): Row => ({
  job_id: jobId,
  campaign_id: 7,
  report_campaign_id: 7,
  campaign_name: 'Spring',
  job_status: 3,
  job_score_percentage: '90',
  location_id: 11,
  location_code: 'L11',
  location_name: 'Main St',
  is_competitor: false,
  competitor_name: null,
  report_id: 100 + jobId,
  report_type: 'standard',
  survey_id: 5,
  survey_name: 'Survey',
  run_id: runId,
  exported_at: new Date('2026-11-23T10:00:00.000Z'),
});

/** Writes `rows` as the run's `reports` file, through the run's TableBuffer, and returns it as `commitRun` takes it. */
export async function writeReports(
  storage: LocalStorage,
  runId: string,
  dt: string,
  contract: SchemaContract,
  rows: Row[],
) {
  const buffer = new TableBuffer({
    table_format: 'iceberg',
    dt,
    ...(contract === 'evolve' && { schema_contract: contract }),
  });
  for (const row of rows) buffer.add('reports', row);
  const bytes = buffer.encode('reports');
  const key = icebergDataKey('reports', dt, `${runId}-0`);
  await storage.put(key, bytes);
  return {
    key,
    dt,
    bytes: bytes.length,
    metrics: dataFileMetrics(bytes, icebergParquetTable('reports', contract)),
  };
}

/** The metadata file at `location`, parsed. */
export async function metadataAt(storage: LocalStorage, location: string): Promise<TableMetadata> {
  const found = await storage.get(keyOfLocation(storage, location));
  return parseJson(Buffer.from(found!.body).toString('utf8')) as TableMetadata;
}
