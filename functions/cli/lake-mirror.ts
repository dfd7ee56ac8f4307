/**
 * A local copy of what the SQL views of an S3 output read, for DuckDB: its `httpfs` extension,
 * which reads S3, cannot be installed without the internet, so the files come through the
 * exporter's own S3 storage (its credentials, --s3-region, --s3-endpoint) into a temporary
 * folder, under the same keys. Copied: `runs/` and, for Hive tables, `parquet/`; for Iceberg
 * tables only the files of each table's current snapshot, as the views ask for them; and
 * `raw/reports/` only once a statement names `raw_reports`.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ExporterError } from '../../shared/errors.js';
import { outputTableFormat } from '../../shared/export/state/table-format.js';
import { keyOfLocation } from '../../shared/iceberg/locations.js';
import { PARQUET_ROOT, RUNS_PREFIX, rawPrefix } from '../../shared/layout.js';
import type { Storage } from '../../shared/storage/storage.js';
import type { LakeFiles } from './sql.js';

/** Downloads in flight: enough to hide S3's latency, few enough for a small machine. */
const DOWNLOADS_IN_FLIGHT = 8;

/** What a copy has fetched so far. */
export interface MirrorStats {
  files: number;
  bytes: number;
}

/**
 * {@link LakeFiles} over a local copy of `storage` in `folder` (an empty folder the caller
 * removes). `onRawReports` hears what fetching the raw report lines added, once fetched.
 */
export async function mirrorLake(
  storage: Storage,
  folder: string,
  onRawReports: (added: MirrorStats) => void = () => {},
): Promise<LakeFiles & { stats: MirrorStats; fetchRawReports: () => Promise<void> }> {
  const stats: MirrorStats = { files: 0, bytes: 0 };
  const copied = new Map<string, Promise<string>>();
  const throttled = throttle(DOWNLOADS_IN_FLIGHT);
  /** The local path of `key`, fetched once however often it is asked for. */
  const copy = (key: string): Promise<string> => {
    let path = copied.get(key);
    if (path === undefined) {
      path = throttled(async () => {
        const found = await storage.get(key);
        if (!found) throw new ExporterError(`${storage.location}/${key} disappeared while it was read`);
        const local = join(folder, ...key.split('/'));
        await mkdir(dirname(local), { recursive: true });
        await writeFile(local, found.body);
        stats.files += 1;
        stats.bytes += found.body.byteLength;
        return local;
      });
      copied.set(key, path);
    }
    return path;
  };

  const copyAll = async (prefixes: string[]) => {
    const keys: string[] = [];
    for (const prefix of prefixes) for await (const key of storage.list(prefix)) keys.push(key);
    await Promise.all(keys.map(copy));
  };
  const prefixes = [RUNS_PREFIX];
  if ((await outputTableFormat(storage)) !== 'iceberg') prefixes.push(`${PARQUET_ROOT}/`);
  await copyAll(prefixes);

  return {
    storage,
    root: folder,
    localPath: (location) => copy(keyOfLocation(storage, location)),
    fetchRawReports: async () => {
      const before = { ...stats };
      await copyAll([rawPrefix('reports')]);
      onRawReports({ files: stats.files - before.files, bytes: stats.bytes - before.bytes });
    },
    stats,
  };
}

/** Runs the tasks given to it at most `limit` at a time, the others waiting their turn in order. */
function throttle(limit: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    // A finished task hands its slot to the first waiting one, so none can slip in between.
    if (running < limit) running += 1;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}
