import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import fc from 'fast-check';
import { parquetReadObjects } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { TABLES } from '../../../shared/export/tables.js';
import { ParquetConcat } from '../../../shared/parquet/concat.js';
import { type EncodeOptions, encodeParquet, tableSchema } from '../../../shared/parquet/encode.js';
import { CHUNK, FILE, META, ROW_GROUP, readFooter } from '../../../shared/parquet/footer.js';
import {
  type Cell,
  INT32_MAX,
  INT32_MIN,
  type ParquetTable,
  type Row,
} from '../../../shared/parquet/schema.js';
import { type ThriftStruct, ThriftWriter } from '../../../shared/parquet/thrift.js';
import { type DuckDb, type JsRow, openDuckDb, readParquet } from '../../helpers/duckdb.js';

/** Every column type, nullable and not, lists with NULL items and empty lists. */
const TABLE: ParquetTable = {
  name: 'every_type',
  columns: [
    { name: 'key', type: 'string', nullable: false },
    { name: 'text', type: 'string', nullable: true },
    { name: 'n', type: 'int', nullable: true },
    { name: 'big', type: 'bigint', nullable: false },
    { name: 'flag', type: 'boolean', nullable: true },
    { name: 'at', type: 'timestamp', nullable: false },
    { name: 'tags', type: 'array<string>', nullable: true },
    { name: 'words', type: 'array<string>', nullable: false },
  ],
};

/** Longer than the 64 bytes statistics keep: the chunk bounds of `key` are cut. */
const LONG_KEY = `${'a long key that repeats in many rows, longer than a statistic '.repeat(2)}`;

/** Row `i`: `key` repeats (dictionary), `text` is unique (PLAIN), every kind of NULL comes round. */
function row(i: number): Row {
  return {
    key: i % 3 === 0 ? `${LONG_KEY}${i % 2}` : `k${i % 5}`,
    text: i % 7 === 3 ? null : `row ${i} ${'é😀'.repeat(i % 4)}`,
    n: i % 6 === 1 ? null : (i * 7919) % 2 ? INT32_MAX - i : INT32_MIN + i,
    big: 3_000_000_000 * (i % 2 ? 1 : -1) + i,
    flag: i % 4 === 2 ? null : i % 3 === 0,
    at: new Date(Date.UTC(2026, 10, 22) + i * 61_000),
    tags: [null, [], [null], ['a', null, `t${i}`], [`only ${i}`]][i % 5]!,
    words: i % 3 === 0 ? [] : Array.from({ length: i % 4 }, (_, k) => `w${k}`),
  };
}
const rows = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => row(from + k));

const ZSTD = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };
/** An ArrayBuffer holding exactly `bytes` (hyparquet reads whole buffers). */
const arrayBuffer = (bytes: Uint8Array) =>
  bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;

/** The output of concatenating `files`, and the chunks it was returned in. */
function concatAll(files: readonly Uint8Array[], concat = new ParquetConcat()) {
  const chunks = [concat.start(), ...files.map((f) => concat.append(f)), concat.finish()];
  return { bytes: new Uint8Array(Buffer.concat(chunks)), chunks, concat };
}

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

async function readAll(files: readonly Uint8Array[]): Promise<JsRow[]> {
  const all: JsRow[] = [];
  for (const f of files) all.push(...(await readParquet(db, f)));
  return all;
}

/** Per column chunk, what concatenation must keep as it was. */
async function chunkMetadata(bytes: Uint8Array): Promise<JsRow[]> {
  return db.all(
    `SELECT row_group_id, row_group_num_rows, column_id, path_in_schema, num_values, stats_null_count,
       stats_min_value, stats_max_value, min_is_exact, max_is_exact, encodings, compression,
       total_compressed_size, total_uncompressed_size, data_page_offset, dictionary_page_offset
     FROM parquet_metadata(${await db.file(bytes, 'parquet')}) ORDER BY row_group_id, column_id`,
  );
}

describe('ParquetConcat', () => {
  // Three inputs of different sizes, several row groups and pages each, dictionary and PLAIN.
  const options: EncodeOptions = { rowGroupRows: 40, pageBytes: 256 };
  const inputs = [rows(0, 100), rows(100, 103), rows(103, 190)].map((r) => encodeParquet(TABLE, r, options));
  const { bytes: output, chunks, concat } = concatAll(inputs);

  it('reads back in DuckDB as the inputs read one after the other, value for value', async () => {
    const back = await readParquet(db, output);
    expect(back).toHaveLength(190);
    expect(back).toEqual(await readAll(inputs));
  });

  it('reads back in hyparquet (a second, independent reader) as the inputs one after the other', async () => {
    const read = (bytes: Uint8Array) => parquetReadObjects({ file: arrayBuffer(bytes), compressors: ZSTD });
    const want = [];
    for (const f of inputs) want.push(...(await read(f)));
    expect(await read(output)).toEqual(want);
  });

  it("keeps every row group's statistics, encodings and sizes; only page offsets move", async () => {
    const got = await chunkMetadata(output);
    const want: JsRow[] = [];
    let groups = 0n;
    let at = 4n; // where the data of the next input lands
    for (const f of inputs) {
      const meta = await chunkMetadata(f);
      const shift = at - 4n;
      for (const m of meta) {
        want.push({
          ...m,
          row_group_id: (m.row_group_id as bigint) + groups,
          data_page_offset: (m.data_page_offset as bigint) + shift,
          dictionary_page_offset:
            m.dictionary_page_offset === null ? null : (m.dictionary_page_offset as bigint) + shift,
        });
      }
      groups += BigInt(new Set(meta.map((m) => m.row_group_id)).size);
      at += BigInt(f.length - 12 - new DataView(f.buffer, f.byteOffset).getUint32(f.length - 8, true));
    }
    expect(got).toEqual(want);
    // The inputs exercised what they were meant to: many groups, cut string bounds, both encodings.
    expect(groups).toBe(7n);
    expect(got.some((m) => m.path_in_schema === 'key' && m.min_is_exact === false)).toBe(true);
    expect(new Set(got.map((m) => String(m.encodings).includes('DICTIONARY')))).toEqual(
      new Set([true, false]),
    );
  });

  it("keeps each column chunk's metadata byte for byte, apart from its offsets", () => {
    const chunkBytes = (file: Uint8Array) =>
      ((readFooter(file).metadata.list(FILE.rowGroups) ?? []) as ThriftStruct[]).flatMap((group) =>
        ((group.list(ROW_GROUP.columns) ?? []) as ThriftStruct[]).map((chunk) => {
          const meta = chunk.struct(CHUNK.metaData)!.clone();
          for (const id of Object.values(META)) meta.fields.delete(id);
          const writer = new ThriftWriter();
          writer.struct(meta);
          return Buffer.from(writer.bytes()).toString('hex');
        }),
      );
    expect(chunkBytes(output)).toEqual(inputs.flatMap(chunkBytes));
  });

  it('returns the inputs as views, and counts rows and bytes', () => {
    expect(chunks[1]!.buffer).toBe(inputs[0]!.buffer);
    expect(concat.rows).toBe(190);
    expect(concat.bytes).toBe(output.length);
  });

  it('turns one input into the same bytes', () => {
    for (const f of inputs) expect(concatAll([f]).bytes).toEqual(f);
  });

  it('concatenates the files of every contract table', async () => {
    const files = [
      encodeParquet(TABLES.text_entries, [textEntry(1), textEntry(2)]),
      encodeParquet(TABLES.text_entries, [textEntry(3)]),
    ];
    expect(await readParquet(db, concatAll(files).bytes)).toEqual(await readAll(files));
  });

  it("concatenates another writer's files (hyparquet-writer: data page V2, bloom filters)", async () => {
    const other = (from: number, to: number) =>
      new Uint8Array(
        parquetWriteBuffer({
          schema: tableSchema(TABLE),
          columnData: TABLE.columns.map((c) => ({
            name: c.name,
            data: rows(from, to).map((r) => (c.type === 'bigint' ? BigInt(r[c.name] as number) : r[c.name])),
            offsetIndex: false,
            bloomFilter: c.name === 'key',
          })),
          codec: 'ZSTD',
          compressors: { ZSTD: (b: Uint8Array) => new Uint8Array(zstdCompressSync(b)) },
          rowGroupSize: 30,
        }),
      );
    const files = [other(0, 50), other(50, 120)];
    const { bytes } = concatAll(files);
    expect(await readParquet(db, bytes)).toEqual(await readAll(files));
    const groups = await db.all(
      `SELECT count(DISTINCT row_group_id)::INT AS n FROM parquet_metadata(${await db.file(bytes, 'parquet')})`,
    );
    expect(groups[0]?.n).toBe(5);
    // DuckDB checks the bloom filters (moved with their offsets) before it reads a group.
    const file = await db.file(bytes, 'parquet');
    for (const key of ['k1', `${LONG_KEY}0`, 'absent']) {
      const found = await db.all(`SELECT count(*)::INT AS n FROM read_parquet(${file}) WHERE key = $1`, [
        key,
      ]);
      expect({ key, n: found[0]?.n }).toEqual({ key, n: rows(0, 120).filter((r) => r.key === key).length });
    }
  });

  it('concatenates the rows of any split into files, with any row groups and pages', async () => {
    const cell = {
      key: fc.constantFrom('x', 'y', LONG_KEY, '😀'),
      text: fc.option(fc.string({ unit: 'binary', maxLength: 80 }), { nil: null }),
      n: fc.option(fc.integer({ min: INT32_MIN, max: INT32_MAX }), { nil: null }),
      big: fc.maxSafeInteger(),
      flag: fc.option(fc.boolean(), { nil: null }),
      at: fc.integer({ min: Date.UTC(1900, 0, 1), max: Date.UTC(2200, 0, 1) }).map((t) => new Date(t)),
      tags: fc.option(fc.array(fc.option(fc.string(), { nil: null }), { maxLength: 4 }), { nil: null }),
      words: fc.array(fc.string(), { maxLength: 3 }),
    } satisfies Record<string, fc.Arbitrary<Cell>>;
    const split = fc
      .array(fc.record(cell), { minLength: 1, maxLength: 60 })
      .chain((all) =>
        fc.tuple(
          fc.constant(all),
          fc.uniqueArray(fc.integer({ min: 1, max: all.length }), { maxLength: 5 }),
          fc.integer({ min: 1, max: 25 }),
          fc.integer({ min: 16, max: 2048 }),
        ),
      );
    await fc.assert(
      fc.asyncProperty(split, async ([all, cuts, rowGroupRows, pageBytes]) => {
        const bounds = [0, ...cuts.filter((c) => c < all.length).sort((a, b) => a - b), all.length];
        const files = bounds
          .slice(1)
          .map((to, k) => encodeParquet(TABLE, all.slice(bounds[k], to), { rowGroupRows, pageBytes }));
        const { bytes, concat: c } = concatAll(files);
        expect(c.rows).toBe(all.length);
        expect(await readParquet(db, bytes)).toEqual(await readAll(files));
      }),
      { numRuns: 25 },
    );
  });

  it('copies chosen row groups of opened files alone, in the order asked, with their metadata', async () => {
    const c = new ParquetConcat();
    const out = [c.start()];
    const first = c.open(inputs[0]!); // groups of rows 0–40, 40–80, 80–100
    const third = c.open(inputs[2]!); // 103–143, 143–183, 183–190
    expect(first.rowGroups.map((g) => g.rows)).toEqual([40, 40, 20]);
    out.push(c.copyRowGroup(first, 2), c.copyRowGroup(third, 0), c.copyRowGroup(first, 0), c.finish());
    const bytes = new Uint8Array(Buffer.concat(out));

    const expected = [...(await readAll(inputs))];
    expect(await readParquet(db, bytes)).toEqual([
      ...expected.slice(80, 100),
      ...expected.slice(103, 143),
      ...expected.slice(0, 40),
    ]);
    const stats = (rows: JsRow[]) =>
      rows.map(({ data_page_offset, dictionary_page_offset, row_group_id, ...r }) => r);
    const whole = await chunkMetadata(output);
    const group = (id: number) => stats(whole.filter((r) => Number(r.row_group_id) === id));
    expect(stats(await chunkMetadata(bytes))).toEqual([...group(2), ...group(4), ...group(0)]);
    expect(c.rows).toBe(100);
  });

  it('refuses to copy alone a row group whose bloom filter lies outside its bytes', () => {
    const withBloom = new Uint8Array(
      parquetWriteBuffer({
        columnData: [
          {
            name: 'x',
            data: Array.from({ length: 100 }, (_, i) => `v${i}`),
            bloomFilter: true,
            offsetIndex: false,
          },
        ],
      }),
    );
    const c = new ParquetConcat();
    c.start();
    const source = c.open(withBloom);
    expect(() => c.copyRowGroup(source, 0)).toThrow(/bloom filter cannot be copied alone/);
  });

  describe('refuses what it cannot concatenate', () => {
    const questions = encodeParquet(TABLES.questions, [questionRow()]);

    it('a file of another schema, and says how it differs', () => {
      const c = new ParquetConcat();
      c.start();
      c.append(questions);
      expect(() => c.append(encodeParquet(TABLES.text_entries, [textEntry(1)]))).toThrow(
        /file 1: its schema differs from the first file's: it has no column question_index/,
      );
      const retyped = {
        ...TABLES.questions,
        columns: TABLES.questions.columns.map((col) =>
          col.name === 'question_index' ? { ...col, type: 'bigint' as const } : col,
        ),
      };
      expect(() => c.append(encodeParquet(retyped, [{ ...questionRow(), question_index: 1 }]))).toThrow(
        /column question_index is INT64 REQUIRED, not INT32 REQUIRED/,
      );
      const nullable = {
        ...TABLES.questions,
        columns: TABLES.questions.columns.map((col) =>
          col.name === 'run_id' ? { ...col, nullable: true } : col,
        ),
      };
      expect(() => c.append(encodeParquet(nullable, [questionRow()]))).toThrow(
        /column run_id is BYTE_ARRAY OPTIONAL UTF8 STRING, not BYTE_ARRAY REQUIRED UTF8 STRING/,
      );
      // A refused file leaves the output as it was: the next good file still fits.
      c.append(questions);
      expect(c.rows).toBe(2);
    });

    it('bytes that are not a Parquet file', () => {
      const c = new ParquetConcat();
      c.start();
      expect(() => c.append(new TextEncoder().encode('PAR1 but not much more'))).toThrow(
        /file 0: not a Parquet file/,
      );
      const cut = questions.subarray(0, questions.length - 1);
      expect(() => c.append(cut)).toThrow(ExporterError);
    });

    it("a file with offset indexes (hyparquet-writer's default): their page offsets would move", () => {
      const withIndexes = new Uint8Array(
        parquetWriteBuffer({
          columnData: [{ name: 'x', data: Array.from({ length: 1000 }, (_, i) => i), type: 'INT32' }],
          pageSize: 256,
        }),
      );
      const c = new ParquetConcat();
      c.start();
      expect(() => c.append(withIndexes)).toThrow(/offset indexes/);
    });

    it('finishing without rows, and calls out of order', () => {
      const c = new ParquetConcat();
      expect(() => c.append(questions)).toThrow(/start\(\) comes first|between start\(\) and finish\(\)/);
      c.start();
      expect(() => c.start()).toThrow(ExporterError);
      expect(() => c.finish()).toThrow(/no rows/);
      c.append(questions);
      c.finish();
      expect(() => c.append(questions)).toThrow(ExporterError);
      expect(() => c.finish()).toThrow(ExporterError);
    });
  });

  it('writes the created_by it is given', async () => {
    const { bytes } = concatAll(inputs, new ParquetConcat({ createdBy: 'publisher version 2.0.0' }));
    const meta = await db.all(
      `SELECT created_by FROM parquet_file_metadata(${await db.file(bytes, 'parquet')})`,
    );
    expect(meta[0]?.created_by).toBe('publisher version 2.0.0');
  });
});

function textEntry(i: number): Row {
  return {
    job_id: 3_000_000_000 + i,
    campaign_id: 7,
    section_index: i,
    section_id: `s${i}`,
    entry_index: 0,
    source: 'text_entries',
    description: `entry ${i}`,
    answer: i % 2 ? null : 'yes',
    run_id: '20261122T031500Z-a1b2c3',
    exported_at: new Date('2026-11-22T03:15:00.000Z'),
  };
}

function questionRow(): Row {
  return {
    job_id: 1,
    campaign_id: 2,
    section_index: 0,
    section_id: 's',
    question_index: 0,
    logic_index: null,
    reference_code: 'Q1',
    question: 'Was the entrance clean?',
    question_type: 'radio',
    answer_type: 'single',
    response: ['Yes'],
    response_is_list: false,
    obtained_score: '1',
    max_score: '1',
    comment: null,
    photos: [],
    threads_json: '[]',
    run_id: '20261122T031500Z-a1b2c3',
    exported_at: new Date('2026-11-22T03:15:00.000Z'),
  };
}
