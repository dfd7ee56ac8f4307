/**
 * The Parquet a run writes follows its schema contract: `freeze` (and a run whose records
 * predate the option) the frozen tables, required columns and all, as every release before;
 * `evolve` the evolve tables, `_rescued` last. Publishing regroups a run's staged files with
 * its contract's table, so the run's manifest must carry it.
 */
import { parquetMetadata } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonLinesBuffer } from '../../../../shared/export/format/jsonl.js';
import { parquetTableOf, TableBuffer } from '../../../../shared/export/format/table-buffer.js';
import { publishRun } from '../../../../shared/export/run/publish.js';
import { stageStep } from '../../../../shared/export/run/staging.js';
import type { RunRef } from '../../../../shared/export/state/records.js';
import {
  type Cell,
  type ColumnType,
  FROZEN_TABLES,
  RESCUED_COLUMN,
  type Row,
  TABLES,
  type TableName,
} from '../../../../shared/export/tables.js';
import { icebergParquetTable } from '../../../../shared/iceberg/schema.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { type DuckDb, openDuckDb } from '../../../helpers/duckdb.js';
import { tempDir } from '../../../helpers/export.js';

const RUN: RunRef = { run_id: '20261122T031500Z-a1b2c3', dt: '2026-11-22', mode: 'full' };
const EVOLVE: RunRef = { ...RUN, schema_contract: 'evolve' };

const SAMPLE: Record<ColumnType, Cell> = {
  string: 's',
  int: 1,
  bigint: 2,
  boolean: true,
  timestamp: new Date('2026-11-22T00:00:00Z'),
  'array<string>': ['a'],
};

/** One row of every column of `table` as `run` writes it, `_rescued` set where there is one. */
function rowOf(run: Pick<RunRef, 'schema_contract'>, table: TableName, jobId: number): Row {
  const row: Row = {};
  for (const c of parquetTableOf(run, table).columns) row[c.name] = SAMPLE[c.type];
  return { ...row, job_id: jobId, ...(RESCUED_COLUMN in row && { [RESCUED_COLUMN]: `{"n":${jobId}}` }) };
}

/** Each column of an encoded file of a table without lists: name and whether it is REQUIRED. */
function schemaOf(bytes: Uint8Array): [string, boolean][] {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return parquetMetadata(file)
    .schema.slice(1)
    .map((e): [string, boolean] => [e.name, e.repetition_type === 'REQUIRED']);
}

describe('parquetTableOf', () => {
  it('picks the table of the run’s format and contract', () => {
    expect(parquetTableOf(undefined, 'reports')).toBe(FROZEN_TABLES.reports);
    expect(parquetTableOf({}, 'reports')).toBe(FROZEN_TABLES.reports);
    expect(parquetTableOf({ schema_contract: 'freeze' }, 'reports')).toBe(FROZEN_TABLES.reports);
    expect(parquetTableOf({ schema_contract: 'evolve' }, 'reports')).toBe(TABLES.reports);
    expect(parquetTableOf({ table_format: 'iceberg' }, 'reports')).toBe(
      icebergParquetTable('reports', 'freeze'),
    );
    expect(parquetTableOf({ table_format: 'iceberg', schema_contract: 'evolve' }, 'reports')).toBe(
      icebergParquetTable('reports', 'evolve'),
    );
  });
});

describe('the files of each contract', () => {
  it('freeze: the frozen columns, required where they were', () => {
    const buffer = new TableBuffer(RUN);
    buffer.add('sections', rowOf(RUN, 'sections', 1));
    const schema = schemaOf(buffer.encode('sections'));
    expect(schema.map(([name]) => name)).toEqual(FROZEN_TABLES.sections.columns.map((c) => c.name));
    expect(schema).toContainEqual(['section_title', true]);
  });

  it('evolve: the evolve columns, _rescued last and optional, the relaxed values optional', () => {
    const buffer = new TableBuffer(EVOLVE);
    buffer.add('sections', rowOf(EVOLVE, 'sections', 1));
    const schema = schemaOf(buffer.encode('sections'));
    expect(schema.map(([name]) => name)).toEqual(TABLES.sections.columns.map((c) => c.name));
    expect(schema.at(-1)).toEqual([RESCUED_COLUMN, false]);
    expect(schema).toContainEqual(['section_title', false]);
    expect(schema).toContainEqual(['job_id', true]);
  });
});

describe('publishing an evolve run', () => {
  let db: DuckDb;
  let storage: LocalStorage;

  beforeAll(async () => {
    db = await openDuckDb();
    storage = new LocalStorage(await tempDir('publish-evolve'));
  });
  afterAll(async () => {
    await db?.close();
  });

  it('regroups its staged files with the evolve table: _rescued published; with the frozen one it refuses', async () => {
    const staged = [];
    for (let u = 0; u < 2; u++) {
      const rows = new TableBuffer(EVOLVE);
      rows.add('reports', rowOf(EVOLVE, 'reports', u + 1));
      staged.push(
        ...(await stageStep(storage, RUN.run_id, 'reports', `c1-u${u}-a1`, rows, new JsonLinesBuffer())),
      );
    }
    const files = await publishRun(storage, EVOLVE, staged);
    const reports = files.find((f) => f.table_or_entity === 'reports')!;
    const body = (await storage.get(reports.key))!.body;
    const rows = await db.all(
      `SELECT job_id, ${RESCUED_COLUMN} AS rescued FROM read_parquet(${await db.file(body, 'parquet')}) ORDER BY job_id`,
    );
    expect(rows).toEqual([
      { job_id: 1n, rescued: '{"n":1}' },
      { job_id: 2n, rescued: '{"n":2}' },
    ]);
    await expect(publishRun(storage, RUN, staged)).rejects.toThrow();
  });
});
