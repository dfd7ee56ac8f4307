import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { decodeManifest, decodeManifestList } from '../../../shared/iceberg/avro.js';
import { commitRun, snapshotIdOf } from '../../../shared/iceberg/commit.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../../shared/iceberg/locations.js';
import { dataFileMetrics } from '../../../shared/iceberg/metrics.js';
import { icebergParquetTable } from '../../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { openDuckDb } from '../../helpers/duckdb.js';
import { readIcebergTable } from '../../helpers/icebird.js';

const jobsTable = icebergParquetTable('jobs', 'freeze');

function jobRows(runId: string, dt: string, ids: number[]) {
  return ids.map((id) => ({
    job_id: id,
    campaign_id: 7,
    job_status: id % 3,
    job_score_percentage: id % 2 ? null : `${id}%`,
    item_json: JSON.stringify({ id }),
    run_id: runId,
    exported_at: new Date('2026-11-23T10:00:00.123Z'),
    dt,
  }));
}

async function stage(storage: LocalStorage, runId: string, dt: string, ids: number[]) {
  const bytes = encodeParquet(jobsTable, jobRows(runId, dt, ids));
  const key = `iceberg/jobs/data/dt=${dt}/${runId}-0.parquet`;
  await storage.put(key, bytes);
  return { key, dt, bytes: bytes.length, metrics: dataFileMetrics(bytes, jobsTable) };
}

const newStorage = async () => new LocalStorage(await mkdtemp(join(tmpdir(), 'iceberg-')));

describe('commitRun on the file catalog', () => {
  it('makes one snapshot per run that icebird and DuckDB read back, and is idempotent', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    const now = new Date('2026-11-23T10:00:00Z');
    const first = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [await stage(storage, 'run-a', '2026-11-22', [1, 2, 3])],
      now,
    });
    expect(first).toMatchObject({ snapshotId: snapshotIdOf('run-a', 'jobs'), committedNow: true });
    // A folder's files are named by file:// URI, as the spec asks of a location.
    expect(first.metadataLocation).toBe(`file://${storage.location}/iceberg/jobs/metadata/v1.metadata.json`);
    const again = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [await stage(storage, 'run-a', '2026-11-22', [1, 2, 3])],
      now,
    });
    expect(again).toMatchObject({ committedNow: false, metadataLocation: first.metadataLocation });
    await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-b',
      files: [await stage(storage, 'run-b', '2026-11-23', [4, 5])],
      now: new Date('2026-11-23T11:00:00Z'),
    });
    const rows = await readIcebergTable(catalog.tableLocation('jobs'));
    expect(rows.map((r) => [Number(r.job_id), r.dt, r.run_id]).sort()).toEqual([
      [1, '2026-11-22', 'run-a'],
      [2, '2026-11-22', 'run-a'],
      [3, '2026-11-22', 'run-a'],
      [4, '2026-11-23', 'run-b'],
      [5, '2026-11-23', 'run-b'],
    ]);
    const metadata = JSON.parse(
      await readFile(join(storage.location, 'iceberg/jobs/metadata/v2.metadata.json'), 'utf8'),
    ) as TableMetadata;
    expect(metadata.snapshots?.map((s) => [s['sequence-number'], s.summary['run-id']])).toEqual([
      [1, 'run-a'],
      [2, 'run-b'],
    ]);
    expect(metadata['metadata-log']?.map((e) => e['metadata-file'])).toEqual([first.metadataLocation]);
    expect(await readFile(join(storage.location, 'iceberg/jobs/metadata/version-hint.text'), 'utf8')).toBe(
      '2',
    );

    // The data files carry the table's field ids; DuckDB reads the same rows from the snapshot's files.
    const list = await storage.get(keyOfLocation(storage, metadata.snapshots![1]!['manifest-list']));
    const manifests = await decodeManifestList(list!.body);
    expect(manifests.map((m) => [m.sequence_number, m.added_rows_count])).toEqual([
      [1, 3],
      [2, 2],
    ]);
    const entries = (
      await Promise.all(
        manifests.map(async (m) =>
          decodeManifest((await storage.get(keyOfLocation(storage, m.manifest_path)))!.body),
        ),
      )
    ).flat();
    const db = await openDuckDb();
    try {
      const files = entries.map((e) => `'${e.data_file.file_path}'`).join(',');
      const duck = await db.all(
        `SELECT job_id, dt FROM read_parquet([${files}], hive_partitioning = false) ORDER BY job_id`,
      );
      expect(duck.map((r) => [Number(r.job_id), r.dt])).toEqual(
        rows.map((r) => [Number(r.job_id), r.dt]).sort(),
      );
      const ids = await db.all(
        `SELECT name, field_id FROM parquet_schema(${`'${entries[0]!.data_file.file_path}'`}) WHERE field_id IS NOT NULL`,
      );
      expect(Object.fromEntries(ids.map((r) => [r.name, Number(r.field_id)]))).toMatchObject({
        job_id: 1,
        dt: 8,
      });
      // Bounds bracket the values: job_id 1..3 in the first file, little-endian longs.
      const first = entries.find((e) => e.data_file.file_path.includes('run-a'))!.data_file;
      const bound = (m: typeof first.lower_bounds, id: number) => m!.find((kv) => kv.key === id)!.value;
      expect(bound(first.lower_bounds, 1).readBigInt64LE()).toBe(1n);
      expect(bound(first.upper_bounds, 1).readBigInt64LE()).toBe(3n);
      expect(first.null_value_counts!.find((kv) => kv.key === 4)!.value).toBe(2);
      expect(first.partition).toEqual({ dt: '2026-11-22' });
    } finally {
      await db.close();
    }
  });

  it('writes Avro files whose own header schema carries the spec field ids', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [await stage(storage, 'run-a', '2026-11-22', [1])],
      now: new Date(),
    });
    const loaded = await catalog.load('jobs');
    const listKey = keyOfLocation(storage, loaded.metadata!.snapshots![0]!['manifest-list']);
    const header = avro.extractFileHeader(join(storage.location, listKey));
    const raw = header.meta['avro.schema'];
    const schema = Buffer.isBuffer(raw) ? JSON.parse(raw.toString()) : raw;
    expect(schema.fields.find((f: { name: string }) => f.name === 'added_snapshot_id')['field-id']).toBe(503);
    // A plain avsc decode with the writer's own schema reads every record.
    const records: unknown[] = [];
    await new Promise((resolve, reject) =>
      avro
        .createFileDecoder(join(storage.location, listKey))
        .on('data', (r) => records.push(r))
        .on('end', resolve)
        .on('error', reject),
    );
    expect(records).toHaveLength(1);
  });

  it('rebases when two runs commit at once: both snapshots land, one after the other', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    const files = {
      a: await stage(storage, 'run-a', '2026-11-22', [1]),
      b: await stage(storage, 'run-b', '2026-11-22', [2]),
    };
    const [a, b] = await Promise.all(
      (['a', 'b'] as const).map((r) =>
        commitRun(storage, catalog, { table: 'jobs', runId: `run-${r}`, files: [files[r]], now: new Date() }),
      ),
    );
    expect([a?.committedNow, b?.committedNow]).toEqual([true, true]);
    const loaded = await catalog.load('jobs');
    expect(loaded.version).toBe('2');
    expect(loaded.metadata!.snapshots!.map((s) => s['sequence-number'])).toEqual([1, 2]);
    expect(
      (await readIcebergTable(catalog.tableLocation('jobs'))).map((r) => Number(r.job_id)).sort(),
    ).toEqual([1, 2]);
  });

  it('merges small manifests once a snapshot holds enough, keeping every row and sequence number', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    const runs = 12;
    for (let i = 0; i < runs; i++) {
      if (i === 1) {
        // As a user would with Athena's ALTER TABLE … SET TBLPROPERTIES (default 100).
        const base = await catalog.load('jobs');
        const properties = {
          ...base.metadata!.properties,
          'commit.manifest.min-count-to-merge': '5',
          'history.expire.max-snapshot-age-ms': '150000',
        };
        await catalog.commit(base, { ...base.metadata!, properties });
      }
      await commitRun(storage, catalog, {
        table: 'jobs',
        runId: `run-${i}`,
        files: [await stage(storage, `run-${i}`, '2026-11-22', [i])],
        now: new Date(Date.UTC(2026, 10, 22, 0, i)),
      });
    }
    const { metadata } = await catalog.load('jobs');
    const list = await decodeManifestList(
      (await storage.get(keyOfLocation(storage, metadata!.snapshots!.at(-1)!['manifest-list'])))!.body,
    );
    expect(list.length).toBeLessThan(6);
    const merged = list.find((m) => m.existing_files_count > 1)!;
    expect(merged.min_sequence_number).toBe(1);
    const entries = await decodeManifest(
      (await storage.get(keyOfLocation(storage, merged.manifest_path)))!.body,
    );
    expect(entries.every((e) => e.status === 0 && e.sequence_number !== null)).toBe(true);
    expect(entries.map((e) => e.sequence_number)).toEqual(entries.map((_, i) => i + 1));
    const rows = await readIcebergTable(catalog.tableLocation('jobs'));
    expect(rows.map((r) => Number(r.job_id)).sort((a, b) => a - b)).toEqual([...Array(runs).keys()]);
    // Snapshots expire after 2.5 min (a run a minute): their lists go, and so do the run
    // manifests merged away before the oldest kept snapshot; what stays is what kept ones list.
    expect(metadata!.snapshots!.length).toBe(3);
    const avro = (await readdir(join(storage.location, 'iceberg/jobs/metadata'))).filter((f) =>
      f.endsWith('.avro'),
    );
    const referenced = new Set<string>();
    for (const snapshot of metadata!.snapshots!) {
      referenced.add(snapshot['manifest-list']);
      const manifests = await decodeManifestList(
        (await storage.get(keyOfLocation(storage, snapshot['manifest-list'])))!.body,
      );
      for (const m of manifests) referenced.add(m.manifest_path);
    }
    const location = (f: string) => `file://${storage.location}/iceberg/jobs/metadata/${f}`;
    expect(avro.filter((f) => !referenced.has(location(f)))).toEqual([]);
  });
});
