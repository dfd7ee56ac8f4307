import { zstdDecompressSync } from 'node:zlib';
import fc from 'fast-check';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { appendReportRows } from '../../../shared/export/format/flatten.js';
import { TableBuffer } from '../../../shared/export/format/table-buffer.js';
import {
  type Cell,
  type Column,
  type ColumnType,
  FROZEN_TABLES,
  REPORT_TABLES,
  type Row,
  TABLE_NAMES,
  TABLES,
  type TableDef,
} from '../../../shared/export/tables.js';
import {
  ColumnBuffer,
  encodeParquet,
  encodeParquetColumns,
  encodeRowGroupByColumn,
} from '../../../shared/parquet/encode.js';
import {
  type DuckDb,
  type JsRow,
  openDuckDb,
  parquetCodecs,
  parquetSchema,
  readParquet,
} from '../../helpers/duckdb.js';
import { reportArb } from '../../helpers/reports.js';

// ---- Rows of any table, built from TABLES: hard values for every column type -------------

const HARD_STRINGS = [
  'plain',
  '',
  'emoji 😀👍🏽 and CJK 漢字かな한국어',
  'quotes \' " ` and \\ backslash',
  'new\nline\r\ttab',
  'null',
  'NUL \u0000 and U+2028 \u2028',
  'Ünïcödé ĉàfé',
  '\uE000 private use, \u{10FFFF} last code point',
  '😀 first: above U+E000 in UTF-8 order, below it in UTF-16',
];
const HARD_VALUES: Record<ColumnType, (row: number) => Cell[]> = {
  string: (row) => [...HARD_STRINGS, `unique ${row}`],
  int: () => [0, -1, 1, 2_147_483_647, -2_147_483_648, 42],
  bigint: () => [0, 2 ** 31, 3_000_000_001, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, -1],
  boolean: () => [true, false],
  timestamp: () => [
    new Date('2026-11-22T03:04:05.678Z'),
    new Date(0),
    new Date('1969-12-31T23:59:59.999Z'),
    new Date('2999-01-01T00:00:00.000Z'),
  ],
  'array<string>': (row) => [[], ['one'], [null], ['a', null, '😀', ''], HARD_STRINGS, [`unique ${row}`]],
};

/** Row `i` of `table`: cycles through the hard values of each column (and NULL where allowed). */
function hardRow(table: TableDef, i: number): Row {
  const row: Row = {};
  table.columns.forEach((column, c) => {
    const values = HARD_VALUES[column.type](i);
    if (column.nullable) values.push(null);
    row[column.name] = values[(i * 7 + c) % values.length]!;
  });
  return row;
}

const hardRows = (table: TableDef, n: number) => Array.from({ length: n }, (_, i) => hardRow(table, i));

/** What DuckDB's JS conversion gives back for a cell of `column`. */
function expected(column: Column, cell: Cell): unknown {
  if (cell === null) return null;
  if (column.type === 'bigint') return BigInt(cell as number);
  if (column.type === 'array<string>') return [...(cell as string[])];
  return cell;
}

function expectRoundTrip(table: TableDef, rows: readonly Row[], back: readonly JsRow[]): void {
  expect(back).toHaveLength(rows.length);
  rows.forEach((row, i) => {
    const want = Object.fromEntries(table.columns.map((c) => [c.name, expected(c, row[c.name] ?? null)]));
    expect(back[i]).toEqual(want);
  });
}

const DUCKDB_TYPES: Record<ColumnType, string> = {
  string: 'VARCHAR',
  int: 'INTEGER',
  bigint: 'BIGINT',
  boolean: 'BOOLEAN',
  timestamp: 'TIMESTAMP WITH TIME ZONE',
  'array<string>': 'VARCHAR[]',
};

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

describe('encodeParquet', () => {
  describe.each(TABLE_NAMES)('table %s', (name) => {
    const table = TABLES[name];
    const rows = hardRows(table, 120);
    const bytes = encodeParquet(table, rows);

    it('reads back in DuckDB with the same values', async () => {
      expectRoundTrip(table, rows, await readParquet(db, bytes));
    });

    it('has the columns of TABLES, in order, with their contract types', async () => {
      const columns = await db.columns(`SELECT * FROM read_parquet(${await db.file(bytes, 'parquet')})`);
      expect(columns).toEqual(table.columns.map((c) => ({ name: c.name, type: DUCKDB_TYPES[c.type] })));
    });

    it('writes the Parquet types Athena reads: UTF8, INT32, INT64, BOOLEAN, UTC TIMESTAMP, 3-level LIST', async () => {
      const schema = await parquetSchema(db, bytes);
      expect(schema.map((e) => e.type)).not.toContain('INT96');
      const leaves = schema.slice(1);
      for (const column of table.columns) {
        const at = leaves.findIndex((e) => e.name === column.name);
        const element = leaves[at]!;
        expect(element.repetition_type).toBe(column.nullable ? 'OPTIONAL' : 'REQUIRED');
        switch (column.type) {
          case 'string':
            expect(element).toMatchObject({ type: 'BYTE_ARRAY', converted_type: 'UTF8' });
            break;
          case 'int':
            expect(element.type).toBe('INT32');
            break;
          case 'bigint':
            expect(element.type).toBe('INT64');
            break;
          case 'boolean':
            expect(element.type).toBe('BOOLEAN');
            break;
          case 'timestamp':
            expect(element).toMatchObject({ type: 'INT64', converted_type: 'TIMESTAMP_MILLIS' });
            expect(element.logical_type).toContain('isAdjustedToUTC=1');
            break;
          case 'array<string>':
            expect(element).toMatchObject({ type: null, converted_type: 'LIST', num_children: 1n });
            expect(leaves[at + 1]).toMatchObject({
              name: 'list',
              repetition_type: 'REPEATED',
              num_children: 1n,
            });
            expect(leaves[at + 2]).toMatchObject({
              name: 'element',
              type: 'BYTE_ARRAY',
              converted_type: 'UTF8',
              repetition_type: 'OPTIONAL',
            });
            break;
        }
      }
    });

    it('compresses with ZSTD', async () => {
      expect(await parquetCodecs(db, bytes)).toEqual(['ZSTD']);
    });
  });

  it('reads back in hyparquet too (a second, independent reader)', async () => {
    const table = TABLES.questions;
    const rows = hardRows(table, 50);
    const bytes = encodeParquet(table, rows);
    const back = await parquetReadObjects({
      file: bytes.buffer as ArrayBuffer,
      compressors: { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) },
    });
    expect(back.map((r) => r.photos)).toEqual(rows.map((r) => r.photos));
    expect(back.map((r) => r.response)).toEqual(rows.map((r) => r.response));
    expect(back.map((r) => r.job_id)).toEqual(rows.map((r) => BigInt(r.job_id as number)));
  });

  it('refuses to write a file without rows', () => {
    expect(() => encodeParquet(TABLES.media_images, [])).toThrow(ExporterError);
    expect(() => encodeParquet(TABLES.media_images, [])).toThrow(/media_images: no rows/);
    const empty = TABLES.questions.columns.map(() => []);
    expect(() => encodeParquetColumns(TABLES.questions, empty)).toThrow(/questions: no rows/);
  });

  it('encodes a row group column by column to the same bytes, asking for each column only after the one before', async () => {
    const table = TABLES.questions;
    const rows = hardRows(table, 300);
    const buffer = new ColumnBuffer(table);
    for (const row of rows) buffer.add(row);
    const asked: number[] = [];
    const bytes = await encodeRowGroupByColumn(
      table,
      rows.length,
      async (i) => {
        asked.push(i);
        return buffer.columns[i]!;
      },
      { pageBytes: 1024 },
    );
    expect(asked).toEqual(table.columns.map((_, i) => i));
    expect(
      Buffer.from(bytes).equals(
        Buffer.from(encodeParquetColumns(table, buffer.columns, { pageBytes: 1024 })),
      ),
    ).toBe(true);
    expectRoundTrip(table, rows, await readParquet(db, bytes));
    await expect(encodeRowGroupByColumn(table, 0, async () => [])).rejects.toThrow(/questions: no rows/);
    await expect(encodeRowGroupByColumn(table, 2, async () => [null])).rejects.toThrow(/1 cells for 2 rows/);
  });

  it('writes columns whose every value is NULL, an empty list or a list of NULLs', async () => {
    const table = TABLES.questions;
    const empty = (i: number): Row => {
      const row = hardRow(table, i);
      for (const c of table.columns) if (c.nullable) row[c.name] = null;
      row.response = i % 2 ? [] : [null];
      return row;
    };
    const rows = Array.from({ length: 40 }, (_, i) => empty(i));
    const bytes = encodeParquet(table, rows);
    expectRoundTrip(table, rows, await readParquet(db, bytes));
    // No values, no dictionary: an empty dictionary page is not something every reader accepts.
    const meta = await db.all(
      `SELECT encodings FROM parquet_metadata(${await db.file(bytes, 'parquet')}) WHERE path_in_schema = 'comment'`,
    );
    expect(String(meta[0]?.encodings)).not.toContain('DICTIONARY');
  });

  it('splits many rows into row groups and pages, dictionary and PLAIN, and stays readable', async () => {
    const table = TABLES.questions;
    const rows = hardRows(table, 5000);
    // item values: unique per row, so PLAIN is chosen for those columns
    for (const [i, row] of rows.entries()) row.threads_json = `{"row":${i},"text":"${'x'.repeat(i % 50)}"}`;
    const bytes = encodeParquet(table, rows, { rowGroupRows: 1200, pageBytes: 4096 });
    expectRoundTrip(table, rows, await readParquet(db, bytes));

    const file = await db.file(bytes, 'parquet');
    const groups = await db.all(
      `SELECT count(DISTINCT row_group_id)::INT AS n FROM parquet_metadata(${file})`,
    );
    expect(groups[0]?.n).toBe(5);
    const encodings = await db.all(
      `SELECT path_in_schema AS path, encodings FROM parquet_metadata(${file}) WHERE row_group_id = 0`,
    );
    const byPath = Object.fromEntries(encodings.map((e) => [String(e.path), String(e.encodings)]));
    expect(byPath.threads_json).not.toContain('DICTIONARY');
    expect(byPath.question).toContain('RLE_DICTIONARY');
    // The footer's offsets and sizes lead exactly through each chunk's pages, whose value counts add up.
    const metadata = parquetMetadata(bytes.buffer as ArrayBuffer);
    let dataPages = 0;
    for (const group of metadata.row_groups) {
      for (const chunk of group.columns) {
        const meta = chunk.meta_data!;
        const start = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
        const end = start + Number(meta.total_compressed_size);
        const reader = { view: new DataView(bytes.buffer, bytes.byteOffset), offset: start };
        let values = 0;
        while (reader.offset < end) {
          const header = parquetHeader(reader);
          reader.offset += header.compressed_page_size;
          if (header.type === 'DATA_PAGE') {
            dataPages++;
            values += header.data_page_header!.num_values;
          }
        }
        expect(reader.offset).toBe(end);
        expect(BigInt(values)).toBe(meta.num_values);
      }
    }
    const chunks = metadata.row_groups.length * metadata.row_groups[0]!.columns.length;
    expect(dataPages).toBeGreaterThan(chunks);
  });

  it('writes min/max statistics that let DuckDB prune row groups without losing rows', async () => {
    const table = TABLES.questions;
    const rows = hardRows(table, 3000);
    const bytes = encodeParquet(table, rows, { rowGroupRows: 500 });
    const file = await db.file(bytes, 'parquet');
    for (const column of [
      'job_id',
      'section_index',
      'logic_index',
      'question',
      'response_is_list',
      'exported_at',
    ]) {
      // Every hard value, and a few of the per-row unique strings (one query each keeps it fast).
      const byKey = new Map(
        rows.map((r) => r[column]).map((v) => [v instanceof Date ? v.getTime() : v, v] as const),
      );
      byKey.delete(null);
      const distinct = [...byKey.values()].filter(
        (v, i) => typeof v !== 'string' || !v.startsWith('unique ') || i % 100 === 0,
      );
      for (const value of distinct) {
        const literal =
          value instanceof Date
            ? `'${value.toISOString()}'::TIMESTAMPTZ`
            : typeof value === 'string'
              ? '$1'
              : String(value);
        const found = await db.all(
          `SELECT count(*)::INT AS n FROM read_parquet(${file}) WHERE ${column} = ${literal}`,
          typeof value === 'string' ? [value] : undefined,
        );
        const want = rows.filter((r) =>
          value instanceof Date ? (r[column] as Date).getTime() === value.getTime() : r[column] === value,
        ).length;
        expect({ column, value, n: found[0]?.n }).toEqual({ column, value, n: want });
      }
    }
    const stats = await db.all(
      `SELECT row_group_id AS g, stats_min_value AS min, stats_max_value AS max, stats_null_count AS nulls
       FROM parquet_metadata(${file}) WHERE path_in_schema = 'logic_index' ORDER BY g`,
    );
    stats.forEach((s, g) => {
      const values = rows.slice(g * 500, (g + 1) * 500).map((r) => r.logic_index as number | null);
      const present = values.filter((v) => v !== null);
      expect(s).toEqual({
        g: BigInt(g),
        min: String(Math.min(...present)),
        max: String(Math.max(...present)),
        nulls: BigInt(values.length - present.length),
      });
    });
  });

  describe('string statistics', () => {
    const table = TABLES.questions;
    const runId = '20261122T031500Z-a1b2c3';
    // Question texts repeat (dictionary-encoded, so they get bounds) and are longer than 64 bytes.
    const texts = [
      `Was the entrance clean and free of obstacles when you arrived? ${'Describe it. '.repeat(3)}`,
      `Étiez-vous accueilli à l'entrée du magasin par un membre du personnel ? ${'😀'.repeat(5)}`,
      `Zum Schluss: würden Sie diesen Laden Ihren Freunden empfehlen? ${'ü'.repeat(40)}`,
      'short question',
    ];
    const rows = Array.from({ length: 400 }, (_, i) => ({
      ...hardRow(table, i),
      run_id: runId,
      // Group g (100 rows each) holds texts[g % 4] and texts[(g + 1) % 4] only.
      question: texts[(Math.floor(i / 100) + (i % 2)) % texts.length]!,
    }));
    const bytes = encodeParquet(table, rows, { rowGroupRows: 100 });
    const utf8 = (s: string) => Buffer.from(s, 'utf8');
    const sorted = (values: string[]) => [...values].sort((a, b) => Buffer.compare(utf8(a), utf8(b)));

    it('keeps strings of up to 64 bytes exact (run ids)', async () => {
      const stats = await db.all(
        `SELECT stats_min_value AS min, stats_max_value AS max, min_is_exact, max_is_exact
         FROM parquet_metadata(${await db.file(bytes, 'parquet')}) WHERE path_in_schema = 'run_id'`,
      );
      expect(stats).toHaveLength(4);
      for (const s of stats)
        expect(s).toEqual({ min: runId, max: runId, min_is_exact: true, max_is_exact: true });
    });

    it('cuts longer strings at 64 bytes: a prefix below, a rounded-up prefix above, marked inexact', async () => {
      const stats = await db.all(
        `SELECT row_group_id AS g, stats_min_value AS min, stats_max_value AS max, min_is_exact, max_is_exact
         FROM parquet_metadata(${await db.file(bytes, 'parquet')}) WHERE path_in_schema = 'question'
         ORDER BY g`,
      );
      stats.forEach((s, g) => {
        const [min, max] = sorted([texts[g % 4]!, texts[(g + 1) % 4]!]) as [string, string];
        const minBytes = utf8(String(s.min));
        const maxBytes = utf8(String(s.max));
        expect(minBytes.length).toBeLessThanOrEqual(64);
        expect(maxBytes.length).toBeLessThanOrEqual(64);
        expect(Buffer.compare(minBytes, utf8(min))).toBeLessThanOrEqual(0);
        expect(Buffer.compare(maxBytes, utf8(max))).toBeGreaterThanOrEqual(0);
        if (utf8(min).length > 64) {
          expect(min.startsWith(String(s.min))).toBe(true);
          expect(minBytes.length).toBeGreaterThan(60); // cut near 64 bytes, not at 16
          expect(s.min_is_exact).toBe(false);
        } else {
          expect({ min: s.min, exact: s.min_is_exact }).toEqual({ min, exact: true });
        }
        expect(s.max_is_exact).toBe(utf8(max).length <= 64);
      });
      // The 64-byte prefix of the first text, exactly (16 bytes was the old cut).
      expect(stats[0]?.min).toBe(utf8(texts[0]!).subarray(0, 64).toString('utf8'));
    });

    it('still lets DuckDB find every long value with a filter', async () => {
      const file = await db.file(bytes, 'parquet');
      for (const text of texts) {
        const found = await db.all(
          `SELECT count(*)::INT AS n FROM read_parquet(${file}) WHERE question = $1`,
          [text],
        );
        expect({ text, n: found[0]?.n }).toEqual({ text, n: rows.filter((r) => r.question === text).length });
      }
      const ranged = await db.all(
        `SELECT count(*)::INT AS n FROM read_parquet(${file}) WHERE question >= $1`,
        [texts[2]!],
      );
      expect(ranged[0]?.n).toBe(
        rows.filter((r) => Buffer.compare(utf8(r.question), utf8(texts[2]!)) >= 0).length,
      );
    });

    it('writes no max when no short upper bound exists', async () => {
      const last = '\u{10FFFF}'.repeat(20);
      const file = encodeParquet(
        table,
        [0, 1, 2].map((i) => ({ ...hardRow(table, i), question: last })),
      );
      const stats = await db.all(
        `SELECT stats_min_value AS min, stats_max_value AS max
         FROM parquet_metadata(${await db.file(file, 'parquet')}) WHERE path_in_schema = 'question'`,
      );
      expect(stats).toEqual([{ min: '\u{10FFFF}'.repeat(16), max: null }]);
      const found = await db.all(
        `SELECT count(*)::INT AS n FROM read_parquet(${await db.file(file, 'parquet')}) WHERE question = $1`,
        [last],
      );
      expect(found[0]?.n).toBe(3);
    });
  });

  it('encodes the rows of any valid report, and DuckDB reads them back unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(reportArb, { minLength: 1, maxLength: 3 }), async (reports) => {
        const buffer = new TableBuffer();
        const rowsByTable = new Map<string, Row[]>();
        const sink = {
          add: (table: (typeof REPORT_TABLES)[number] | 'campaigns' | 'jobs', row: Row) => {
            buffer.add(table, row);
            rowsByTable.set(table, [...(rowsByTable.get(table) ?? []), row]);
          },
        };
        for (const r of reports) appendReportRows(sink, r, { campaignId: 1, jobId: r.job.id }, ctxOf());
        for (const name of REPORT_TABLES) {
          if (buffer.rowCount(name) === 0) continue; // a table without rows gets no file
          // A TableBuffer of no run is a freeze run's: the frozen tables.
          const bytes = encodeParquetColumns(FROZEN_TABLES[name], buffer.columns(name));
          expectRoundTrip(FROZEN_TABLES[name], rowsByTable.get(name) ?? [], await readParquet(db, bytes));
        }
      }),
      { numRuns: 15 },
    );
  });

  describe('refuses cells that do not fit the column', () => {
    // The frozen questions table: section_id is required there.
    const table = FROZEN_TABLES.questions;
    const good = hardRow(table, 0);
    it.each<[string, Cell]>([
      ['job_id', null],
      ['section_id', null],
      ['response_is_list', null],
      ['question_index', undefined as unknown as Cell],
      ['job_id', '42'],
      ['job_id', 2 ** 60],
      ['section_index', 1.5],
      ['section_index', 2 ** 31],
      ['response_is_list', 'true'],
      ['exported_at', '2026-11-22'],
      ['exported_at', new Date(Number.NaN)],
      ['response', null],
      ['response', [1 as unknown as string]],
      ['question', 7],
    ])('%s = %j', (column, value) => {
      expect(() => encodeParquet(table, [good, { ...good, [column]: value }])).toThrow(ExporterError);
    });

    it('a row without a required column', () => {
      const { run_id: _, ...missing } = good;
      expect(() => encodeParquet(table, [missing])).toThrow(/run_id/);
    });
  });
});

function ctxOf() {
  return { runId: 'prop-run', exportedAt: new Date('2026-01-02T03:04:05.006Z') };
}
