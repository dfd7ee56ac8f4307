import { readFile } from 'node:fs/promises';
import { zstdDecompressSync } from 'node:zlib';
import { type AsyncBuffer, type FileMetaData, parquetMetadata, parquetRead } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeParquet } from '../../../shared/parquet/encode.js';
import { readIdColumn } from '../../../shared/parquet/id-column.js';
import type { ParquetTable } from '../../../shared/parquet/schema.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';

const compressors = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };

const arrayBuffer = (bytes: Uint8Array, start = 0, end = bytes.byteLength) =>
  bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + end) as ArrayBuffer;

const bufferOf = (bytes: Uint8Array): AsyncBuffer => ({
  byteLength: bytes.byteLength,
  slice: (start, end) => arrayBuffer(bytes, start, end),
});

/** Each row group's `column` through hyparquet's own row reader, as the scan read it before (null as 0). */
async function throughParquetRead(bytes: Uint8Array, metadata: FileMetaData, column: string) {
  const groups: number[][] = [];
  let start = 0;
  for (const group of metadata.row_groups) {
    const rows = Number(group.num_rows);
    const values: number[] = [];
    await parquetRead({
      file: bufferOf(bytes),
      metadata,
      columns: [column],
      rowStart: start,
      rowEnd: start + rows,
      compressors,
      onComplete: (data) => {
        for (const row of data as unknown[][]) values.push(Number(row[0] as bigint | null));
      },
    });
    groups.push(values);
    start += rows;
  }
  return groups;
}

async function throughIdColumn(bytes: Uint8Array, column: string) {
  const metadata = parquetMetadata(arrayBuffer(bytes));
  const groups: number[][] = [];
  for (const group of metadata.row_groups)
    groups.push([...(await readIdColumn(bufferOf(bytes), metadata, group, column, compressors))]);
  return { groups, metadata };
}

/** Job ids as a current table holds them: each job's rows together, 1-75 rows a job. */
const jobRows = (jobs: number) =>
  Array.from({ length: jobs }, (_, j) =>
    Array.from({ length: 1 + ((j * 37) % 75) }, () => ({
      job_id: 4_000_000_000 + j * 3,
      campaign_id: 1 + (j >> 6),
    })),
  ).flat();

const TABLE: ParquetTable = {
  name: 'ids',
  columns: [
    { name: 'job_id', type: 'bigint', nullable: false },
    { name: 'campaign_id', type: 'bigint', nullable: true },
  ],
};

describe('readIdColumn', () => {
  let db: DuckDb;
  beforeAll(async () => {
    db = await openDuckDb();
  });
  afterAll(async () => db.close());

  it('reads the exporter own files (dictionary pages, several row groups and pages) as parquetRead does', async () => {
    const rows = jobRows(3_000).map((r, i) => ({ ...r, campaign_id: i % 997 === 0 ? null : r.campaign_id }));
    const bytes = encodeParquet(TABLE, rows, { rowGroupRows: 20_000, pageBytes: 4_096 });
    for (const column of ['job_id', 'campaign_id']) {
      const { groups, metadata } = await throughIdColumn(bytes, column);
      expect(metadata.row_groups.length).toBeGreaterThan(2);
      expect(groups).toEqual(await throughParquetRead(bytes, metadata, column));
    }
  });

  it('reads a column too varied for a dictionary (PLAIN pages) as parquetRead does', async () => {
    // Distinct int64s past the encoder's 1 MB dictionary: it falls back to PLAIN.
    const rows = Array.from({ length: 200_000 }, (_, i) => ({ job_id: 1e12 + i * 7, campaign_id: i }));
    const bytes = encodeParquet(TABLE, rows);
    const { groups, metadata } = await throughIdColumn(bytes, 'job_id');
    const encodings = metadata.row_groups.flatMap((g) => g.columns[0]!.meta_data!.encodings);
    expect(encodings).not.toContain('RLE_DICTIONARY');
    expect(groups).toEqual(await throughParquetRead(bytes, metadata, 'job_id'));
  });

  it.each([
    ['v1 pages, snappy', "PARQUET_VERSION V1, COMPRESSION 'snappy'"],
    ['v2 pages (delta and dictionary), zstd', "PARQUET_VERSION V2, COMPRESSION 'zstd'"],
    ['v1 pages, uncompressed', "PARQUET_VERSION V1, COMPRESSION 'uncompressed'"],
  ])('reads what another engine writes (DuckDB, %s) as parquetRead does', async (_, options) => {
    const path = db.path('parquet');
    await db.all(
      `COPY (SELECT 4000000000 + (i // 75) * 3 AS job_id, CASE WHEN i % 1001 = 0 THEN NULL ELSE i // 4000 END AS campaign_id,
             4000000000 + i * 13 AS unique_id
             FROM range(300000) t(i))
       TO ${path} (FORMAT parquet, ROW_GROUP_SIZE 100000, ${options})`,
    );
    const bytes = new Uint8Array(await readFile(path.slice(1, -1)));
    for (const column of ['job_id', 'campaign_id', 'unique_id']) {
      const { groups, metadata } = await throughIdColumn(bytes, column);
      expect(groups.flat()).toHaveLength(300_000);
      expect(groups).toEqual(await throughParquetRead(bytes, metadata, column));
    }
  });
});
