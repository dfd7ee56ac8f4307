import { mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitRun } from '../../../shared/iceberg/commit.js';
import { type SupersedeRule, supersedeJobs } from '../../../shared/iceberg/current.js';
import { anyWithin, idColumnGroups, PositionRuns, SortedIds } from '../../../shared/iceberg/current-scan.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { syntheticRow, writeDataFile } from '../../helpers/iceberg-rows.js';
import { readIcebergTable } from '../../helpers/icebird.js';

/** A folder storage that counts, per key, the bytes read through it while `counting`. */
class ReadCountingStorage extends LocalStorage {
  counting = false;
  readonly bytes = new Map<string, number>();
  #count(key: string, body: Uint8Array | undefined) {
    if (this.counting && body) this.bytes.set(key, (this.bytes.get(key) ?? 0) + body.length);
  }
  override async get(key: string) {
    const found = await super.get(key);
    this.#count(key, found?.body);
    return found;
  }
  override async getRange(key: string, start: number, end: number) {
    const body = await super.getRange(key, start, end);
    this.#count(key, body);
    return body;
  }
  /** Data files read (under a table's `data/`, delete files left out). */
  dataFilesRead() {
    return [...this.bytes.keys()]
      .filter((k) => k.includes('/data/') && !k.endsWith('-deletes.parquet'))
      .sort();
  }
}

const SECTIONS = 3;
const TABLE = 'sections_current';
const dtOf = (day: number) => `2026-11-${String(10 + day).padStart(2, '0')}`;

/** Commits one run of `jobs` (SECTIONS rows each, campaign = `campaignOf`) to sections_current. */
async function commitSections(
  storage: LocalStorage,
  catalog: FileCatalog,
  runId: string,
  day: number,
  jobs: readonly number[],
  rule: SupersedeRule,
  campaignOf: (job: number) => number = (job) => job,
  rowGroupRows?: number,
) {
  const dt = dtOf(day);
  const rows = jobs.flatMap((j) =>
    Array.from({ length: SECTIONS }, (_, i) =>
      syntheticRow(TABLE, runId, dt, j, { section_index: i, campaign_id: campaignOf(j) }),
    ),
  );
  const files =
    rows.length > 0
      ? [await writeDataFile(storage, TABLE, `${runId}-0`, dt, rows, rowGroupRows ? { rowGroupRows } : {})]
      : [];
  await commitRun(storage, catalog, {
    table: TABLE,
    runId,
    files,
    now: new Date(`${dt}T10:00:00Z`),
    changeBase: supersedeJobs(storage, catalog, rule),
  });
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const onlyJobs = (jobs: readonly number[]): SupersedeRule => ({ jobs: new Set(jobs), listings: new Map() });

async function rowsOf(catalog: FileCatalog) {
  return (await readIcebergTable(catalog.tableLocation(TABLE)))
    .map((r) => `${r.job_id}/${r.section_index}/${r.run_id}`)
    .sort();
}

const expectedRows = (newest: ReadonlyMap<number, string>) =>
  [...newest].flatMap(([j, run]) => range(0, SECTIONS).map((i) => `${j}/${i}/${run}`)).sort();

describe('current table supersession reads only what can hold the run’s jobs', () => {
  it('opens only the data files whose job_id bounds hold a job of the run, and supersedes their rows', async () => {
    // Prepare: 12 runs of 200 jobs each, disjoint ranges: 12 files with tight bounds.
    const storage = new ReadCountingStorage(await mkdtemp(join(tmpdir(), 'scan-files-')));
    const catalog = new FileCatalog(storage);
    const newest = new Map<number, string>();
    for (let r = 0; r < 12; r++) {
      const jobs = range(1 + r * 200, 200);
      await commitSections(storage, catalog, `run-${r}`, r % 5, jobs, onlyJobs(jobs));
      for (const j of jobs) newest.set(j, `run-${r}`);
    }
    // Act: a run exporting 5 jobs of run-3's range and one 404 job of run-9's range.
    const exported = [601, 650, 700, 750, 799];
    const notFound = 1_900;
    storage.counting = true;
    await commitSections(storage, catalog, 'run-new', 6, exported, onlyJobs([...exported, notFound]));
    storage.counting = false;
    // Assert: of the older data files, only run-3's and run-9's were read, and only in part.
    expect(storage.dataFilesRead()).toEqual([
      `iceberg/${TABLE}/data/dt=${dtOf(3)}/run-3-0.parquet`,
      `iceberg/${TABLE}/data/dt=${dtOf(4)}/run-9-0.parquet`,
    ]);
    for (const key of storage.dataFilesRead()) {
      const size = (await stat(join(storage.location, key))).size;
      expect(storage.bytes.get(key)).toBeLessThanOrEqual(size);
    }
    for (const j of exported) newest.set(j, 'run-new');
    newest.delete(notFound);
    expect(await rowsOf(catalog)).toEqual(expectedRows(newest));
  });

  it('reads of a large file only the row groups whose statistics hold a job of the run, and only their ids', async () => {
    // Prepare: one file of 20,000 jobs sorted by job_id, in row groups of 3,000 rows (1,000 jobs).
    const storage = new ReadCountingStorage(await mkdtemp(join(tmpdir(), 'scan-groups-')));
    const catalog = new FileCatalog(storage);
    const all = range(1, 20_000);
    await commitSections(storage, catalog, 'run-big', 0, all, onlyJobs(all), (j) => j, 3_000);
    const bigKey = `iceberg/${TABLE}/data/dt=${dtOf(0)}/run-big-0.parquet`;
    const size = (await stat(join(storage.location, bigKey))).size;
    // Act: a run exporting 3 jobs, all in one row group.
    const exported = [10_001, 10_050, 10_100];
    storage.counting = true;
    await commitSections(storage, catalog, 'run-new', 1, exported, onlyJobs(exported));
    storage.counting = false;
    // Assert: a footer and one group's job_id chunk: a small part of the file.
    expect(storage.bytes.get(bigKey)).toBeLessThan(size / 20);
    const newest = new Map(all.map((j) => [j, 'run-big']));
    for (const j of exported) newest.set(j, 'run-new');
    expect(await rowsOf(catalog)).toEqual(expectedRows(newest));
  });

  it('drops a job its complete listing no longer holds, opening only files whose campaign bounds hold that campaign', async () => {
    // Prepare: 6 runs of 100 jobs; the jobs of run r belong to campaign 1,000 + r.
    const storage = new ReadCountingStorage(await mkdtemp(join(tmpdir(), 'scan-listing-')));
    const catalog = new FileCatalog(storage);
    const campaignOf = (j: number) => 1_000 + Math.floor((j - 1) / 100);
    const newest = new Map<number, string>();
    for (let r = 0; r < 6; r++) {
      const jobs = range(1 + r * 100, 100);
      await commitSections(storage, catalog, `run-${r}`, r, jobs, onlyJobs(jobs), campaignOf);
      for (const j of jobs) newest.set(j, `run-${r}`);
    }
    // Act: campaign 1,002 (run-2's jobs 201–300) listed completely without job 250; nothing
    // exported. Listed in descending order: the sorted ids the commit builds take any order.
    const listing = new SortedIds(Float64Array.from(range(201, 100).filter((j) => j !== 250)).reverse());
    storage.counting = true;
    await commitSections(storage, catalog, 'run-new', 7, [], {
      jobs: new Set(),
      listings: new Map([[1_002, listing]]),
    });
    storage.counting = false;
    // Assert
    expect(storage.dataFilesRead()).toEqual([`iceberg/${TABLE}/data/dt=${dtOf(2)}/run-2-0.parquet`]);
    newest.delete(250);
    expect(await rowsOf(catalog)).toEqual(expectedRows(newest));
  });
});

describe('anyWithin', () => {
  const ids = Float64Array.from([3, 10, 20]);
  it('finds an id inside a range that does not reach the extremes of the ids', () => {
    expect(anyWithin(ids, 9, 11)).toBe(true);
    expect(anyWithin(ids, 11, 19)).toBe(false);
    expect(anyWithin(ids, 21, undefined)).toBe(false);
    expect(anyWithin(ids, undefined, 3)).toBe(true);
    expect(anyWithin(new Float64Array(0), undefined, undefined)).toBe(false);
  });
});

describe('SortedIds', () => {
  it('holds exactly the ids it was given, in any order and repeated, ids past 2^31 included', () => {
    const big = 4_000_000_000;
    const ids = new SortedIds(Float64Array.from([big + 9, 3, big, 3, 17, big + 9]));
    for (const id of [3, 17, big, big + 9]) expect(ids.has(id)).toBe(true);
    for (const id of [0, 2, 4, 16, 18, big - 1, big + 1, big + 10]) expect(ids.has(id)).toBe(false);
    expect(new SortedIds(new Float64Array(0)).has(0)).toBe(false);
  });
});

describe('PositionRuns', () => {
  it('gives back every position added, in order, while keeping consecutive ones as runs', () => {
    const runs = new PositionRuns();
    for (const pos of [0, 1, 2, 5, 7, 8]) runs.add(pos);
    expect([...runs.positions()]).toEqual([0, 1, 2, 5, 7, 8]);
    expect(runs.count).toBe(6);
  });
});

describe('current table supersession in run order', () => {
  it('supersedes only rows of older runs: a newer run’s file is not opened, a file of several runs is read row by row', async () => {
    // Prepare: one file of two runs (as a compaction writes), run-a (older) and run-c (newer),
    // jobs 1-3; and a file of run-c alone, jobs 1-2.
    const storage = new ReadCountingStorage(await mkdtemp(join(tmpdir(), 'scan-order-')));
    const catalog = new FileCatalog(storage);
    const dt = dtOf(0);
    const row = (run: string, job: number) =>
      syntheticRow(TABLE, run, dt, job, { section_index: 0, campaign_id: 7 });
    const mixed = await writeDataFile(storage, TABLE, 'compacted-0', dt, [
      ...[1, 2, 3].map((j) => row('run-a', j)),
      ...[1, 2, 3].map((j) => row('run-c', j)),
    ]);
    const newer = await writeDataFile(
      storage,
      TABLE,
      'run-c-1',
      dt,
      [1, 2].map((j) => row('run-c', j)),
    );
    await commitRun(storage, catalog, {
      table: TABLE,
      runId: 'engine',
      files: [mixed, newer],
      now: new Date(`${dt}T10:00:00Z`),
    });
    // Act: run-b, older than run-c, commits late, superseding jobs 1 and 2 and listing campaign 7 completely as [1, 2].
    const rule: SupersedeRule = {
      jobs: new Set([1, 2]),
      listings: new Map([[7, new SortedIds(Float64Array.from([1, 2]))]]),
      runId: 'run-b',
    };
    storage.counting = true;
    await commitRun(storage, catalog, {
      table: TABLE,
      runId: 'run-b',
      files: [],
      now: new Date(`${dt}T11:00:00Z`),
      changeBase: supersedeJobs(storage, catalog, rule),
    });
    storage.counting = false;
    // Assert: run-a's rows went (jobs 1, 2 exported, job 3 left out of the listing); run-c's all stay.
    expect(storage.dataFilesRead()).toEqual([`iceberg/${TABLE}/data/dt=${dt}/compacted-0.parquet`]);
    expect(await rowsOf(catalog)).toEqual(['1/0/run-c', '1/0/run-c', '2/0/run-c', '2/0/run-c', '3/0/run-c']);
  });
});

describe('idColumnGroups of one run', () => {
  it('gives only the ids of the rows of that run from a file of several runs, and every id without one', async () => {
    // Prepare: a file of two runs' rows, as another engine's compaction writes one.
    const storage = new LocalStorage(await mkdtemp(join(tmpdir(), 'scan-of-run-')));
    const dt = dtOf(0);
    const row = (run: string, job: number) =>
      syntheticRow(TABLE, run, dt, job, { section_index: 0, campaign_id: 7 });
    const mixed = await writeDataFile(storage, TABLE, 'compacted-0', dt, [
      ...[1, 2, 3].map((j) => row('run-a', j)),
      ...[4, 5].map((j) => row('run-b', j)),
      row('run-a', 6),
    ]);
    const jobsOf = async (ofRun?: string) => {
      const jobs: number[] = [];
      for await (const group of idColumnGroups(storage, mixed.key, mixed.bytes, ['job_id'], ofRun))
        jobs.push(...group.job_id);
      return jobs;
    };
    // Act and assert
    expect(await jobsOf('run-b')).toEqual([4, 5]);
    expect(await jobsOf('run-a')).toEqual([1, 2, 3, 6]);
    expect(await jobsOf('run-c')).toEqual([]);
    expect(await jobsOf()).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
