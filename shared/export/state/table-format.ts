/**
 * The table format an output holds (`state/table-format.json`). An incremental run asks only
 * for new and changed reports, so a run in another format than the output's would build tables
 * that miss every report exported before: such a run is refused before it starts, unless it is
 * a full run, which fetches everything again. The format is recorded when a run of it
 * publishes (the first run of an output, or a full run that switches it); an output written
 * before the option existed holds Hive tables.
 */
import * as z from 'zod';
import { ConfigError } from '../../errors.js';
import type { Storage } from '../../storage/storage.js';
import { ICEBERG_ROOT, PARQUET_ROOT, STATE_KEYS } from '../layout.js';
import type { Manifest } from './manifest.js';
import { parseRecord, type RunRef, type TableFormat, TableFormatSchema, tableFormatOf } from './records.js';

const RecordSchema = z.object({ table_format: TableFormatSchema, run_id: z.string() });

/** The format recorded for the output, if any. */
async function recordedFormat(storage: Storage): Promise<TableFormat | undefined> {
  const found = await storage.get(STATE_KEYS.tableFormat);
  return found ? parseRecord(RecordSchema, found.body, STATE_KEYS.tableFormat).table_format : undefined;
}

/** The format whose tables hold files; undefined while no run has published tables. */
async function formatOfFiles(storage: Storage): Promise<TableFormat | undefined> {
  for await (const _ of storage.list(`${PARQUET_ROOT}/`)) return 'hive';
  for await (const _ of storage.list(`${ICEBERG_ROOT}/`)) return 'iceberg';
  return undefined;
}

/**
 * The format the output holds: recorded, or else the one whose tables hold files (an output
 * written before the record existed, or whose first publishing run died before recording it);
 * undefined while no run has published tables (a failed run publishes none).
 */
export async function outputTableFormat(storage: Storage): Promise<TableFormat | undefined> {
  return (await recordedFormat(storage)) ?? (await formatOfFiles(storage));
}

/** Throws when `run` would write another format than the output holds and is not a full run. */
export async function checkTableFormat(storage: Storage, run: RunRef): Promise<void> {
  if (run.mode === 'full') return;
  const wanted = tableFormatOf(run);
  const held = await outputTableFormat(storage);
  if (held === undefined || held === wanted) return;
  throw new ConfigError(
    `${storage.location} holds ${held} tables and this run would write ${wanted}: an incremental run ` +
      `would leave out every report exported before. Switch with one full run in ${wanted} ` +
      `(CLI: --full --table-format ${wanted}; AWS: a full run after deploying tableFormat=${wanted}), ` +
      `or keep --table-format ${held}; the ${held} files stay where they are`,
  );
}

/** Records the format of a run that published, when it is the output's first or a full run that switched it. */
export async function recordTableFormat(storage: Storage, manifest: Manifest): Promise<void> {
  if (manifest.status === 'failed') return;
  const wanted = tableFormatOf(manifest);
  const recorded = await recordedFormat(storage);
  if (recorded === wanted) return;
  const held = recorded ?? (await formatOfFiles(storage));
  if (held !== undefined && held !== wanted && manifest.mode !== 'full') return;
  await storage.put(
    STATE_KEYS.tableFormat,
    `${JSON.stringify({ table_format: wanted, run_id: manifest.run_id })}\n`,
  );
}
