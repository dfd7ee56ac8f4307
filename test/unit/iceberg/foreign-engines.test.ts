/**
 * The exporter's commit beside other engines: metadata Java/Athena rewrote, an Athena OPTIMIZE
 * (a `replace` snapshot) and VACUUM, and a commit racing another engine's. The other engine's
 * metadata is built in Java's key order from Athena's and Java's own files, its manifests with
 * Athena's Avro writer schemas (`test/helpers/foreign-engine.ts`), its data files by DuckDB.
 * Every table is read back by icebird; metadata by icebird's metadata reader.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { icebergMetadata } from 'icebird';
import { describe, expect, it } from 'vitest';
import { decodeManifest, decodeManifestList, type ManifestFile } from '../../../shared/iceberg/avro.js';
import type { CatalogTable, CommitResult } from '../../../shared/iceberg/catalog.js';
import { commitRun } from '../../../shared/iceberg/commit.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { keyOfLocation, locationOfKey } from '../../../shared/iceberg/locations.js';
import { dataFileMetrics } from '../../../shared/iceberg/metrics.js';
import {
  fieldId,
  icebergParquetTable,
  icebergSchema,
  partitionSpec,
} from '../../../shared/iceberg/schema.js';
import type { Snapshot, TableMetadata } from '../../../shared/iceberg/types.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { openDuckDb } from '../../helpers/duckdb.js';
import {
  ATHENA_METADATA,
  athenaManifest,
  athenaManifestList,
  type ForeignListEntry,
  foreignJson,
  JAVA_V2,
  javaMetadataText,
} from '../../helpers/foreign-engine.js';
import { readIcebergTable, withLocalFetch } from '../../helpers/icebird.js';

const JAVA = 'apache+iceberg/core/src/test/resources';
const jobsTable = icebergParquetTable('jobs', 'freeze');
const COLUMNS = icebergSchema('jobs', 'freeze').fields.map((f) => f.name);

async function stage(storage: LocalStorage, runId: string, dt: string, ids: number[]) {
  const rows = ids.map((id) => ({
    job_id: id,
    campaign_id: 7,
    job_status: id % 3,
    job_score_percentage: null,
    item_json: JSON.stringify({ id }),
    run_id: runId,
    exported_at: new Date('2026-11-23T10:00:00.123Z'),
    dt,
  }));
  const bytes = encodeParquet(jobsTable, rows);
  const key = `iceberg/jobs/data/dt=${dt}/${runId}-0.parquet`;
  await storage.put(key, bytes);
  return { key, dt, bytes: bytes.length, metrics: dataFileMetrics(bytes, jobsTable) };
}

async function run(
  storage: LocalStorage,
  catalog: FileCatalog,
  runId: string,
  dt: string,
  ids: number[],
  at: string,
) {
  return commitRun(storage, catalog, {
    table: 'jobs',
    runId,
    files: [await stage(storage, runId, dt, ids)],
    now: new Date(at),
  });
}

/** Another engine's commit on a Hadoop-style catalog: the next `vN.metadata.json` and the hint. */
async function writeVersion(storage: LocalStorage, catalog: FileCatalog, metadata: TableMetadata) {
  const loaded = await catalog.load('jobs');
  const next = Number(loaded.version) + 1;
  const key = `iceberg/jobs/metadata/v${next}.metadata.json`;
  await storage.put(key, javaMetadataText(metadata));
  await storage.put('iceberg/jobs/metadata/version-hint.text', String(next));
  return locationOfKey(storage, key);
}

/** The current metadata as a second reader (icebird's) reads it from the table folder. */
const icebirdMetadata = (storage: LocalStorage) =>
  withLocalFetch(() => icebergMetadata({ tableUrl: `${storage.location}/iceberg/jobs` }));

const jobIds = async (storage: LocalStorage) =>
  (await readIcebergTable(`${storage.location}/iceberg/jobs`))
    .map((r) => Number(r.job_id))
    .sort((a, b) => a - b);

/** The Java metadata of `metadata` after another engine's change `change`, in the metadata log. */
function javaVersion(metadata: TableMetadata, location: string, at: number, change: Partial<TableMetadata>) {
  return {
    ...metadata,
    ...change,
    'last-updated-ms': at,
    'metadata-log': [
      ...(metadata['metadata-log'] ?? []),
      { 'timestamp-ms': metadata['last-updated-ms'], 'metadata-file': location },
    ],
  } as TableMetadata;
}

/** A Parquet data file written by DuckDB (another engine), with the table's field ids, from `select`. */
async function duckdbDataFile(storage: LocalStorage, key: string, select: string) {
  const db = await openDuckDb();
  try {
    const ids = COLUMNS.map((c) => `${c}: ${fieldId('jobs', c)}`).join(', ');
    const path = join(storage.location, key);
    await db.all(`COPY (${select}) TO '${path}' (FORMAT parquet, FIELD_IDS {${ids}})`);
    const [count] = await db.all(`SELECT count(*) AS n FROM read_parquet('${path}')`);
    return { path, records: Number(count!.n), bytes: (await readFile(path)).length };
  } finally {
    await db.close();
  }
}

const header = (metadata: TableMetadata) => ({
  schemaJson: JSON.stringify(metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id'])),
  schemaId: metadata['current-schema-id'],
  specJson: JSON.stringify(partitionSpec('jobs').fields),
});

const listEntry = (m: ManifestFile): ForeignListEntry => ({
  manifest_path: m.manifest_path,
  manifest_length: Number(m.manifest_length),
  content: m.content,
  sequence_number: Number(m.sequence_number),
  min_sequence_number: Number(m.min_sequence_number),
  added_snapshot_id: m.added_snapshot_id,
  added: m.added_files_count,
  existing: m.existing_files_count,
  deleted: m.deleted_files_count,
  addedRows: Number(m.added_rows_count),
  existingRows: Number(m.existing_rows_count),
  deletedRows: Number(m.deleted_rows_count),
});

async function manifestsOf(storage: LocalStorage, snapshot: Snapshot) {
  const list = await storage.get(keyOfLocation(storage, snapshot['manifest-list']));
  return decodeManifestList(list!.body);
}

const current = (m: TableMetadata) =>
  m.snapshots!.find((s) => BigInt(s['snapshot-id']) === BigInt(m['current-snapshot-id']!))!;

describe('the commit beside other engines', () => {
  it('commits over metadata Java rewrote, keeping its properties, refs, statistics, sort orders, schema docs and unknown keys', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'foreign-')));
    const catalog = new FileCatalog(storage);
    const first = await run(storage, catalog, 'run-a', '2026-11-22', [1, 2, 3], '2026-11-23T10:00:00Z');
    const ours = (await catalog.load('jobs')).metadata!;
    const snap = ours['current-snapshot-id']!;
    // As Athena's ALTER TABLE … SET TBLPROPERTIES and a Java client's tag, branch, statistics,
    // sort order and column comment would leave it (the parts from Java's own test resources).
    const statistics = (
      foreignJson(`${JAVA}/TableMetadataStatisticsFiles.json`).statistics as {
        'statistics-path': string;
        'blob-metadata': object[];
      }[]
    ).map((s) => ({
      ...s,
      'snapshot-id': snap,
      'blob-metadata': s['blob-metadata'].map((b) => ({ ...b, 'snapshot-id': snap })),
    }));
    const partitionStatistics = (
      foreignJson(`${JAVA}/TableMetadataPartitionStatisticsFiles.json`)['partition-statistics'] as {
        'statistics-path': string;
      }[]
    ).map((s) => ({ ...s, 'snapshot-id': snap }));
    const [order] = JAVA_V2['sort-orders'] as { 'order-id': number; fields: { 'source-id': number }[] }[];
    const sortOrder = {
      ...order!,
      fields: order!.fields.map((f, i) => ({
        ...f,
        'source-id': [fieldId('jobs', 'job_id'), fieldId('jobs', 'campaign_id')][i],
      })),
    };
    const schema0 = ours.schemas[0]!;
    const commented = {
      ...schema0,
      'schema-id': 1,
      fields: schema0.fields.map((f) => (f.name === 'job_id' ? { ...f, doc: 'the job' } : f)),
    };
    const refs = {
      ...ours.refs,
      'audit-2026-11': { 'snapshot-id': snap, type: 'tag' as const, 'max-ref-age-ms': 31_536_000_000 },
      etl: { 'snapshot-id': snap, type: 'branch' as const, 'min-snapshots-to-keep': 2 },
    };
    const java = javaVersion(ours, first.metadataLocation, Date.parse('2026-11-23T10:30:00Z'), {
      properties: {
        ...ours.properties,
        ...ATHENA_METADATA.properties,
        'optimize.rewrite.delete-file-threshold': '2',
      },
      refs,
      statistics,
      'partition-statistics': partitionStatistics,
      'sort-orders': [...ours['sort-orders'], sortOrder],
      'default-sort-order-id': sortOrder['order-id'],
      schemas: [schema0, commented],
      'current-schema-id': 1,
      'x-engine-extension': { kept: true },
    });
    const javaLocation = await writeVersion(storage, catalog, java);
    const text = await readFile(
      keyOfLocation(storage, javaLocation).replace(/^/, `${storage.location}/`),
      'utf8',
    );
    // Written as Java writes it: partition fields' keys in Java's order, Jackson's spacing.
    expect(text).toMatch(
      /"partition-specs" : \[\s*\{\s*"spec-id" : 0,\s*"fields" : \[\s*\{\s*"name" : "dt",\s*"transform" : "identity"/,
    );

    await run(storage, catalog, 'run-b', '2026-11-23', [4, 5], '2026-11-23T11:00:00Z');

    const after = (await catalog.load('jobs')).metadata!;
    expect(after['format-version']).toBe(2);
    expect(after.properties).toMatchObject({
      ...ATHENA_METADATA.properties,
      'optimize.rewrite.delete-file-threshold': '2',
    });
    expect(after.refs).toMatchObject({ 'audit-2026-11': refs['audit-2026-11'], etl: refs.etl });
    expect(after.refs?.main?.['snapshot-id']).toBe(after['current-snapshot-id']);
    expect(after.statistics).toEqual(statistics);
    expect(after['partition-statistics']).toEqual(partitionStatistics);
    expect(after['sort-orders']).toEqual(java['sort-orders']);
    expect(after['default-sort-order-id']).toBe(3);
    expect(after['x-engine-extension']).toEqual({ kept: true });
    expect(after['current-schema-id']).toBe(1);
    expect(after.schemas).toEqual([schema0, commented]);
    expect(current(after)['schema-id']).toBe(1);
    expect(after['metadata-log']!.map((e) => e['metadata-file'])).toEqual([
      first.metadataLocation,
      javaLocation,
    ]);
    expect(after['snapshot-log']!.map((e) => e['snapshot-id'])).toEqual([snap, after['current-snapshot-id']]);
    // A second reader: icebird's metadata reader and its table read.
    const theirs = await icebirdMetadata(storage);
    expect((theirs.refs as Record<string, unknown>)['audit-2026-11']).toMatchObject({ type: 'tag' });
    expect(theirs['current-schema-id']).toBe(1);
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5]);
  });

  it('refuses a format version 3 table with one line, and writes nothing over it', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'foreign-')));
    const catalog = new FileCatalog(storage);
    const v3 = {
      ...foreignJson(`${JAVA}/TableMetadataV3ValidMinimal.json`),
      location: catalog.tableLocation('jobs'),
    } as TableMetadata;
    await storage.put('iceberg/jobs/metadata/v1.metadata.json', JSON.stringify(v3));
    await expect(run(storage, catalog, 'run-a', '2026-11-22', [1], '2026-11-23T10:00:00Z')).rejects.toThrow(
      /^the Iceberg table jobs \(.*v1\.metadata\.json\) is of format version 3: the exporter writes version 2/,
    );
    expect((await catalog.load('jobs')).version).toBe('1');

    // The same for the exporter's own table once another engine upgraded it to v3.
    const other = new LocalStorage(await mkdtemp(join(tmpdir(), 'foreign-')));
    const otherCatalog = new FileCatalog(other);
    const first = await run(other, otherCatalog, 'run-a', '2026-11-22', [1], '2026-11-23T10:00:00Z');
    const ours = (await otherCatalog.load('jobs')).metadata!;
    await writeVersion(
      other,
      otherCatalog,
      javaVersion(ours, first.metadataLocation, Date.parse('2026-11-23T10:30:00Z'), {
        'format-version': 3,
        'next-row-id': 1,
      }),
    );
    await expect(
      run(other, otherCatalog, 'run-b', '2026-11-23', [2], '2026-11-23T11:00:00Z'),
    ).rejects.toThrow(/format version 3/);
    await rm(storage.location, { recursive: true, force: true });
  });
  it("commits after Athena's OPTIMIZE (a replace snapshot) and VACUUM, keeping the rewritten file and none of the old ones", async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'foreign-')));
    const catalog = new FileCatalog(storage);
    await run(storage, catalog, 'run-a', '2026-11-22', [1, 2, 3], '2026-11-23T10:00:00Z');
    const second = await run(storage, catalog, 'run-b', '2026-11-22', [4, 5], '2026-11-23T11:00:00Z');
    const before = (await catalog.load('jobs')).metadata!;
    const oldManifests = await manifestsOf(storage, current(before));
    // Sequence numbers made explicit, as a rewrite writes them (ADDED entries inherited theirs).
    const oldEntries = (
      await Promise.all(
        oldManifests.map(async (m) =>
          (
            await decodeManifest((await storage.get(keyOfLocation(storage, m.manifest_path)))!.body)
          ).map((e) => ({
            ...e,
            sequence_number: e.sequence_number ?? m.sequence_number,
            file_sequence_number: e.file_sequence_number ?? m.sequence_number,
          })),
        ),
      )
    ).flat();

    // OPTIMIZE: DuckDB rewrites the two files into one; Athena's manifests mark the old ones
    // DELETED and add the new one; a `replace` snapshot with a 63-bit id, as Athena's are.
    const optimizeId = 7_651_234_567_890_123_456n;
    const sequence = before['last-sequence-number'] + 1;
    const files = oldEntries.map((e) => `'${e.data_file.file_path}'`).join(', ');
    const merged = await duckdbDataFile(
      storage,
      'iceberg/jobs/data/dt=2026-11-22/20261124_optimize-00000.parquet',
      `SELECT ${COLUMNS.join(', ')} FROM read_parquet([${files}]) ORDER BY job_id`,
    );
    const deletedBytes = await athenaManifest(
      oldEntries.map((e) => ({
        status: 2,
        snapshot_id: optimizeId,
        sequence_number: e.sequence_number,
        file_sequence_number: e.file_sequence_number,
        data_file: { ...e.data_file, dt: e.data_file.partition.dt! },
      })),
      header(before),
    );
    const addedBytes = await athenaManifest(
      [
        {
          status: 1,
          snapshot_id: optimizeId,
          sequence_number: null,
          file_sequence_number: null,
          data_file: {
            content: 0,
            file_path: merged.path,
            record_count: merged.records,
            file_size_in_bytes: merged.bytes,
            dt: '2026-11-22',
          },
        },
      ],
      header(before),
    );
    const meta = 'iceberg/jobs/metadata';
    await storage.put(`${meta}/0aa1-m0.avro`, addedBytes);
    await storage.put(`${meta}/0aa1-m1.avro`, deletedBytes);
    const rows = oldEntries.reduce((n, e) => n + Number(e.data_file.record_count), 0);
    const list = await athenaManifestList(
      [
        {
          manifest_path: locationOfKey(storage, `${meta}/0aa1-m0.avro`),
          manifest_length: addedBytes.length,
          content: 0,
          sequence_number: sequence,
          min_sequence_number: sequence,
          added_snapshot_id: optimizeId,
          added: 1,
          existing: 0,
          deleted: 0,
          addedRows: merged.records,
          existingRows: 0,
          deletedRows: 0,
        },
        {
          manifest_path: locationOfKey(storage, `${meta}/0aa1-m1.avro`),
          manifest_length: deletedBytes.length,
          content: 0,
          sequence_number: sequence,
          min_sequence_number: sequence,
          added_snapshot_id: optimizeId,
          added: 0,
          existing: 0,
          deleted: oldEntries.length,
          addedRows: 0,
          existingRows: 0,
          deletedRows: rows,
        },
      ],
      { snapshotId: optimizeId, parentSnapshotId: before['current-snapshot-id']!, sequenceNumber: sequence },
    );
    const listKey = `${meta}/snap-${optimizeId}-1-0aa1.avro`;
    await storage.put(listKey, list);
    const at = Date.parse('2026-11-24T02:00:00Z');
    const replace: Snapshot = {
      'sequence-number': sequence,
      'snapshot-id': optimizeId,
      'parent-snapshot-id': before['current-snapshot-id']!,
      'timestamp-ms': at,
      summary: {
        operation: 'replace',
        trino_query_id: '20261124_020000_00001_optim',
        'added-data-files': '1',
        'deleted-data-files': String(oldEntries.length),
        'added-records': String(merged.records),
        'deleted-records': String(rows),
        'total-records': String(merged.records),
        'total-data-files': '1',
        'total-delete-files': '0',
        'total-files-size': String(merged.bytes),
        'total-position-deletes': '0',
        'total-equality-deletes': '0',
      },
      'manifest-list': locationOfKey(storage, listKey),
      'schema-id': before['current-schema-id'],
    };
    const optimized = await writeVersion(
      storage,
      catalog,
      javaVersion(before, second.metadataLocation, at, {
        'last-sequence-number': sequence,
        'current-snapshot-id': optimizeId,
        refs: { main: { 'snapshot-id': optimizeId, type: 'branch' } },
        snapshots: [...before.snapshots!, replace],
        'snapshot-log': [...before['snapshot-log']!, { 'timestamp-ms': at, 'snapshot-id': optimizeId }],
      }),
    );
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5]);

    const third = await run(storage, catalog, 'run-c', '2026-11-23', [6, 7], '2026-11-24T10:00:00Z');
    const afterOptimize = (await catalog.load('jobs')).metadata!;
    expect(BigInt(current(afterOptimize)['parent-snapshot-id']!)).toBe(optimizeId);
    expect(current(afterOptimize).summary['total-records']).toBe('7');
    const carried = (await manifestsOf(storage, current(afterOptimize))).map((m) => m.manifest_path);
    expect(carried).toEqual(expect.arrayContaining([locationOfKey(storage, `${meta}/0aa1-m0.avro`)]));
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5, 6, 7]);

    // VACUUM: snapshots before the rewrite expire; the files only they read are deleted.
    const kept = afterOptimize.snapshots!.filter((s) => s['sequence-number'] >= sequence);
    const vacuumAt = Date.parse('2026-11-25T02:00:00Z');
    await writeVersion(
      storage,
      catalog,
      javaVersion(afterOptimize, third.metadataLocation, vacuumAt, {
        snapshots: kept,
        'snapshot-log': afterOptimize['snapshot-log']!.filter((e) =>
          kept.some((s) => BigInt(s['snapshot-id']) === BigInt(e['snapshot-id'])),
        ),
      }),
    );
    const expired = afterOptimize.snapshots!.filter((s) => !kept.includes(s));
    for (const s of expired) {
      await storage.delete([keyOfLocation(storage, s['manifest-list'])]);
    }
    await storage.delete([
      ...oldManifests.map((m) => keyOfLocation(storage, m.manifest_path)),
      ...oldEntries.map((e) => keyOfLocation(storage, e.data_file.file_path)),
    ]);
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5, 6, 7]);

    await run(storage, catalog, 'run-d', '2026-11-25', [8], '2026-11-25T10:00:00Z');
    const last = (await catalog.load('jobs')).metadata!;
    expect(last.snapshots!.map((s) => s.summary.operation)).toEqual(['replace', 'append', 'append']);
    expect(last['metadata-log']!.map((e) => e['metadata-file'])).toContain(optimized);
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const theirs = await icebirdMetadata(storage);
    // (icebird's metadata reader rounds 64-bit ids: compared by what it keeps exact.)
    expect(theirs.snapshots!.map((s) => s.summary.operation)).toEqual(['replace', 'append', 'append']);
    expect(theirs['last-sequence-number']).toBe(5);
  });

  it("rebases on another engine's commit that won the race, keeping its snapshot and properties", async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'foreign-')));
    const theirsId = 5_123_456_789_012_345_678n;
    let swaps = 0;
    /** The file catalog, with Athena's INSERT committing just before the exporter's first swap. */
    class Racing extends FileCatalog {
      override async commit(base: CatalogTable, metadata: TableMetadata): Promise<CommitResult> {
        swaps++;
        if (swaps === 1) await athenaAppend(base);
        return super.commit(base, metadata);
      }
    }
    const catalog = new Racing(storage);
    async function athenaAppend(base: CatalogTable) {
      const metadata = base.metadata!;
      const sequence = metadata['last-sequence-number'] + 1;
      const file = await duckdbDataFile(
        storage,
        'iceberg/jobs/data/dt=2026-11-22/20261123_insert-00000.parquet',
        `SELECT 100 + job_id AS job_id, ${COLUMNS.filter((c) => c !== 'job_id').join(', ')} FROM read_parquet('${join(storage.location, 'iceberg/jobs/data/dt=2026-11-22/run-a-0.parquet')}')`,
      );
      const bytes = await athenaManifest(
        [
          {
            status: 1,
            snapshot_id: theirsId,
            sequence_number: null,
            file_sequence_number: null,
            data_file: {
              content: 0,
              file_path: file.path,
              record_count: file.records,
              file_size_in_bytes: file.bytes,
              dt: '2026-11-22',
            },
          },
        ],
        header(metadata),
      );
      const key = 'iceberg/jobs/metadata/0bb2-m0.avro';
      await storage.put(key, bytes);
      const existing = (await manifestsOf(storage, current(metadata))).map(listEntry);
      const list = await athenaManifestList(
        [
          {
            manifest_path: locationOfKey(storage, key),
            manifest_length: bytes.length,
            content: 0,
            sequence_number: sequence,
            min_sequence_number: sequence,
            added_snapshot_id: theirsId,
            added: 1,
            existing: 0,
            deleted: 0,
            addedRows: file.records,
            existingRows: 0,
            deletedRows: 0,
          },
          ...existing,
        ],
        {
          snapshotId: theirsId,
          parentSnapshotId: metadata['current-snapshot-id']!,
          sequenceNumber: sequence,
        },
      );
      const listKey = `iceberg/jobs/metadata/snap-${theirsId}-1-0bb2.avro`;
      await storage.put(listKey, list);
      const at = metadata['last-updated-ms'] + 1000;
      await writeVersion(
        storage,
        catalog,
        javaVersion(metadata, base.metadataLocation!, at, {
          'last-sequence-number': sequence,
          'current-snapshot-id': theirsId,
          refs: { main: { 'snapshot-id': theirsId, type: 'branch' } },
          properties: { ...metadata.properties, 'athena.optimize': 'weekly' },
          snapshots: [
            ...metadata.snapshots!,
            {
              'sequence-number': sequence,
              'snapshot-id': theirsId,
              'parent-snapshot-id': metadata['current-snapshot-id']!,
              'timestamp-ms': at,
              summary: {
                operation: 'append',
                'added-data-files': '1',
                'added-records': String(file.records),
                'total-records': '6',
                'total-data-files': '2',
              },
              'manifest-list': locationOfKey(storage, listKey),
              'schema-id': metadata['current-schema-id'],
            },
          ],
          'snapshot-log': [...metadata['snapshot-log']!, { 'timestamp-ms': at, 'snapshot-id': theirsId }],
        }),
      );
    }
    await run(storage, new FileCatalog(storage), 'run-a', '2026-11-22', [1, 2, 3], '2026-11-23T10:00:00Z');
    const outcome = await run(storage, catalog, 'run-b', '2026-11-23', [4, 5], '2026-11-23T11:00:00Z');

    expect(swaps).toBe(2);
    expect(outcome.committedNow).toBe(true);
    const after = (await catalog.load('jobs')).metadata!;
    expect(BigInt(current(after)['parent-snapshot-id']!)).toBe(theirsId);
    expect(after.snapshots!.map((s) => String(s['snapshot-id']))).toContain(String(theirsId));
    expect(after.properties?.['athena.optimize']).toBe('weekly');
    expect(current(after)['sequence-number']).toBe(3);
    expect(await jobIds(storage)).toEqual([1, 2, 3, 4, 5, 101, 102, 103]);
  });
});
