/**
 * What Iceberg metadata a schedule leaves behind: a table committed once per run, for a year
 * of daily runs and for a week of 5-minute runs (snapshots older than 7 days are expired at
 * each commit, so after a week the metadata is at its steady state; only data files and the
 * merged manifests that list them grow from there). Each run adds one `reports` data file of
 * 100 rows, its metrics real (encoded by the exporter, read from its footer).
 *
 *   npm run bench iceberg-metadata                       (365 daily runs, 2,016 five-minute runs)
 *   ICEBERG_BENCH_FIVE_MINUTE_RUNS=576 npm run bench iceberg-metadata
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeManifestList } from '../../shared/iceberg/avro.js';
import { commitRun } from '../../shared/iceberg/commit.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../shared/iceberg/locations.js';
import { dataFileMetrics } from '../../shared/iceberg/metrics.js';
import { icebergParquetTable } from '../../shared/iceberg/schema.js';
import { encodeParquet } from '../../shared/parquet/encode.js';
import { LocalStorage } from '../../shared/storage/local.js';

const table = icebergParquetTable('reports', 'freeze');

function reportRows(run: number, dt: string) {
  return Array.from({ length: 100 }, (_, i) => ({
    job_id: run * 100 + i,
    campaign_id: 1 + (i % 7),
    report_campaign_id: 1 + (i % 7),
    campaign_name: `Campaign ${i % 7}`,
    job_status: 2,
    job_score_percentage: `${(i * 7) % 100}.5`,
    location_id: 1000 + i,
    location_code: `L${i}`,
    location_name: `Location ${i}`,
    is_competitor: i % 5 === 0,
    competitor_name: null,
    report_id: run * 1000 + i,
    report_type: 'standard',
    survey_id: 77,
    survey_name: 'Store visit',
    run_id: `run-${run}`,
    exported_at: new Date(),
    dt,
  }));
}

async function folderBytes(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  for (const name of await readdir(dir)) {
    files++;
    bytes += (await stat(join(dir, name))).size;
  }
  return { files, bytes };
}

async function schedule(name: string, runs: number, everyMs: number): Promise<Record<string, number>> {
  const root = await mkdtemp(join(tmpdir(), 'iceberg-metadata-'));
  const storage = new LocalStorage(root);
  const catalog = new FileCatalog(storage);
  const start = Date.UTC(2026, 0, 1);
  let lastMs = 0;
  try {
    for (let run = 0; run < runs; run++) {
      const now = new Date(start + run * everyMs);
      const dt = now.toISOString().slice(0, 10);
      const bytes = encodeParquet(table, reportRows(run, dt));
      const key = `iceberg/reports/data/dt=${dt}/run-${run}-0.parquet`;
      await storage.put(key, bytes);
      const t0 = performance.now();
      await commitRun(storage, catalog, {
        table: 'reports',
        runId: `run-${run}`,
        files: [{ key, dt, bytes: bytes.length, metrics: dataFileMetrics(bytes, table) }],
        now,
      });
      if (run >= runs - 20) lastMs += performance.now() - t0;
    }
    const { metadata, metadataLocation } = await catalog.load('reports');
    const current = await stat(metadataLocation!);
    const list = metadata!.snapshots!.at(-1)!['manifest-list'];
    const manifests = await decodeManifestList((await storage.get(keyOfLocation(storage, list)))!.body);
    const folder = await folderBytes(join(root, 'iceberg/reports/metadata'));
    return {
      [`${name}.runs`]: runs,
      [`${name}.snapshots_kept`]: metadata!.snapshots!.length,
      [`${name}.metadata_json_kb`]: current.size / 1024,
      [`${name}.manifests_in_snapshot`]: manifests.length,
      [`${name}.manifest_list_kb`]: (await stat(list)).size / 1024,
      [`${name}.metadata_folder_files`]: folder.files,
      [`${name}.metadata_folder_mb`]: folder.bytes / 1024 / 1024,
      [`${name}.commit_ms_last20`]: lastMs / 20,
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

export async function benchIcebergMetadata(): Promise<Record<string, number>> {
  const fiveMinute = Number(process.env.ICEBERG_BENCH_FIVE_MINUTE_RUNS ?? 2016);
  return {
    ...(await schedule('daily_year', 365, 86_400_000)),
    ...(await schedule('five_minute', fiveMinute, 300_000)),
  };
}
