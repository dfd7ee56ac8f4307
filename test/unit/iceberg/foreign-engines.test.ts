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
import { parseJson } from '../../../shared/iceberg/json.js';
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
      foreignJson(`${JAVA}/TableMetadataStatisticsFiles.json`).statistics as { 'blob-metadata': object[] }[]
    ).map((s) => ({
      ...s,
      'snapshot-id': snap,
      'blob-metadata': s['blob-metadata'].map((b) => ({ ...b, 'snapshot-id': snap })),
    }));
    const partitionStatistics = (
      foreignJson(`${JAVA}/TableMetadataPartitionStatisticsFiles.json`)['partition-statistics'] as object[]
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
});
