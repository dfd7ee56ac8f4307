/**
 * The table format an output holds (`state/table-format.json`). An incremental run asks only
 * for new and changed reports, so a run in another format than the output's would build tables
 * that miss every report exported before: such a run is refused before it starts, unless it is
 * a full run, which fetches everything again. The check comes after the run has closed the runs
 * left open (start-run), so that a switch killed before it recorded its format is completed,
 * in its own format, before a run of the other format is let in. The format is recorded when a
 * run of it publishes (the first run of an output, or a full run that switches it); an output
 * written before the option existed holds Hive tables.
 */
import * as z from 'zod';
import { ConfigError } from '../../errors.js';
import type { CatalogRef } from '../../iceberg/catalog.js';
import { ICEBERG_ROOT, icebergTablePrefix, PARQUET_ROOT, STATE_KEYS } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { TABLE_NAMES } from '../tables.js';
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

/**
 * Throws when `run` would write another format than the output holds and is not a full run, or
 * while a run of another format is still open (`leftOpen`: what the recovery of open runs could
 * not close). Called after that recovery: a format switch that an interrupted run left open has
 * been completed by then, and its format is the output's; one still open would publish (and
 * perhaps switch the output) after this run, leaving this run's jobs out of its tables.
 */
export async function checkTableFormat(
  storage: Storage,
  run: RunRef,
  leftOpen: readonly { run_id: string; table_format: TableFormat | undefined }[] = [],
): Promise<void> {
  const wanted = tableFormatOf(run);
  const other = leftOpen.find((open) => open.table_format !== wanted);
  if (other) {
    throw new ConfigError(
      `${storage.location}: run ${other.run_id}${other.table_format ? `, which writes ${other.table_format} tables,` : ''} ` +
        `is still open (it could not be closed now) and this run would write ${wanted}: the tables of ` +
        "whichever format the output ends in would miss the other run's reports",
      {
        hint: 'run again once it is closed (AWS: finish-run closes it within minutes; a CLI run closes it first)',
      },
    );
  }
  if (run.mode === 'full') return;
  const held = await outputTableFormat(storage);
  if (held === undefined || held === wanted) return;
  throw new ConfigError(
    `${storage.location} holds ${held} tables and this run would write ${wanted}: an incremental run ` +
      `would leave out every report exported before. Switch with one full run in ${wanted} ` +
      `(CLI: --full --table-format ${wanted}; AWS: a full run after deploying tableFormat=${wanted}), ` +
      `or keep --table-format ${held}; the ${held} files stay where they are`,
  );
}

/**
 * True when `manifest`'s run switches the output's format: a full run that published, in
 * another format than the output holds. Until its format is recorded (`recordTableFormat`), so
 * that a closing taken up again after a crash between the two asks again and gets the same answer.
 */
export async function switchesTableFormat(storage: Storage, manifest: Manifest): Promise<boolean> {
  if (manifest.status === 'failed' || manifest.mode !== 'full') return false;
  const wanted = tableFormatOf(manifest);
  const recorded = await recordedFormat(storage);
  if (recorded === wanted) return false;
  const held = recorded ?? (await formatOfFiles(storage));
  return held !== undefined && held !== wanted;
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

// One table, one catalog: the catalog of an output's Iceberg tables, recorded beside its format.

const CatalogRefSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('file') }),
  z.object({ kind: z.literal('glue'), database: z.string().min(1), region: z.string().min(1) }),
]);

/** The record as the catalog's functions read it; its other fields are kept when it is rewritten. */
const CatalogRecordSchema = z.looseObject({
  table_format: TableFormatSchema,
  catalog: CatalogRefSchema.optional(),
});

/**
 * The catalog an output's Iceberg tables are registered in, as far as the output tells: the
 * recorded one, or for an output written before the record named it, `glue` with neither
 * database nor region when a table's metadata has a catalog's name.
 */
export type RegisteredCatalog = CatalogRef | { kind: 'glue'; database?: undefined; region?: undefined };

/** A metadata file's name as Glue (and every catalog but the file catalog) writes it. */
const CATALOG_METADATA = /^\d+-[^/]*\.metadata\.json$/;
/** A metadata file's name as the file catalog writes it. */
const FILE_METADATA = /^v\d+\.metadata\.json$/;

/**
 * Where the output's Iceberg tables are registered: the catalog recorded beside the format
 * (`catalog`, written when a run publishes); else, for an output written before the record held
 * it, what the tables' metadata files say: any named `NNNNN-<uuid>.metadata.json` is a catalog's
 * (the stack's Glue tables write one when deployed, and every Glue commit another), so Glue;
 * only `vN.metadata.json`, the file catalog; undefined while no Iceberg table has metadata.
 */
export async function registeredCatalog(storage: Storage): Promise<RegisteredCatalog | undefined> {
  const found = await storage.get(STATE_KEYS.tableFormat);
  const recorded = found && parseRecord(CatalogRecordSchema, found.body, STATE_KEYS.tableFormat).catalog;
  if (recorded) return recorded;
  let file = false;
  for (const table of TABLE_NAMES) {
    for await (const key of storage.list(`${icebergTablePrefix(table)}/metadata/`)) {
      const name = key.slice(key.lastIndexOf('/') + 1);
      if (CATALOG_METADATA.test(name)) return { kind: 'glue' };
      if (FILE_METADATA.test(name)) file = true;
    }
  }
  return file ? { kind: 'file' } : undefined;
}

/**
 * Records the catalog an Iceberg run that published committed to, beside the format that
 * {@link recordTableFormat} recorded first; unchanged when it names the same already.
 */
export async function recordCatalog(
  storage: Storage,
  manifest: Pick<Manifest, 'status' | 'table_format'>,
  catalog: CatalogRef,
): Promise<void> {
  if (manifest.status === 'failed' || tableFormatOf(manifest) !== 'iceberg') return;
  const found = await storage.get(STATE_KEYS.tableFormat);
  if (!found) return;
  const record = parseRecord(CatalogRecordSchema, found.body, STATE_KEYS.tableFormat);
  if (record.table_format !== 'iceberg' || sameCatalog(record.catalog, catalog)) return;
  await storage.put(STATE_KEYS.tableFormat, `${JSON.stringify({ ...record, catalog })}\n`);
}

const sameCatalog = (a: CatalogRef | undefined, b: CatalogRef): boolean =>
  a?.kind === b.kind &&
  (a.kind === 'file' || (b.kind === 'glue' && a.database === b.database && a.region === b.region));
