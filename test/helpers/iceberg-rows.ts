/**
 * Synthetic rows of the Iceberg report tables, for tests and benchmarks that commit files
 * directly: every column filled from its type, `job_id`, `run_id`, `dt` and the given fields as
 * asked.
 */
import { dataFileMetrics } from '../../shared/iceberg/metrics.js';
import { type IcebergTableName, icebergParquetTable } from '../../shared/iceberg/schema.js';
import { type EncodeOptions, encodeParquet } from '../../shared/parquet/encode.js';
import type { Cell, Row } from '../../shared/parquet/schema.js';
import type { Storage } from '../../shared/storage/storage.js';

/** A row of `table` for `jobId`, written by `runId` on `dt`; `fields` override the defaults. */
export function syntheticRow(
  table: IcebergTableName,
  runId: string,
  dt: string,
  jobId: number,
  fields: Readonly<Record<string, Cell>> = {},
): Row {
  const row: Row = {};
  for (const c of icebergParquetTable(table, 'freeze').columns) {
    row[c.name] =
      c.type === 'string'
        ? `${c.name}-${jobId}`
        : c.type === 'int'
          ? 0
          : c.type === 'bigint'
            ? jobId
            : c.type === 'boolean'
              ? jobId % 2 === 0
              : c.type === 'timestamp'
                ? new Date('2026-11-23T10:00:00.000Z')
                : [`${c.name}-${jobId}`];
  }
  return { ...row, job_id: jobId, run_id: runId, dt, ...fields };
}

/** Writes `rows` as one data file of `table` and returns it as `commitRun` takes it. */
export async function writeDataFile(
  storage: Storage,
  table: IcebergTableName,
  stem: string,
  dt: string,
  rows: Row[],
  options: EncodeOptions = {},
) {
  const parquet = icebergParquetTable(table, 'freeze');
  const bytes = encodeParquet(parquet, rows, options);
  const key = `iceberg/${table}/data/dt=${dt}/${stem}.parquet`;
  await storage.put(key, bytes);
  return { key, dt, bytes: bytes.length, metrics: dataFileMetrics(bytes, parquet) };
}
