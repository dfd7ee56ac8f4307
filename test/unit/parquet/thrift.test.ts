import { readFile } from 'node:fs/promises';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { TABLES } from '../../../shared/export/tables.js';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { readFooter } from '../../../shared/parquet/footer.js';
import { ThriftReader, ThriftStruct, ThriftWriter, TType } from '../../../shared/parquet/thrift.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';

/** The footer's thrift bytes, and the same footer read and written again. */
function roundTrip(file: Uint8Array): { original: string; written: string } {
  const { metadata, dataEnd } = readFooter(file);
  const writer = new ThriftWriter();
  writer.struct(metadata);
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  return { original: hex(file.subarray(dataEnd, file.length - 8)), written: hex(writer.bytes()) };
}

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

describe('thrift compact protocol', () => {
  it('writes back the footer of our encoder byte for byte', () => {
    const file = encodeParquet(TABLES.media_images, [
      {
        job_id: 1,
        campaign_id: 2,
        section_index: 0,
        section_id: 's',
        gallery_index: 0,
        image_index: 0,
        gallery_description: null,
        view_type: 'grid',
        url: 'https://example.com/1.jpg',
        thumb_url: 'https://example.com/1-t.jpg',
        caption: 'a long caption, longer than the sixty-four bytes statistics keep, about the picture',
        run_id: '20261122T031500Z-a1b2c3',
        exported_at: new Date('2026-11-22T03:15:00.000Z'),
      },
    ]);
    const { original, written } = roundTrip(file);
    expect(written).toBe(original);
  });

  it("writes back hyparquet-writer's and DuckDB's footers byte for byte", async () => {
    const hyparquet = new Uint8Array(
      parquetWriteBuffer({
        columnData: [
          { name: 'x', data: Array.from({ length: 2000 }, (_, i) => i), type: 'INT32', columnIndex: true },
          { name: 's', data: Array.from({ length: 2000 }, (_, i) => `v${i % 7}`), type: 'STRING' },
        ],
        pageSize: 512,
        kvMetadata: [{ key: 'k', value: 'v' }],
      }),
    );
    const path = db.path('parquet');
    await db.all(
      `COPY (SELECT range AS id, range::VARCHAR AS s, [range, NULL] AS l, range % 2 = 0 AS b FROM range(5000))
       TO ${path} (FORMAT parquet, ROW_GROUP_SIZE 2048)`,
    );
    const duckdb = new Uint8Array(await readFile(path.slice(1, -1)));
    for (const file of [hyparquet, duckdb]) {
      const { original, written } = roundTrip(file);
      expect(written).toBe(original);
    }
  });

  it('keeps wire types: an i16, a double, a bool list and a long field-id jump', () => {
    const struct = new ThriftStruct();
    struct.set(1, TType.I16, -3);
    struct.set(2, TType.DOUBLE, 1.5);
    struct.set(3, TType.LIST, { elementType: TType.TRUE, items: [true, false, true] });
    struct.set(40, TType.I64, -(2n ** 62n));
    struct.set(41, TType.FALSE, false);
    const inner = new ThriftStruct();
    inner.set(1, TType.BINARY, new TextEncoder().encode('é'));
    struct.set(42, TType.STRUCT, inner);
    const writer = new ThriftWriter();
    writer.struct(struct);
    const back = new ThriftReader(writer.bytes()).struct();
    expect([...back.fields.entries()].map(([id, f]) => [id, f.type])).toEqual([
      [1, TType.I16],
      [2, TType.DOUBLE],
      [3, TType.LIST],
      [40, TType.I64],
      [41, TType.FALSE],
      [42, TType.STRUCT],
    ]);
    expect(back.get(1)).toBe(-3);
    expect(back.get(2)).toBe(1.5);
    expect(back.list(3)).toEqual([true, false, true]);
    expect(back.i64(40)).toBe(-(2n ** 62n));
    expect(back.get(41)).toBe(false);
    expect(new TextDecoder().decode(back.struct(42)!.get(1) as Uint8Array)).toBe('é');
  });

  it('refuses truncated input with an ExporterError', () => {
    const writer = new ThriftWriter();
    const struct = new ThriftStruct();
    struct.set(1, TType.BINARY, new Uint8Array(10));
    writer.struct(struct);
    const cut = writer.bytes().subarray(0, 5);
    expect(() => new ThriftReader(cut).struct()).toThrow(ExporterError);
  });
});
