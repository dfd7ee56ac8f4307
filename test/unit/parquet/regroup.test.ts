import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { encodeParquet, tableSchema } from '../../../shared/parquet/encode.js';
import { ParquetRegroup, type RegroupOptions } from '../../../shared/parquet/regroup.js';
import { INT32_MAX, INT32_MIN, type ParquetTable, type Row } from '../../../shared/parquet/schema.js';
import { type DuckDb, type JsRow, openDuckDb, readParquet } from '../../helpers/duckdb.js';

/** Every column type, nullable and not: NULLs, empty lists, lists with NULL items, INT32 and INT64 bounds. */
const TABLE: ParquetTable = {
  name: 'every_type',
  columns: [
    { name: 'key', type: 'string', nullable: false },
    { name: 'text', type: 'string', nullable: true },
    { name: 'n', type: 'int', nullable: true },
    { name: 'count', type: 'int', nullable: false },
    { name: 'big', type: 'bigint', nullable: false },
    { name: 'maybe_big', type: 'bigint', nullable: true },
    { name: 'flag', type: 'boolean', nullable: true },
    { name: 'at', type: 'timestamp', nullable: false },
    { name: 'maybe_at', type: 'timestamp', nullable: true },
    { name: 'tags', type: 'array<string>', nullable: true },
    { name: 'words', type: 'array<string>', nullable: false },
  ],
};

function row(i: number): Row {
  return {
    key: `k${i % 5}`,
    text: i % 7 === 3 ? null : `row ${i} ${'é😀'.repeat(i % 4)}`,
    n: i % 6 === 1 ? null : i % 2 ? INT32_MAX - i : INT32_MIN + i,
    count: i,
    big: (Number.MAX_SAFE_INTEGER - i) * (i % 2 ? 1 : -1),
    maybe_big: i % 3 === 0 ? null : 3_000_000_000 + i,
    flag: i % 4 === 2 ? null : i % 3 === 0,
    at: new Date(Date.UTC(2026, 10, 23) + i * 61_001),
    maybe_at: i % 5 === 0 ? null : new Date(-86_400_000 * i),
    tags: [null, [], [null], ['a', null, `t${i}`], [`only ${i}`]][i % 5]!,
    words: i % 3 === 0 ? [] : Array.from({ length: i % 4 }, (_, k) => (k === 1 ? null : `w${k}`)),
  };
}
const rows = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => row(from + k));
/** A staged-like file of rows [from, to), in row groups of `groupRows`. */
const file = (from: number, to: number, groupRows = to - from) =>
  encodeParquet(TABLE, rows(from, to), { rowGroupRows: groupRows });

/** Output row groups of 100 rows (or 1 MiB): groups of 50 rows or more are copied. */
const SMALL: RegroupOptions = { rowGroupRows: 100 };

async function regroup(inputs: readonly Uint8Array[], options = SMALL): Promise<Uint8Array> {
  const r = new ParquetRegroup(TABLE, options);
  const chunks = [r.start()];
  for (const input of inputs) chunks.push(...(await r.append(input)));
  chunks.push(...(await r.finish()));
  return new Uint8Array(Buffer.concat(chunks));
}

/** Per row group: its rows and where its bytes are, from the footer. */
function groupsOf(bytes: Uint8Array) {
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return parquetMetadata(buffer).row_groups.map((g) => {
    const starts = g.columns.map((c) =>
      Number(c.meta_data!.dictionary_page_offset ?? c.meta_data!.data_page_offset),
    );
    const ends = g.columns.map((c, i) => starts[i]! + Number(c.meta_data!.total_compressed_size));
    return {
      rows: Number(g.num_rows),
      bytes: Number(g.total_byte_size),
      start: Math.min(...starts),
      end: Math.max(...ends),
    };
  });
}

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

/** Per column chunk: statistics, counts and sizes, as DuckDB reads the footer. */
async function chunkMetadata(bytes: Uint8Array): Promise<JsRow[]> {
  return db.all(
    `SELECT row_group_id, row_group_num_rows, column_id, path_in_schema, type, num_values, stats_null_count,
       stats_min_value, stats_max_value, encodings, total_compressed_size, total_uncompressed_size
     FROM parquet_metadata(${await db.file(bytes, 'parquet')}) ORDER BY row_group_id, column_id`,
  );
}

describe('ParquetRegroup', () => {
  it('merges small row groups into full ones, as if the rows had been encoded at once', async () => {
    const inputs = [file(0, 30), file(30, 70, 15), file(70, 110), file(110, 250, 40), file(250, 263)];

    const out = await regroup(inputs);

    expect(groupsOf(out).map((g) => g.rows)).toEqual([100, 100, 63]);
    // Same cells, same encoder: the same statistics, null counts, encodings and sizes per chunk.
    const direct = encodeParquet(TABLE, rows(0, 263), { rowGroupRows: 100 });
    expect(await chunkMetadata(out)).toEqual(await chunkMetadata(direct));
    expect(await readParquet(db, out)).toEqual(await readParquet(db, direct));
  });

  it('copies a row group of half an output group or more byte for byte', async () => {
    const large = file(10, 80); // 70 rows, one group
    const out = await regroup([file(0, 10), large, file(80, 90)]);

    const groups = groupsOf(out);
    expect(groups.map((g) => g.rows)).toEqual([10, 70, 10]);
    const [copied] = groupsOf(large);
    expect(Buffer.from(out.subarray(groups[1]!.start, groups[1]!.end))).toEqual(
      Buffer.from(large.subarray(copied!.start, copied!.end)),
    );
    expect(await readParquet(db, out)).toEqual(await readParquet(db, file(0, 90)));
  });

  it('copies a small group that has no small neighbour to merge with, rather than encode it again', async () => {
    const lone = file(10, 20);
    const out = await regroup([file(0, 60), lone, file(20, 80)]);

    const groups = groupsOf(out);
    expect(groups.map((g) => g.rows)).toEqual([60, 10, 60]);
    const [own] = groupsOf(lone);
    expect(Buffer.from(out.subarray(groups[1]!.start, groups[1]!.end))).toEqual(
      Buffer.from(lone.subarray(own!.start, own!.end)),
    );
  });

  it('keeps row order across a mix: small groups gathered around large ones, of one file or many', async () => {
    // One file holding a large group then a small one (a big batch's remainder), then small files.
    const inputs = [file(0, 20), file(20, 150, 60), file(150, 170), file(170, 180)];

    const out = await regroup(inputs);

    // 20 | 60 copied | 60 copied | 10 + 20 + 10 merged
    expect(groupsOf(out).map((g) => g.rows)).toEqual([20, 60, 60, 40]);
    expect(await readParquet(db, out)).toEqual(await readParquet(db, file(0, 180)));
  });

  it('starts a new group when the next small one would pass the byte target', async () => {
    const inputs = [file(0, 20), file(20, 40), file(40, 60)];
    const bytes = Math.max(...inputs.map((f) => groupsOf(f)[0]!.bytes));

    // Two groups fit under 2.5 of them; none is large enough (half the target) to be copied.
    const out = await regroup(inputs, { rowGroupRows: 1000, rowGroupBytes: bytes * 2.5 });

    expect(groupsOf(out).map((g) => g.rows)).toEqual([40, 20]);
    expect(await readParquet(db, out)).toEqual(await readParquet(db, file(0, 60)));
  });

  it('round-trips every column type exactly: DuckDB and hyparquet read the same values and types', async () => {
    const inputs = [file(0, 7), file(7, 19), file(19, 40)];
    const out = await regroup(inputs);
    const original = file(0, 40, 7);

    expect(groupsOf(out)).toHaveLength(1);
    expect(await readParquet(db, out)).toEqual(await readParquet(db, original));
    const types = async (bytes: Uint8Array) =>
      db.columns(`SELECT * FROM read_parquet(${await db.file(bytes, 'parquet')})`);
    expect(await types(out)).toEqual(await types(original));
    const read = (bytes: Uint8Array) =>
      parquetReadObjects({
        file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
        compressors: { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) },
      });
    const back = await read(out);
    expect(back).toEqual(await read(original));
    // A NULL stays NULL, an empty list stays empty, a NULL item stays: checked against the rows written.
    expect(back.map((r) => r.tags ?? null)).toEqual(rows(0, 40).map((r) => r.tags));
    expect(back.map((r) => r.words)).toEqual(rows(0, 40).map((r) => r.words));
    expect(back.map((r) => (r.big as bigint).toString())).toEqual(rows(0, 40).map((r) => String(r.big)));
  });

  it('gives the same bytes for the same inputs', async () => {
    const inputs = [file(0, 30), file(30, 100, 60), file(100, 140)];
    expect(Buffer.from(await regroup(inputs))).toEqual(Buffer.from(await regroup(inputs)));
  });

  it('refuses an INT64 a number cannot hold exactly rather than round it', async () => {
    const other = new Uint8Array(
      parquetWriteBuffer({
        schema: tableSchema(TABLE),
        columnData: TABLE.columns.map((c) => ({
          name: c.name,
          data: rows(0, 3).map((r) => (c.type === 'bigint' && r[c.name] !== null ? 2n ** 60n : r[c.name])),
          offsetIndex: false,
        })),
        codec: 'ZSTD',
        compressors: { ZSTD: (b: Uint8Array) => new Uint8Array(zstdCompressSync(b)) },
      }),
    );

    // After a small group of ours, so that the two are merged (a lone group is copied undecoded).
    await expect(regroup([file(0, 3), other])).rejects.toThrow(ExporterError);
    await expect(regroup([file(0, 3), other])).rejects.toThrow(
      /big: 1152921504606846976 is beyond a safe integer/,
    );
  });

  it('refuses files not written with the table it encodes with', async () => {
    const wider: ParquetTable = {
      ...TABLE,
      columns: [...TABLE.columns, { name: 'dt', type: 'string', nullable: false }],
    };
    const r = new ParquetRegroup(wider, SMALL);
    r.start();
    // Even a file whose groups would be copied, not decoded.
    await expect(r.append(file(0, 90))).rejects.toThrow(/parquet table every_type: .*it has no column dt/);
  });
});
