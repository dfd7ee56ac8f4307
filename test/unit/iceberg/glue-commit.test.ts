/**
 * A run's commit through the Glue catalog (a stateful Glue fake over a real folder): the first
 * commit builds on the metadata Glue made when the stack created the table (Glue's field ids,
 * no partition spec, no snapshot) and writes the exporter's schema and spec; races rebase; a
 * lost answer is recognised.
 */
import { GlueClient } from '@aws-sdk/client-glue';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { commitRun } from '../../../shared/iceberg/commit.js';
import { GlueCatalog } from '../../../shared/iceberg/glue-catalog.js';
import { dataFileMetrics } from '../../../shared/iceberg/metrics.js';
import { icebergParquetTable, icebergSchema, partitionSpec } from '../../../shared/iceberg/schema.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { tempDir } from '../../helpers/export.js';
import { createStackTable, GlueFake, glueMadeMetadata } from '../../helpers/glue-fake.js';
import { readIcebergTable } from '../../helpers/icebird.js';

const DB = 'exporter';
const glue = mockClient(GlueClient);
const jobs = icebergParquetTable('jobs', 'freeze');

describe('commitRun through the Glue catalog', () => {
  let storage: LocalStorage;
  let fake: GlueFake;
  let catalog: GlueCatalog;

  beforeEach(async () => {
    glue.reset();
    fake = new GlueFake(glue);
    storage = new LocalStorage(await tempDir('glue-commit'));
    catalog = new GlueCatalog({ client: new GlueClient({ region: 'eu-west-1' }), databaseName: DB, storage });
    // What Glue writes for the stack's table: its own ids (1.., in column order), no partition spec.
    const location = catalog.tableLocation('jobs');
    await createStackTable(
      fake,
      DB,
      storage,
      'jobs',
      'iceberg/jobs/metadata/00000-glue.metadata.json',
      glueMadeMetadata('jobs', location, {
        'table-uuid': '0b6c3c1e-1111-4222-8333-444455556666',
        'last-column-id': 8,
        properties: { 'write.parquet.compression-codec': 'zstd' },
      }),
    );
  });

  async function stage(runId: string, ids: number[]) {
    const dt = '2026-11-23';
    const rows = ids.map((id) => ({
      job_id: id,
      campaign_id: 1,
      job_status: 1,
      job_score_percentage: null,
      item_json: '{}',
      run_id: runId,
      exported_at: new Date('2026-11-23T08:00:00Z'),
      dt,
    }));
    const bytes = encodeParquet(jobs, rows);
    const key = `iceberg/jobs/data/dt=${dt}/${runId}-0.parquet`;
    await storage.put(key, bytes);
    return { key, dt, bytes: bytes.length, metrics: dataFileMetrics(bytes, jobs) };
  }

  it("builds the first snapshot on Glue's metadata with the exporter's schema and spec", async () => {
    const outcome = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [await stage('run-a', [1, 2])],
      now: new Date(),
    });
    const { metadata, metadataLocation } = await catalog.load('jobs');
    expect(metadataLocation).toBe(outcome.metadataLocation);
    expect(fake.table(DB, 'jobs').Parameters).toMatchObject({
      table_type: 'ICEBERG',
      metadata_location: outcome.metadataLocation,
      previous_metadata_location: `${storage.location}/iceberg/jobs/metadata/00000-glue.metadata.json`,
    });
    expect(metadata!['table-uuid']).toBe('0b6c3c1e-1111-4222-8333-444455556666');
    expect(metadata!.schemas.find((s) => s['schema-id'] === metadata!['current-schema-id'])!.fields).toEqual(
      icebergSchema('jobs', 'freeze').fields,
    );
    expect(metadata!['partition-specs']).toEqual([partitionSpec('jobs')]);
    expect(metadata!['metadata-log']!.map((e) => e['metadata-file'])).toEqual([
      `${storage.location}/iceberg/jobs/metadata/00000-glue.metadata.json`,
    ]);
    expect(
      (await readIcebergTable(catalog.tableLocation('jobs'), metadataLocation!.split('/').at(-1)))
        .map((r) => Number(r.job_id))
        .sort(),
    ).toEqual([1, 2]);
  });

  it('rebases two runs that commit at once, and recognises a commit whose answer was lost', async () => {
    const [a, b] = [await stage('run-a', [1]), await stage('run-b', [2])];
    await Promise.all([
      commitRun(storage, catalog, { table: 'jobs', runId: 'run-a', files: [a], now: new Date() }),
      commitRun(storage, catalog, { table: 'jobs', runId: 'run-b', files: [b], now: new Date() }),
    ]);
    fake.faults.push('lost-after');
    const c = await stage('run-c', [3]);
    const outcome = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-c',
      files: [c],
      now: new Date(),
    });
    expect(outcome.committedNow).toBe(true);
    const { metadata } = await catalog.load('jobs');
    expect(metadata!.snapshots!.map((s) => [s['sequence-number'], s.summary['run-id']]).sort()).toEqual([
      [1, expect.any(String)],
      [2, expect.any(String)],
      [3, 'run-c'],
    ]);
    expect(new Set(metadata!.snapshots!.map((s) => s.summary['run-id']))).toEqual(
      new Set(['run-a', 'run-b', 'run-c']),
    );
    // A finisher that takes the closing up again finds every snapshot and commits nothing.
    const again = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [a],
      now: new Date(),
    });
    expect(again.committedNow).toBe(false);
    expect((await catalog.load('jobs')).metadata!.snapshots).toHaveLength(3);
  });

  it('keeps the history when a stack update dropped the Glue pointer: the next commit builds on the last one', async () => {
    const a = await stage('run-a', [1]);
    await commitRun(storage, catalog, { table: 'jobs', runId: 'run-a', files: [a], now: new Date() });
    // CloudFormation's UpdateTable writes the template's parameters: metadata_location is gone.
    fake.setParameters(DB, 'jobs', { table_type: 'ICEBERG' });
    expect((await catalog.load('jobs')).metadata).toBeUndefined();

    // A finisher that takes run-a's closing up again points the table back at its snapshot.
    const again = await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-a',
      files: [a],
      now: new Date(),
    });
    expect(again.committedNow).toBe(false);
    expect((await catalog.load('jobs')).metadata!.snapshots!.map((s) => s.summary['run-id'])).toEqual([
      'run-a',
    ]);

    fake.setParameters(DB, 'jobs', { table_type: 'ICEBERG' });
    await commitRun(storage, catalog, {
      table: 'jobs',
      runId: 'run-b',
      files: [await stage('run-b', [2])],
      now: new Date(),
    });
    const { metadata, metadataLocation } = await catalog.load('jobs');
    expect(metadata!.snapshots!.map((s) => s.summary['run-id'])).toEqual(['run-a', 'run-b']);
    const rows = await readIcebergTable(catalog.tableLocation('jobs'), metadataLocation!.split('/').at(-1));
    expect(rows.map((r) => Number(r.job_id)).sort()).toEqual([1, 2]);
  });
});
