/**
 * A table written by `freeze` runs, then an `evolve` run, then a `freeze` run again: the commit
 * evolves the schema once (schema 1 with `_rescued`), keeps every data file, never goes back,
 * and icebird reads old rows with `_rescued` NULL and new ones with it set. Rows are written
 * through the run's TableBuffer (the Parquet the exporter writes for each contract).
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { avroMetadata, decodeManifestList } from '../../../shared/iceberg/avro.js';
import { commitRun } from '../../../shared/iceberg/commit.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../../shared/iceberg/locations.js';
import { icebergSchema } from '../../../shared/iceberg/schema.js';
import { sameFields } from '../../../shared/iceberg/schema-evolution.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { metadataAt, reportRow, writeReports } from '../../helpers/iceberg-reports.js';
import { readIcebergTable } from '../../helpers/icebird.js';

/** The schema id in the header of each manifest of the current snapshot, in list order. */
async function manifestSchemaIds(storage: LocalStorage, metadata: TableMetadata): Promise<string[]> {
  const snapshot = metadata.snapshots!.find((s) => s['snapshot-id'] === metadata['current-snapshot-id'])!;
  const list = await storage.get(keyOfLocation(storage, snapshot['manifest-list']));
  const ids: string[] = [];
  for (const m of await decodeManifestList(list!.body)) {
    const found = await storage.get(keyOfLocation(storage, m.manifest_path));
    ids.push((await avroMetadata(found!.body, 'manifest'))['schema-id']!);
  }
  return ids;
}

describe('an Iceberg table of frozen form that an evolve run writes to', () => {
  it('gains `_rescued` in a new schema, keeps its files, and never goes back', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'iceberg-evolve-')));
    const catalog = new FileCatalog(storage);

    const first = await commitRun(storage, catalog, {
      table: 'reports',
      runId: 'run-a',
      files: [await writeReports(storage, 'run-a', '2026-11-22', 'freeze', [reportRow(1, 'run-a')])],
      now: new Date('2026-11-22T10:00:00Z'),
    });
    const frozen = await metadataAt(storage, first.metadataLocation);
    expect(frozen['current-schema-id']).toBe(0);
    expect(frozen.schemas).toEqual([icebergSchema('reports', 'freeze')]);

    const rescued = JSON.stringify({ job: { priority: 'high' } });
    const second = await commitRun(storage, catalog, {
      table: 'reports',
      runId: 'run-b',
      contract: 'evolve',
      files: [
        await writeReports(storage, 'run-b', '2026-11-23', 'evolve', [
          { ...reportRow(2, 'run-b'), job_status: null, _rescued: rescued },
        ]),
      ],
      now: new Date('2026-11-23T10:00:00Z'),
    });
    const evolved = await metadataAt(storage, second.metadataLocation);
    expect(evolved['current-schema-id']).toBe(1);
    expect(evolved['last-column-id']).toBe(19);
    expect(evolved.schemas.map((s) => s['schema-id'])).toEqual([0, 1]);
    expect(evolved.schemas[0]).toEqual(icebergSchema('reports', 'freeze'));
    expect(sameFields(evolved.schemas[1]!, icebergSchema('reports', 'evolve'))).toBe(true);
    expect(evolved.snapshots!.map((s) => s['schema-id'])).toEqual([0, 1]);
    expect(await manifestSchemaIds(storage, evolved)).toEqual(['0', '1']);

    const rows = await readIcebergTable(catalog.tableLocation('reports'));
    const byJob = new Map(rows.map((r) => [Number(r.job_id), r]));
    // icebird reads a column the file lacks as undefined: the table's column, no value.
    expect(Object.keys(byJob.get(1)!)).toContain('_rescued');
    expect(byJob.get(1)!._rescued ?? null).toBeNull();
    expect(byJob.get(1)).toMatchObject({ job_status: 3, run_id: 'run-a' });
    expect(byJob.get(2)).toMatchObject({ _rescued: rescued, job_status: null, run_id: 'run-b' });

    // A freeze run afterwards writes its frozen files under the evolved schema.
    const third = await commitRun(storage, catalog, {
      table: 'reports',
      runId: 'run-c',
      files: [await writeReports(storage, 'run-c', '2026-11-24', 'freeze', [reportRow(3, 'run-c')])],
      now: new Date('2026-11-24T10:00:00Z'),
    });
    const after = await metadataAt(storage, third.metadataLocation);
    expect(after['current-schema-id']).toBe(1);
    expect(after.schemas).toEqual(evolved.schemas);
    expect(after.snapshots!.at(-1)!['schema-id']).toBe(1);
    const all = await readIcebergTable(catalog.tableLocation('reports'));
    expect(all.map((r) => [Number(r.job_id), r._rescued ?? null]).sort()).toEqual([
      [1, null],
      [2, rescued],
      [3, null],
    ]);
  });

  it('a fresh table of an evolve run starts with the evolve schema as schema 0', async () => {
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'iceberg-evolve-')));
    const catalog = new FileCatalog(storage);
    const outcome = await commitRun(storage, catalog, {
      table: 'reports',
      runId: 'run-a',
      contract: 'evolve',
      files: [
        await writeReports(storage, 'run-a', '2026-11-22', 'evolve', [
          { ...reportRow(1, 'run-a'), _rescued: '{}' },
        ]),
      ],
      now: new Date('2026-11-22T10:00:00Z'),
    });
    const metadata = await metadataAt(storage, outcome.metadataLocation);
    expect(metadata['current-schema-id']).toBe(0);
    expect(metadata.schemas).toEqual([icebergSchema('reports', 'evolve')]);
    expect(metadata['last-column-id']).toBe(19);
    const text = await readFile(join(storage.location, 'iceberg/reports/metadata/v1.metadata.json'), 'utf8');
    expect(text).toContain('"_rescued"');
  });
});
