import { access, mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { decodeManifest, decodeManifestList, type ManifestEntry } from '../../../shared/iceberg/avro.js';
import { commitRun, snapshotIdOf } from '../../../shared/iceberg/commit.js';
import { DELETE_FILE_PATH_ID, DELETE_POS_ID, supersedeJobs } from '../../../shared/iceberg/current.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { keyOfLocation } from '../../../shared/iceberg/locations.js';
import type { CurrentTableName } from '../../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../../shared/iceberg/types.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { openDuckDb } from '../../helpers/duckdb.js';
import { syntheticRow, writeDataFile } from '../../helpers/iceberg-rows.js';
import { readIcebergSnapshot, readIcebergTable } from '../../helpers/icebird.js';

const DAY = 24 * 3_600_000;
const START = new Date('2026-11-20T10:00:00Z').getTime();

/** A run: the jobs whose report it exported, and how many sections each report has. */
interface Run {
  id: string;
  day: number;
  sections: Record<number, number>;
}

const dtOf = (run: Run) => new Date(START + run.day * DAY).toISOString().slice(0, 10);

/** Commits `run` to reports_current and sections_current, as the exporter does. */
async function commitCurrent(storage: LocalStorage, catalog: FileCatalog, run: Run) {
  const jobs = Object.keys(run.sections).map(Number);
  const dt = dtOf(run);
  const rows = {
    reports_current: jobs.map((j) => syntheticRow('reports_current', run.id, dt, j)),
    sections_current: jobs.flatMap((j) =>
      Array.from({ length: run.sections[j]! }, (_, i) =>
        syntheticRow('sections_current', run.id, dt, j, { section_index: i }),
      ),
    ),
  };
  const outcomes = [];
  for (const table of ['reports_current', 'sections_current'] as const) {
    const files =
      rows[table].length > 0 ? [await writeDataFile(storage, table, `${run.id}-0`, dt, rows[table])] : [];
    outcomes.push(
      await commitRun(storage, catalog, {
        table,
        runId: run.id,
        files,
        now: new Date(START + run.day * DAY),
        changeBase: supersedeJobs(storage, catalog, { jobs: new Set(jobs), listings: new Map() }),
      }),
    );
  }
  return outcomes;
}

/** "The newest run per job": each job's rows from the last run (in commit order) that exported it. */
function expected(runs: readonly Run[]) {
  const newest = new Map<number, Run>();
  for (const run of runs) for (const j of Object.keys(run.sections)) newest.set(Number(j), run);
  return {
    reports_current: [...newest].map(([j, r]) => `${j}/${r.id}`).sort(),
    sections_current: [...newest]
      .flatMap(([j, r]) => Array.from({ length: r.sections[j]! }, (_, i) => `${j}/${i}/${r.id}`))
      .sort(),
  };
}

async function read(catalog: FileCatalog, table: CurrentTableName) {
  const rows = await readIcebergTable(catalog.tableLocation(table));
  return rows
    .map((r) =>
      table === 'reports_current' ? `${r.job_id}/${r.run_id}` : `${r.job_id}/${r.section_index}/${r.run_id}`,
    )
    .sort();
}

/** Every live and deleted entry of the table's current snapshot. */
async function entries(storage: LocalStorage, catalog: FileCatalog, table: string) {
  const { metadata } = await catalog.load(table);
  const snapshot = metadata!.snapshots!.find((s) => s['snapshot-id'] === metadata!['current-snapshot-id'])!;
  const list = await decodeManifestList(
    (await storage.get(keyOfLocation(storage, snapshot['manifest-list'])))!.body,
  );
  const out: (ManifestEntry & { manifestContent: number })[] = [];
  for (const m of list) {
    for (const e of await decodeManifest(
      (await storage.get(keyOfLocation(storage, m.manifest_path)))!.body,
    )) {
      out.push({ ...e, manifestContent: m.content });
    }
  }
  return { snapshot, list, entries: out };
}

/** The local path of a file the table names by location (a file:// URI). */
const keyPath = (storage: LocalStorage, location: string) =>
  join(storage.location, keyOfLocation(storage, location));

const newStorage = async () => new LocalStorage(await mkdtemp(join(tmpdir(), 'iceberg-current-')));
const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

const RUNS: Run[] = [
  { id: 'run-1', day: 0, sections: { 1: 1, 2: 2, 3: 3, 4: 1, 5: 3, 6: 2 } },
  // Job 4's new report has no sections, job 5's has fewer: their old sections must go.
  { id: 'run-2', day: 1, sections: { 4: 0, 5: 1, 6: 2, 7: 2, 8: 1 } },
  // Jobs 1–3 leave run-1's files with no live row: those files are removed, with the deletes
  // run-2 wrote against them.
  { id: 'run-3', day: 2, sections: { 1: 2, 2: 1, 3: 1, 8: 3 } },
];

describe('current tables', () => {
  it('hold exactly the newest run of each job after runs with overlapping jobs', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    for (const [i, run] of RUNS.entries()) {
      await commitCurrent(storage, catalog, run);
      const want = expected(RUNS.slice(0, i + 1));
      expect(await read(catalog, 'reports_current')).toEqual(want.reports_current);
      expect(await read(catalog, 'sections_current')).toEqual(want.sections_current);
    }
    expect(await read(catalog, 'sections_current')).toContain('5/0/run-2');
    expect(await read(catalog, 'sections_current')).not.toContain('5/1/run-1');

    const { snapshot, list, entries: all } = await entries(storage, catalog, 'sections_current');
    expect(snapshot.summary).toMatchObject({
      operation: 'overwrite',
      'added-data-files': '1',
      'deleted-data-files': '1',
      'removed-delete-files': '1',
    });
    // run-1's file and run-2's delete file against it are DELETED by run-3; run-3 deletes
    // rows of run-2's file, at run-3's sequence number, in a delete manifest of its own.
    const byStatus = (status: number) =>
      all.filter((e) => e.status === status).map((e) => e.data_file.file_path.replace(/.*\//, ''));
    expect(byStatus(2).sort()).toEqual([
      'run-1-0.parquet',
      `run-2-${snapshotIdOf('run-2', 'sections_current')}-2-deletes.parquet`,
    ]);
    expect(byStatus(2).length + byStatus(0).length + byStatus(1).length).toBe(all.length);
    const deletes = all.filter((e) => e.status === 1 && e.data_file.content === 1);
    expect(deletes).toHaveLength(1);
    expect(deletes[0]!.manifestContent).toBe(1);
    expect(list.find((m) => m.content === 1)!.sequence_number).toBe(3);
    // Surviving entries of rewritten manifests carry explicit sequence numbers.
    for (const e of all.filter((x) => x.status !== 1)) expect(e.sequence_number).not.toBeNull();

    // Its file_path bounds are the whole path of the one file it names (Java writes them
    // whole; the footer's are cut at 64 bytes, shorter than this path).
    const named = all.find((e) => e.data_file.file_path.endsWith('/run-2-0.parquet'))!.data_file.file_path;
    expect(Buffer.byteLength(named)).toBeGreaterThan(64);
    const pathBound = (bounds: ManifestEntry['data_file']['lower_bounds']) =>
      bounds?.find((b) => b.key === DELETE_FILE_PATH_ID)?.value.toString('utf8');
    expect(pathBound(deletes[0]!.data_file.lower_bounds)).toBe(named);
    expect(pathBound(deletes[0]!.data_file.upper_bounds)).toBe(named);

    // The delete file: required file_path and pos with the reserved ids, sorted.
    const db = await openDuckDb();
    try {
      const path = keyPath(storage, deletes[0]!.data_file.file_path);
      const ids = await db.all(
        `SELECT name, field_id, repetition_type FROM parquet_schema('${path}') WHERE field_id IS NOT NULL`,
      );
      expect(ids.map((r) => [r.name, Number(r.field_id), r.repetition_type])).toEqual([
        ['file_path', DELETE_FILE_PATH_ID, 'REQUIRED'],
        ['pos', DELETE_POS_ID, 'REQUIRED'],
      ]);
      const rows = await db.all(`SELECT file_path, pos FROM read_parquet('${path}')`);
      const sorted = [...rows].sort((a, b) =>
        String(a.file_path) < String(b.file_path)
          ? -1
          : String(a.file_path) > String(b.file_path)
            ? 1
            : Number(a.pos) - Number(b.pos),
      );
      expect(rows).toEqual(sorted);
      expect(rows.every((r) => String(r.file_path).endsWith('run-2-0.parquet'))).toBe(true);
    } finally {
      await db.close();
    }
  });

  it('changes nothing when a commit is done again', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    for (const run of RUNS) await commitCurrent(storage, catalog, run);
    const before = await catalog.load('sections_current');
    const again = await commitCurrent(storage, catalog, RUNS[1]!);
    expect(again.map((o) => o.committedNow)).toEqual([false, false]);
    expect((await catalog.load('sections_current')).version).toBe(before.version);
    expect(await read(catalog, 'sections_current')).toEqual(expected(RUNS).sections_current);
  });

  it('rebases the deletes of a run that lost a race onto the winner', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    await commitCurrent(storage, catalog, RUNS[0]!);
    const a: Run = { id: 'run-a', day: 1, sections: { 1: 2, 2: 1, 9: 1 } };
    const b: Run = { id: 'run-b', day: 1, sections: { 2: 3, 3: 0, 9: 2 } };
    await Promise.all([commitCurrent(storage, catalog, a), commitCurrent(storage, catalog, b)]);
    const { metadata } = await catalog.load('sections_current');
    const order = metadata!
      .snapshots!.filter((s) => s.summary['run-id'] !== 'run-1')
      .sort((x, y) => x['sequence-number'] - y['sequence-number'])
      .map((s) => (s.summary['run-id'] === 'run-a' ? a : b));
    expect(order).toHaveLength(2);
    const want = expected([RUNS[0]!, ...order]);
    expect(await read(catalog, 'sections_current')).toEqual(want.sections_current);
    expect(await read(catalog, 'reports_current')).toEqual(want.reports_current);
  });

  it('deletes files removed by a snapshot once that snapshot expires', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    for (const run of RUNS) await commitCurrent(storage, catalog, run);
    const run1File = join(storage.location, 'iceberg/sections_current/data/dt=2026-11-20/run-1-0.parquet');
    const manifestsBefore = await readdir(join(storage.location, 'iceberg/sections_current/metadata'));
    expect(await exists(run1File)).toBe(true);
    // 8.5 days on, run-1 and run-2 expire (7 days kept); run-3, which removed the file, is kept.
    await commitCurrent(storage, catalog, { id: 'run-4', day: 8.5, sections: { 7: 1 } });
    expect(await exists(run1File)).toBe(true);
    // Once run-3 expires, nothing kept reads the file.
    await commitCurrent(storage, catalog, { id: 'run-5', day: 20, sections: { 7: 1 } });
    expect(await exists(run1File)).toBe(false);
    const manifestsAfter = await readdir(join(storage.location, 'iceberg/sections_current/metadata'));
    expect(manifestsAfter.filter((f) => f.startsWith('run-1-') && manifestsBefore.includes(f))).toEqual([]);
    expect(await read(catalog, 'sections_current')).toEqual(
      expected([
        ...RUNS,
        { id: 'run-4', day: 8.5, sections: { 7: 1 } },
        { id: 'run-5', day: 20, sections: { 7: 1 } },
      ]).sections_current,
    );
  });

  it('carries no manifest whose entries are all DELETED past the snapshot that wrote it', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    for (const run of RUNS) await commitCurrent(storage, catalog, run);
    // run-3 removed run-1's file and run-2's delete file: manifests with DELETED entries only.
    const third = await entries(storage, catalog, 'sections_current');
    const allDeleted = third.list.filter((m) => m.added_files_count + m.existing_files_count === 0);
    expect(allDeleted.length).toBeGreaterThan(0);
    const run4: Run = { id: 'run-4', day: 3, sections: { 9: 1 } };
    await commitCurrent(storage, catalog, run4);
    const fourth = await entries(storage, catalog, 'sections_current');
    const paths = new Set(fourth.list.map((m) => m.manifest_path));
    expect(allDeleted.filter((m) => paths.has(m.manifest_path))).toEqual([]);
    expect(fourth.entries.filter((e) => e.status === 2)).toEqual([]);
    expect(await read(catalog, 'sections_current')).toEqual(expected([...RUNS, run4]).sections_current);
    // The files run-3 removed still go once it expires: its own manifests name them.
    const run1File = join(storage.location, 'iceberg/sections_current/data/dt=2026-11-20/run-1-0.parquet');
    await commitCurrent(storage, catalog, { id: 'run-5', day: 20, sections: { 7: 1 } });
    expect(await exists(run1File)).toBe(false);
  });

  it('keeps the snapshots and files a tag or another branch needs, and drops a ref past its age', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    const table = 'sections_current';
    for (const run of RUNS) await commitCurrent(storage, catalog, run);
    const [s1, s2] = ['run-1', 'run-2'].map((r) => snapshotIdOf(r, table));
    // As another engine would: a tag on run-1's snapshot, a branch on run-2's that lives 15 days.
    const base = await catalog.load(table);
    const refs: TableMetadata['refs'] = {
      ...base.metadata!.refs,
      audit: { 'snapshot-id': s1!, type: 'tag' },
      trial: { 'snapshot-id': s2!, type: 'branch', 'max-ref-age-ms': 15 * DAY },
    };
    expect((await catalog.commit(base, { ...base.metadata!, refs })).committed).toBe(true);
    const run1File = join(storage.location, `iceberg/${table}/data/dt=2026-11-20/run-1-0.parquet`);
    const run2Deletes = join(
      storage.location,
      `iceberg/${table}/data/dt=2026-11-20/run-2-${s2}-2-deletes.parquet`,
    );
    expect(await exists(run2Deletes)).toBe(true);

    // 8.5 days on, past the 7-day expiry of run-1 and run-2: the refs keep them.
    const run4: Run = { id: 'run-4', day: 8.5, sections: { 7: 1 } };
    await commitCurrent(storage, catalog, run4);
    let { metadata } = await catalog.load(table);
    const ids = () => metadata!.snapshots!.map((s) => BigInt(s['snapshot-id']));
    expect(ids()).toEqual(expect.arrayContaining([BigInt(s1!), BigInt(s2!)]));
    expect(await exists(run1File)).toBe(true);
    const location = catalog.tableLocation(table);
    const rowsOf = (rows: Record<string, unknown>[]) =>
      rows.map((r) => `${r.job_id}/${r.section_index}/${r.run_id}`).sort();
    expect(rowsOf(await readIcebergSnapshot(location, s1!))).toEqual(
      expected(RUNS.slice(0, 1)).sections_current,
    );
    expect(rowsOf(await readIcebergSnapshot(location, s2!))).toEqual(
      expected(RUNS.slice(0, 2)).sections_current,
    );

    // 20 days on: run-3, which removed run-1's file and run-2's delete file, expires; the branch
    // is past its 15 days and goes with its snapshot; the tag still reads run-1's file.
    const run5: Run = { id: 'run-5', day: 20, sections: { 7: 1 } };
    await commitCurrent(storage, catalog, run5);
    ({ metadata } = await catalog.load(table));
    expect(Object.keys(metadata!.refs!).sort()).toEqual(['audit', 'main']);
    expect(ids()).toContain(BigInt(s1!));
    expect(ids()).not.toContain(BigInt(s2!));
    for (const ref of Object.values(metadata!.refs!)) expect(ids()).toContain(BigInt(ref['snapshot-id']));
    expect(await exists(run1File)).toBe(true);
    expect(await exists(run2Deletes)).toBe(false);
    expect(rowsOf(await readIcebergSnapshot(location, s1!))).toEqual(
      expected(RUNS.slice(0, 1)).sections_current,
    );
    expect(await read(catalog, table)).toEqual(expected([...RUNS, run4, run5]).sections_current);
    // Every list and manifest a kept snapshot names is still there, and avsc decodes it.
    const decoded = (location: string) =>
      new Promise<Record<string, unknown>[]>((resolve, reject) => {
        const records: Record<string, unknown>[] = [];
        avro
          .createFileDecoder(keyPath(storage, location))
          .on('data', (r) => records.push(r))
          .on('end', () => resolve(records))
          .on('error', reject);
      });
    for (const snapshot of metadata!.snapshots!) {
      const list = await decoded(snapshot['manifest-list']);
      expect(list.length).toBeGreaterThan(0);
      for (const m of list) expect(Array.isArray(await decoded(String(m.manifest_path)))).toBe(true);
    }

    // Once the tag is dropped, its snapshot expires and run-1's file, which only it read, goes.
    const tagged = await catalog.load(table);
    const { audit: _, ...rest } = tagged.metadata!.refs!;
    await catalog.commit(tagged, { ...tagged.metadata!, refs: rest });
    const run6: Run = { id: 'run-6', day: 21, sections: { 7: 1 } };
    await commitCurrent(storage, catalog, run6);
    ({ metadata } = await catalog.load(table));
    expect(ids()).not.toContain(BigInt(s1!));
    expect(await exists(run1File)).toBe(false);
    expect(await read(catalog, table)).toEqual(expected([...RUNS, run4, run5, run6]).sections_current);
  });

  it('writes Avro files that avsc decodes with their own header schema, field ids included', async () => {
    const storage = await newStorage();
    const catalog = new FileCatalog(storage);
    for (const run of RUNS) await commitCurrent(storage, catalog, run);
    const dir = join(storage.location, 'iceberg/sections_current/metadata');
    const files = (await readdir(dir)).filter((f) => f.endsWith('.avro'));
    expect(files.some((f) => f.endsWith('-d.avro'))).toBe(true);
    expect(files.some((f) => /-r\d+\.avro$/.test(f))).toBe(true);
    for (const f of files) {
      const header = avro.extractFileHeader(join(dir, f));
      const raw = header.meta['avro.schema'];
      const schema = Buffer.isBuffer(raw) ? JSON.parse(raw.toString()) : raw;
      const ids = JSON.stringify(schema);
      if (f.startsWith('snap-')) {
        expect(schema.fields.find((x: { name: string }) => x.name === 'content')['field-id']).toBe(517);
      } else {
        const dataFile = schema.fields.find((x: { name: string }) => x.name === 'data_file');
        expect(dataFile['field-id']).toBe(2);
        expect(dataFile.type.fields.find((x: { name: string }) => x.name === 'content')['field-id']).toBe(
          134,
        );
        const content = header.meta.content?.toString();
        expect(['data', 'deletes']).toContain(content);
        if (f.endsWith('-d.avro')) expect(content).toBe('deletes');
      }
      expect(ids).toContain('field-id');
      const records: unknown[] = [];
      await new Promise((resolve, reject) =>
        avro
          .createFileDecoder(join(dir, f))
          .on('data', (r) => records.push(r))
          .on('end', resolve)
          .on('error', reject),
      );
      expect(records.length).toBeGreaterThan(0);
    }
  });
});
