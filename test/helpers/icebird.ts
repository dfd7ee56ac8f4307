/**
 * icebird, the independent Iceberg reader of the tests, over a local folder: icebird reads
 * through `fetch` (metadata, Avro, and Parquet by byte range), so while a read runs, `fetch` of
 * an absolute path is answered from the file system, Range requests included. Nothing else
 * about the reader is changed.
 */
import { readFile } from 'node:fs/promises';
import { icebergMetadata, icebergRead } from 'icebird';
import { TABLES, type TableName } from '../../shared/export/tables.js';

async function fileResponse(path: string, init?: RequestInit): Promise<Response> {
  return bytesResponse(await readFile(decodeURIComponent(path)).catch(() => undefined), init);
}

/** An object's answer: whole, or the asked Range. */
function bytesResponse(bytes: Uint8Array | undefined, init?: RequestInit): Response {
  if (!bytes) return new Response('not found', { status: 404 });
  const range = new Headers(init?.headers).get('range');
  const m = range && /^bytes=(\d+)-(\d*)$/.exec(range);
  if (m) {
    const start = Number(m[1]);
    const end = m[2] === '' ? bytes.length : Number(m[2]) + 1;
    return new Response(bytes.subarray(start, end), { status: 206 });
  }
  return new Response(bytes, { status: 200, headers: { 'content-length': String(bytes.length) } });
}

/** The `fetch` in place before the first read began, while reads run; how many run. */
let outer: typeof fetch | undefined;
let reading = 0;

/**
 * Runs `read` with `fetch` of absolute paths (and file:// URLs) served from disk. Reads may
 * overlap (concurrent tests): the first one installs the local `fetch`, the last one to end
 * puts the original back.
 */
export async function withLocalFetch<T>(read: () => Promise<T>): Promise<T> {
  if (reading++ === 0) {
    const original = globalThis.fetch;
    outer = original;
    globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (url.startsWith('/')) return fileResponse(url, init);
      if (url.startsWith('file://')) return fileResponse(url.slice('file://'.length), init);
      return original(input, init);
    }) as typeof fetch;
  }
  try {
    return await read();
  } finally {
    if (--reading === 0 && outer) {
      globalThis.fetch = outer;
      outer = undefined;
    }
  }
}

/** Every row of the table at `tableLocation` (a folder), as icebird reads its current snapshot. */
export function readIcebergTable(
  tableLocation: string,
  metadataFileName?: string,
): Promise<Record<string, unknown>[]> {
  return withLocalFetch(() =>
    icebergRead({ tableUrl: tableLocation, ...(metadataFileName && { metadataFileName }) }),
  );
}

/**
 * Every row of one snapshot of the table at `tableLocation` (a tag's, a branch's): icebird reads
 * the current snapshot only, so it is given the table's metadata with that one made current.
 */
export function readIcebergSnapshot(
  tableLocation: string,
  snapshotId: number,
): Promise<Record<string, unknown>[]> {
  return withLocalFetch(async () => {
    const metadata = await icebergMetadata({ tableUrl: tableLocation });
    return icebergRead({
      tableUrl: tableLocation,
      metadata: { ...metadata, 'current-snapshot-id': snapshotId },
    });
  });
}

/** A value as icebird and DuckDB give it, comparable: bigint and Date as text, lists item by item. */
const comparable = (v: unknown): unknown =>
  typeof v === 'bigint'
    ? String(v)
    : v instanceof Date
      ? v.toISOString()
      : Array.isArray(v)
        ? v.map(comparable)
        : v;

/** A row of `table` as one string of its contract columns' values, for comparing row sets. */
export const rowKey = (table: string, row: Record<string, unknown>): string =>
  JSON.stringify(TABLES[table as TableName].columns.map((c) => comparable(row[c.name])));

/**
 * Every row of the table whose metadata file is `metadataLocation` (`s3://<bucket>/…`, as a
 * catalog's pointer names it), as icebird reads it: icebird turns `s3://` locations into
 * `https://<bucket>.s3.amazonaws.com/<key>`, whose `fetch` is answered here by `get(bucket, key)`
 * (a local S3 server's objects).
 */
export async function readIcebergTableAt(
  metadataLocation: string,
  get: (bucket: string, key: string) => Promise<Uint8Array | undefined>,
): Promise<Record<string, unknown>[]> {
  const at = metadataLocation.lastIndexOf('/metadata/');
  const original = globalThis.fetch;
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const m = /^https:\/\/([^./]+)\.s3\.amazonaws\.com\/(.+)$/.exec(url);
    if (m) return get(m[1]!, decodeURIComponent(m[2]!)).then((bytes) => bytesResponse(bytes, init));
    return original(input, init);
  }) as typeof fetch;
  try {
    return await icebergRead({
      tableUrl: metadataLocation.slice(0, at),
      metadataFileName: metadataLocation.slice(at + '/metadata/'.length),
    });
  } finally {
    globalThis.fetch = original;
  }
}
