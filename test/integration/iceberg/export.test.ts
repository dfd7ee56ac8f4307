/**
 * An Iceberg export read back by independent readers: icebird reads every table's current
 * snapshot, and every value equals the Hive output of the same run (same simulator, same run
 * id and clock); DuckDB's read_parquet over the snapshot's file list gives the same rows.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { REPORT_TABLES, TABLE_NAMES } from '../../../shared/export/tables.js';
import { decodeManifest, decodeManifestList } from '../../../shared/iceberg/avro.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../../shared/iceberg/locations.js';
import { currentTableOf } from '../../../shared/iceberg/schema.js';
import { ICEBERG_ROOT } from '../../../shared/layout.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { readIcebergTable, rowKey } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

/** A fixed clock and seeded random: both exports get the same run id and `exported_at`. */
function fixedDeps<T extends object>(deps: T): T {
  let seed = 7;
  return {
    ...deps,
    now: () => new Date('2026-11-23T09:30:00.000Z'),
    random: () => {
      seed = (seed * 48271) % 2147483647;
      return seed / 2147483647;
    },
  };
}

const key = rowKey;

describe('an Iceberg export', () => {
  let simulator: Simulator;
  let hiveOut: string;
  let icebergOut: string;
  let hive: Manifest;
  let iceberg: Manifest;
  let db: DuckDb;

  beforeAll(async () => {
    simulator = await startSimulator({ seed: 11, campaigns: 3, jobsPerCampaign: 30, reportSize: 'mixed' });
    hiveOut = await tempDir('hive');
    icebergOut = await tempDir('iceberg');
    const runIn = async (out: string, tableFormat: 'hive' | 'iceberg') => {
      const target = exporter(simulator, out);
      const deps = fixedDeps(target.deps);
      const { runExport } = await import('../../../shared/export/run/local-run.js');
      return runExport(deps, { mode: 'full', tableFormat });
    };
    hive = await runIn(hiveOut, 'hive');
    iceberg = await runIn(icebergOut, 'iceberg');
    db = await openDuckDb();
  }, 60_000);

  afterAll(async () => {
    await db?.close();
    await simulator?.close();
  });

  it('publishes data files under iceberg/, names a snapshot per table in the manifest', () => {
    expect(iceberg.run_id).toBe(hive.run_id);
    expect(iceberg.table_format).toBe('iceberg');
    expect(iceberg.status).toBe(hive.status);
    expect(iceberg.counts).toEqual(hive.counts);
    const parquet = iceberg.files.filter((f) => f.format === 'parquet');
    expect(
      parquet.every((f) => f.key.startsWith(`${ICEBERG_ROOT}/${f.table_or_entity}/data/dt=${iceberg.dt}/`)),
    ).toBe(true);
    expect(iceberg.iceberg?.catalog).toBe('file');
    for (const f of parquet) {
      expect(iceberg.iceberg?.tables[f.table_or_entity]?.metadata_location).toBe(
        `file://${icebergOut}/${ICEBERG_ROOT}/${f.table_or_entity}/metadata/v1.metadata.json`,
      );
    }
    expect(hive.iceberg).toBeUndefined();
    for (const table of REPORT_TABLES) {
      expect(iceberg.iceberg?.tables[currentTableOf(table)]?.metadata_location).toBe(
        `file://${icebergOut}/${ICEBERG_ROOT}/${currentTableOf(table)}/metadata/v1.metadata.json`,
      );
    }
  });

  it.each(REPORT_TABLES)(
    '%s_current: after one run, the same rows as the history table, in files of its own',
    async (table) => {
      const current = currentTableOf(table);
      const rows = await readIcebergTable(join(icebergOut, ICEBERG_ROOT, current));
      const history = await readIcebergTable(join(icebergOut, ICEBERG_ROOT, table));
      expect(rows.map((r) => key(table, r)).sort()).toEqual(history.map((r) => key(table, r)).sort());
      const local = new (await import('../../../shared/storage/local.js')).LocalStorage(icebergOut);
      const { metadata } = await new FileCatalog(local).load(current);
      const list = await decodeManifestList(
        (await local.get(keyOfLocation(local, metadata!.snapshots!.at(-1)!['manifest-list'])))!.body,
      );
      for (const m of list) {
        for (const e of await decodeManifest(
          (await local.get(keyOfLocation(local, m.manifest_path)))!.body,
        )) {
          expect(
            e.data_file.file_path.startsWith(`file://${icebergOut}/${ICEBERG_ROOT}/${current}/data/`),
          ).toBe(true);
        }
      }
    },
  );

  it.each(TABLE_NAMES)('%s: icebird reads every value the Hive output holds', async (table) => {
    const hiveRows = await db.all(
      `SELECT * FROM read_parquet('${join(hiveOut, 'parquet', table)}/*/*.parquet', hive_partitioning = false)`,
    );
    expect(hiveRows.length).toBeGreaterThan(0);
    const rows = await readIcebergTable(join(icebergOut, ICEBERG_ROOT, table));
    expect(rows.every((r) => r.dt === iceberg.dt)).toBe(true);
    expect(rows.map((r) => key(table, r)).sort()).toEqual(hiveRows.map((r) => key(table, r)).sort());
  });

  it("DuckDB's read_parquet over the current snapshot's files gives the same rows", async () => {
    const storage = (await import('../../../shared/storage/local.js')).LocalStorage;
    const local = new storage(icebergOut);
    const catalog = new FileCatalog(local);
    for (const table of ['reports', 'questions'] as const) {
      const { metadata } = await catalog.load(table);
      const snapshot = metadata!.snapshots!.at(-1)!;
      const list = await decodeManifestList(
        (await local.get(keyOfLocation(local, snapshot['manifest-list'])))!.body,
      );
      const paths: string[] = [];
      for (const m of list) {
        for (const e of await decodeManifest(
          (await local.get(keyOfLocation(local, m.manifest_path)))!.body,
        )) {
          paths.push(e.data_file.file_path);
        }
      }
      const duck = await db.all(
        `SELECT * EXCLUDE (dt) FROM read_parquet([${paths.map((p) => `'${p}'`).join(',')}], hive_partitioning = false)`,
      );
      const rows = await readIcebergTable(join(icebergOut, ICEBERG_ROOT, table));
      expect(duck.map((r) => key(table, r)).sort()).toEqual(rows.map((r) => key(table, r)).sort());
    }
  });
});
