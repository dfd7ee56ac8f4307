/**
 * Stages a step's data in the run's staging area (`state/runs/<run_id>/staged/`): one Parquet
 * file per table and one gzip JSON Lines file per raw entity, written together as one object per
 * step and attempt (`stageStep`), each file's entry saying where its bytes are in it. Nothing here
 * is visible in `parquet/` or `raw/`: the finish step publishes the files the run's records list,
 * so a file left by a delivery that died before its record is never published.
 */

import { stagedParquetKey, stagedStepKey } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import type { JsonLinesBuffer } from '../format/jsonl.js';
import type { TableBuffer } from '../format/table-buffer.js';
import type { FileEntry, StagedFile } from '../state/records.js';
import { type RawEntity, TABLE_NAMES } from '../tables.js';

/**
 * Stages one Parquet file per table that has rows (an empty table gets no file), each an object
 * of its own. The steps stage with `stageStep`; this is for synthesized runs (the scale bench).
 */
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

/**
 * Stages a step's raw lines (gzip JSON Lines, when there are any) and its rows (one Parquet file
 * per table that has rows) as one object, the files one after another; returns every file
 * staged, each with its offset in the object. One PUT per step: S3 bills a request per object,
 * and a unit of reports has up to seven files (BENCHMARKS.md, cost).
 */
export async function stageStep(
  storage: Storage,
  runId: string,
  entity: RawEntity,
  stem: string,
  rows: TableBuffer,
  lines: JsonLinesBuffer,
): Promise<StagedFile[]> {
  const key = stagedStepKey(runId, entity, stem);
  const files: StagedFile[] = [];
  const bodies: Uint8Array[] = [];
  let offset = 0;
  const add = (file: Omit<StagedFile, 'key' | 'offset' | 'bytes'>, body: Uint8Array) => {
    files.push({ key, ...file, bytes: body.byteLength, offset });
    bodies.push(body);
    offset += body.byteLength;
  };
  if (lines.length > 0)
    add({ table_or_entity: entity, format: 'jsonl', rows: lines.length }, lines.encodeGzip());
  for (const table of TABLE_NAMES) {
    if (rows.rowCount(table) > 0)
      add({ table_or_entity: table, format: 'parquet', rows: rows.rowCount(table) }, rows.encode(table));
  }
  if (files.length === 0) return [];
  await storage.put(key, Buffer.concat(bodies, offset));
  return files;
}
