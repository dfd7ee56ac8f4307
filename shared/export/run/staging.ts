/**
 * Stages a step's data in the run's staging area (`state/runs/<run_id>/staged/`): one Parquet
 * file per table and one gzip JSON Lines file per raw entity, named by a stem unique per step
 * and attempt. Nothing here is visible in `parquet/` or `raw/`: the finish step publishes the
 * files the run's records list, so a file left by a delivery that died before its record is
 * never published.
 */
import type { Storage } from '../../storage/storage.js';
import type { JsonLinesBuffer } from '../format/jsonl.js';
import type { TableBuffer } from '../format/table-buffer.js';
import { stagedParquetKey, stagedRawKey } from '../layout.js';
import type { FileEntry } from '../state/records.js';
import { type RawEntity, TABLE_NAMES } from '../tables.js';

/** Stages one Parquet file per table that has rows (an empty table gets no file). */
export async function stageTables(
  storage: Storage,
  runId: string,
  stem: string,
  rows: TableBuffer,
): Promise<FileEntry[]> {
  const writes = TABLE_NAMES.filter((table) => rows.rowCount(table) > 0).map(async (table) => {
    const key = stagedParquetKey(runId, table, stem);
    const body = rows.encode(table);
    await storage.put(key, body);
    return {
      key,
      table_or_entity: table,
      format: 'parquet',
      rows: rows.rowCount(table),
      bytes: body.byteLength,
    } satisfies FileEntry;
  });
  return Promise.all(writes);
}

/** Stages one gzip JSON Lines file of raw lines, when there are any. */
export async function stageRaw(
  storage: Storage,
  runId: string,
  entity: RawEntity,
  stem: string,
  lines: JsonLinesBuffer,
): Promise<FileEntry[]> {
  if (lines.length === 0) return [];
  const key = stagedRawKey(runId, entity, stem);
  const body = lines.encodeGzip();
  await storage.put(key, body);
  return [{ key, table_or_entity: entity, format: 'jsonl', rows: lines.length, bytes: body.byteLength }];
}

/** Stages a step's rows and raw lines at once; returns every file staged. */
export async function stageStep(
  storage: Storage,
  runId: string,
  entity: RawEntity,
  stem: string,
  rows: TableBuffer,
  lines: JsonLinesBuffer,
): Promise<FileEntry[]> {
  const [raw, tables] = await Promise.all([
    stageRaw(storage, runId, entity, stem, lines),
    stageTables(storage, runId, stem, rows),
  ]);
  return [...raw, ...tables];
}
