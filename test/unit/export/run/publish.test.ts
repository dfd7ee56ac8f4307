import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendReportRows } from '../../../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../../../shared/export/format/table-buffer.js';
import { rawLine } from '../../../../shared/export/raw-lines.js';
import { publishRun, READ_AHEAD_FILES } from '../../../../shared/export/run/publish.js';
import { stageStep } from '../../../../shared/export/run/staging.js';
import type { FileEntry, RunRef, StagedFile } from '../../../../shared/export/state/records.js';
import { FROZEN_TABLES, type TableName } from '../../../../shared/export/tables.js';
import type { ParquetTable } from '../../../../shared/parquet/schema.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { readRange, type Storage } from '../../../../shared/storage/storage.js';
import { type DuckDb, openDuckDb } from '../../../helpers/duckdb.js';
import { tempDir } from '../../../helpers/export.js';
import { realisticReports } from '../../../helpers/realistic-reports.js';

const RUN: RunRef = { run_id: '20261122T031500Z-a1b2c3', dt: '2026-11-22', mode: 'full' };
const UNITS = 6;
const PER_UNIT = 5;

describe('publishRun', () => {
  let db: DuckDb;
  let storage: LocalStorage;
  let staged: FileEntry[];

  /** Stages UNITS units of PER_UNIT realistic reports, as export-unit does. */
  beforeAll(async () => {
    db = await openDuckDb();
    storage = new LocalStorage(await tempDir('publish'));
    const reports = realisticReports(7);
    staged = [];
    for (let u = 0; u < UNITS; u++) {
      const rows = new TableBuffer();
      const lines = new JsonLinesBuffer();
      for (let i = 0; i < PER_UNIT; i++) {
        const jobId = u * PER_UNIT + i + 1;
        const ids = { campaignId: 1, jobId };
        const report = reports.report(jobId, 1);
        appendReportRows(rows, report, ids, {
          runId: RUN.run_id,
          exportedAt: new Date('2026-11-22T03:20:00Z'),
        });
        lines.add(rawLine(RUN.run_id, '2026-11-22T03:20:00.000Z', report, { campaign_id: 1, job_id: jobId }));
      }
      staged.push(...(await stageStep(storage, RUN.run_id, 'reports', `c1-u${u}-a1`, rows, lines)));
    }
  });

  afterAll(async () => {
    await db?.close();
  });

  /** The rows of Parquet files (objects, or a staged file's range of its step's object), in order, as DuckDB reads them. */
  async function rowsOf(files: readonly Pick<StagedFile, 'key' | 'offset' | 'bytes'>[]): Promise<unknown[]> {
    const rows: unknown[] = [];
    for (const { key, offset, bytes: length } of files) {
      const bytes =
        (offset === undefined
          ? (await storage.get(key))?.body
          : await readRange(storage, key, offset, offset + length)) ?? new Uint8Array();
      rows.push(...(await db.all(`SELECT * FROM read_parquet(${await db.file(bytes, 'parquet')})`)));
    }
    return rows;
  }

  it('publishes one file per table and raw entity, value for value the staged files in order', async () => {
    const files = await publishRun(storage, RUN, staged);

    const tables = [...new Set(staged.map((f) => `${f.format}:${f.table_or_entity}`))].sort();
    expect(files.map((f) => `${f.format}:${f.table_or_entity}`).sort()).toEqual(tables);
    for (const file of files.filter((f) => f.format === 'parquet')) {
      const inputs = staged.filter(
        (f) => f.format === 'parquet' && f.table_or_entity === file.table_or_entity,
      );
      expect(file.key).toBe(`parquet/${file.table_or_entity}/dt=2026-11-22/${RUN.run_id}-0.parquet`);
      expect(await rowsOf([file])).toEqual(await rowsOf(inputs));
      expect(file.rows).toBe(inputs.reduce((n, f) => n + f.rows, 0));
      expect((await storage.get(file.key))?.body.byteLength).toBe(file.bytes);
    }
    const raw = files.find((f) => f.format === 'jsonl');
    const text = gunzipSync((await storage.get(raw?.key ?? ''))?.body ?? new Uint8Array()).toString('utf8');
    const lines = text.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(UNITS * PER_UNIT);
    expect(lines.map((l) => (JSON.parse(l) as { job_id: number }).job_id)).toEqual(
      Array.from({ length: UNITS * PER_UNIT }, (_, i) => i + 1),
    );
  });

  it('splits a table above the size limit into consecutive files that hold every row once', async () => {
    const questions = staged.filter((f) => f.format === 'parquet' && f.table_or_entity === 'questions');
    const limit = Math.max(...questions.map((f) => f.bytes)) * 2; // two or three units' files per output

    const files = (await publishRun(storage, RUN, staged, { maxFileBytes: limit })).filter(
      (f) => f.table_or_entity === 'questions',
    );

    expect(files.length).toBeGreaterThanOrEqual(2);
    expect(files.length).toBeLessThanOrEqual(UNITS / 2);
    expect(files.map((f) => f.key)).toEqual(
      files.map((_, i) => `parquet/questions/dt=2026-11-22/${RUN.run_id}-${i}.parquet`),
    );
    expect(await rowsOf(files)).toEqual(await rowsOf(questions));
  });

  it('writes the same keys and bytes when done again (a publish cut short is simply redone)', async () => {
    const first = await publishRun(storage, RUN, staged);
    const bytes = await Promise.all(first.map(async (f) => (await storage.get(f.key))?.body));

    const second = await publishRun(storage, RUN, [...staged].reverse());

    expect(second).toEqual(first);
    for (const [i, f] of second.entries()) expect((await storage.get(f.key))?.body).toEqual(bytes[i]);
  });

  it('writes one output at a time when asked, the same keys and bytes as two at once', async () => {
    /** `storage`, counting the outputs being streamed at once. */
    const counting = (): { storage: Storage; most: () => number } => {
      let now = 0;
      let most = 0;
      const inner: Storage = storage;
      const wrapped: Storage = {
        location: storage.location,
        put: (key, body, options) => storage.put(key, body, options),
        putStream: async (key, chunks, options) => {
          most = Math.max(most, ++now);
          try {
            return await inner.putStream(key, chunks, options);
          } finally {
            now--;
          }
        },
        get: (key) => storage.get(key),
        getStream: (key) => storage.getStream(key),
        list: (prefix) => storage.list(prefix),
        delete: (keys) => storage.delete(keys),
        stats: () => storage.stats(),
      };
      return { storage: wrapped, most: () => most };
    };
    const two = counting();
    const first = await publishRun(two.storage, RUN, staged);
    const bytes = await Promise.all(first.map(async (f) => (await storage.get(f.key))?.body));

    const one = counting();
    const second = await publishRun(one.storage, RUN, staged, { concurrency: 1 });

    expect(two.most()).toBe(2);
    expect(one.most()).toBe(1);
    expect(second).toEqual(first);
    for (const [i, f] of second.entries()) expect((await storage.get(f.key))?.body).toEqual(bytes[i]);
  });

  it('reads each staged file as its range of the object its step staged, never the object whole, and says which one is missing', async () => {
    const wholeReads: string[] = [];
    const inner: Storage = storage;
    const watched: Storage = {
      location: storage.location,
      put: (key, body, options) => storage.put(key, body, options),
      putStream: (key, chunks, options) => inner.putStream(key, chunks, options),
      get: (key) => {
        wholeReads.push(key);
        return storage.get(key);
      },
      getStream: (key) => storage.getStream(key),
      getRange: (key, start, end) => storage.getRange(key, start, end),
      list: (prefix) => storage.list(prefix),
      delete: (keys) => storage.delete(keys),
      stats: () => storage.stats(),
    };
    const expected = await publishRun(storage, RUN, staged);

    const files = await publishRun(watched, RUN, staged);

    expect(files).toEqual(expected);
    expect(new Set(staged.map((f) => f.key)).size).toBe(UNITS);
    expect(wholeReads.filter((key) => key.includes('/staged/'))).toEqual([]);
    const gone = { ...staged.find((f) => f.format === 'jsonl')!, key: `${RUN.run_id}/gone.staged` };
    // The write that was reading it fails, with the reason as its cause.
    await expect(publishRun(storage, RUN, [gone])).rejects.toMatchObject({
      cause: { message: expect.stringMatching(/gone\.staged \(bytes 0–\d+\) is missing/) },
    });
    // A range shorter than the record says (the object is not the one staged) is no file either.
    const short = { ...staged.find((f) => f.format === 'jsonl')!, bytes: 1e9 };
    await expect(publishRun(storage, RUN, [short])).rejects.toMatchObject({
      cause: { message: expect.stringContaining('is missing') },
    });
  });

  it('reads at most READ_AHEAD_FILES staged Parquet files ahead of an output, however small they are', async () => {
    let reading = 0;
    let most = 0;
    const inner: Storage = storage;
    const watched: Storage = {
      location: storage.location,
      put: (key, body, options) => storage.put(key, body, options),
      putStream: (key, chunks, options) => inner.putStream(key, chunks, options),
      get: async (key) => {
        reading += 1;
        most = Math.max(most, reading);
        // Reads take a while, as on S3, so that the ones started ahead overlap.
        await new Promise((resolve) => setTimeout(resolve, 5));
        const found = await storage.get(key);
        reading -= 1;
        return found;
      },
      getStream: (key) => storage.getStream(key),
      list: (prefix) => storage.list(prefix),
      delete: (keys) => storage.delete(keys),
      stats: () => storage.stats(),
    };
    // One output of 4 × 6 files of a few KB each: the byte bound (16 MiB) alone would read all 24 at once.
    const reports = staged.filter((f) => f.format === 'parquet' && f.table_or_entity === 'reports');
    const inputs = [0, 1, 2, 3].flatMap(() => reports);

    const [file] = await publishRun(watched, RUN, inputs);

    expect(file?.rows).toBe(4 * reports.reduce((n, f) => n + f.rows, 0));
    expect(most).toBe(READ_AHEAD_FILES);
  });

  /** Row groups of a Parquet object, from its footer. */
  async function rowGroupsOf(key: string): Promise<number[]> {
    const bytes = (await storage.get(key))?.body ?? new Uint8Array();
    const rows = await db.all(
      `SELECT row_group_id, any_value(row_group_num_rows)::INT AS n
       FROM parquet_metadata(${await db.file(bytes, 'parquet')}) GROUP BY row_group_id ORDER BY row_group_id`,
    );
    return rows.map((r) => Number(r.n));
  }

  it('gathers the small row groups of many staged units into one per table', async () => {
    const files = await publishRun(storage, RUN, staged);

    for (const file of files.filter((f) => f.format === 'parquet')) {
      const units = staged.filter(
        (f) => f.format === 'parquet' && f.table_or_entity === file.table_or_entity,
      );
      expect(units.length).toBe(UNITS);
      expect(await rowGroupsOf(file.key)).toEqual([file.rows]);
    }
  });

  it('encodes with the table definition it is given for each table (another flavour of the tables)', async () => {
    const asked: TableName[] = [];
    const tableOf = (name: TableName): ParquetTable => {
      asked.push(name);
      return { ...FROZEN_TABLES[name], columns: [...FROZEN_TABLES[name].columns] };
    };

    const files = await publishRun(storage, RUN, staged, { tableOf });

    const parquet = files.filter((f) => f.format === 'parquet').map((f) => f.table_or_entity);
    expect([...asked].sort()).toEqual([...parquet].sort());
    // A table the staged files were not written with is refused, not published with wrong columns.
    const wider = (name: TableName): ParquetTable => ({
      ...FROZEN_TABLES[name],
      columns: [...FROZEN_TABLES[name].columns, { name: 'dt', type: 'string', nullable: false }],
    });
    await expect(publishRun(storage, RUN, staged, { tableOf: wider })).rejects.toThrow(/\bdt\b/);
  });
});
