/**
 * Writes a batch: one Parquet file per table and one gzip JSON Lines file per raw entity,
 * named by a stem that is unique per batch, so a retried batch overwrites its own files.
 */
import type { Storage } from '../../storage/storage.js';
import type { JsonLinesBuffer } from '../format/jsonl.js';
import type { TableBuffer } from '../format/table-buffer.js';
import { parquetKey, rawKey } from '../layout.js';
import { type RawEntity, TABLE_NAMES } from '../tables.js';

/** Writes one Parquet file per table that has rows (an empty table gets no file). Returns the keys. */
export async function writeTables(
  storage: Storage,
  dt: string,
  stem: string,
  rows: TableBuffer,
): Promise<string[]> {
  const writes = TABLE_NAMES.filter((table) => rows.rowCount(table) > 0).map(async (table) => {
    const key = parquetKey(table, dt, stem);
    await storage.put(key, rows.encode(table));
    return key;
  });
  return Promise.all(writes);
}

/** Writes one gzip JSON Lines file of raw lines, when there are any. Returns the key. */
export async function writeRaw(
  storage: Storage,
  entity: RawEntity,
  dt: string,
  stem: string,
  lines: JsonLinesBuffer,
): Promise<string | undefined> {
  if (lines.length === 0) return undefined;
  const key = rawKey(entity, dt, stem);
  await storage.put(key, lines.encodeGzip());
  return key;
}
