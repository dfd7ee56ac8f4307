/**
 * Invariant 14, the current tables in run order: after quiescence each `<report table>_current`
 * holds exactly the rows the `*_latest` views would show over the published runs
 * (`shared/export/views.ts`), whatever order the runs committed in. Computed here from the run
 * manifests and the history tables' files, read with hyparquet, not from the exporter's code:
 * - a job's newest report is the one of the largest run id among published runs (status
 *   succeeded or partial) whose `reports` files hold the job;
 * - it is gone when a published run newer than that report got a 404 for the job
 *   (`not_found_jobs`), or listed the report's campaign completely (in its `campaigns` files, not
 *   in `unlisted_campaigns` nor `partially_listed_campaigns`) without the job in its `jobs` files;
 * - the current table then holds, per job kept, the history table's rows of that (job, run): the
 *   same multiset of (job_id, run_id), read from its current snapshot with its position deletes
 *   applied.
 */
import { zstdDecompressSync } from 'node:zlib';
import { parquetReadObjects } from 'hyparquet';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { REPORT_TABLES } from '../../shared/export/tables.js';
import { CONTENT, decodeManifest, decodeManifestList, STATUS } from '../../shared/iceberg/avro.js';
import { parseJson } from '../../shared/iceberg/json.js';
import { currentTableOf } from '../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import { ICEBERG_ROOT } from '../../shared/layout.js';
import { metadataChain } from './iceberg-chain.js';
import type { SimS3 } from './s3.js';

type Violate = (invariant: string, message: string, runs: string[]) => void;

const CURRENT = '14 _current is the newest run per job';
const ROOT = 's3://sim-bucket/';
const ZSTD = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };

const arrayBuffer = (body: Uint8Array): ArrayBuffer =>
  body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;

export type Row = Record<string, unknown>;

export async function readRows(s3: SimS3, key: string, columns: string[]): Promise<Row[]> {
  const body = s3.peek(key);
  if (!body) return [];
  return (await parquetReadObjects({ file: arrayBuffer(body), columns, compressors: ZSTD })) as Row[];
}

/** The newest metadata of a table, undefined when it has none. */
function newestMetadata(s3: SimS3, table: string): TableMetadata | undefined {
  const newest = metadataChain(s3, table).at(-1);
  const body = newest === undefined ? undefined : s3.peek(newest);
  return body ? (parseJson(Buffer.from(body).toString('utf8')) as TableMetadata) : undefined;
}

/**
 * The live rows of a table's current snapshot (`columns` of them), position deletes applied, in
 * the order of its manifests; undefined when a manifest list or manifest is missing or does not
 * decode. A data file
 * may hold rows of several runs (another engine's compaction).
 */
export async function liveRows(s3: SimS3, table: string, columns: string[]): Promise<Row[] | undefined> {
  const out: Row[] = [];
  const metadata = newestMetadata(s3, table);
  if (!metadata) return out;
  const head = (metadata.snapshots ?? []).find(
    (s) => BigInt(s['snapshot-id']) === BigInt(metadata['current-snapshot-id'] ?? -1),
  );
  if (!head) return out;
  const list = s3.peek(head['manifest-list'].slice(ROOT.length));
  if (!list) return undefined;
  const data: string[] = [];
  const deleted = new Set<string>();
  // One that does not decode is invariant 9's to report, as a missing one.
  const manifests = await decodeManifestList(list).catch(() => undefined);
  if (!manifests) return undefined;
  for (const mf of manifests) {
    const body = s3.peek(mf.manifest_path.slice(ROOT.length));
    const entries = body && (await decodeManifest(body).catch(() => undefined));
    if (!entries) return undefined;
    for (const e of entries) {
      if (e.status === STATUS.DELETED) continue;
      const key = e.data_file.file_path.slice(ROOT.length);
      if (e.data_file.content === CONTENT.DATA) data.push(key);
      else
        for (const r of await readRows(s3, key, ['file_path', 'pos']))
          deleted.add(`${r.file_path}#${Number(r.pos as bigint)}`);
    }
  }
  for (const key of data) {
    const rows = await readRows(s3, key, columns);
    rows.forEach((r, pos) => {
      if (!deleted.has(`${ROOT}${key}#${pos}`)) out.push(r);
    });
  }
  return out;
}

/** The live rows of a table's current snapshot as `job/run` keys with counts. */
async function currentRows(s3: SimS3, table: string): Promise<Map<string, number> | undefined> {
  const rows = await liveRows(s3, table, ['job_id', 'run_id']);
  if (!rows) return undefined;
  const out = new Map<string, number>();
  for (const r of rows) {
    const pair = `${Number(r.job_id as bigint)}/${r.run_id}`;
    out.set(pair, (out.get(pair) ?? 0) + 1);
  }
  return out;
}

/** The (job, run) of each job's newest report the `*_latest` views keep. */
async function latestPairs(s3: SimS3, published: readonly Manifest[]): Promise<Set<string>> {
  const filesOf = (m: Manifest, table: string) =>
    m.files.filter((f) => f.format === 'parquet' && f.table_or_entity === table).map((f) => f.key);
  const newest = new Map<number, { run: string; campaign: number }>();
  const completeListings: { run: string; campaign: number; jobs: Set<number> }[] = [];
  const notFound = new Map<number, string>();
  for (const m of published) {
    for (const key of filesOf(m, 'reports')) {
      for (const r of await readRows(s3, key, ['job_id', 'campaign_id'])) {
        const job = Number(r.job_id as bigint);
        const seen = newest.get(job);
        if (!seen || seen.run < m.run_id)
          newest.set(job, { run: m.run_id, campaign: Number(r.campaign_id as bigint) });
      }
    }
    for (const job of m.not_found_jobs ?? []) {
      const seen = notFound.get(job);
      if (!seen || seen < m.run_id) notFound.set(job, m.run_id);
    }
    const incomplete = new Set([...(m.unlisted_campaigns ?? []), ...(m.partially_listed_campaigns ?? [])]);
    const listed = new Map<number, Set<number>>();
    for (const key of filesOf(m, 'campaigns'))
      for (const r of await readRows(s3, key, ['campaign_id'])) {
        const campaign = Number(r.campaign_id as bigint);
        if (!incomplete.has(campaign)) listed.set(campaign, new Set());
      }
    for (const key of filesOf(m, 'jobs'))
      for (const r of await readRows(s3, key, ['job_id', 'campaign_id']))
        listed.get(Number(r.campaign_id as bigint))?.add(Number(r.job_id as bigint));
    for (const [campaign, jobs] of listed) completeListings.push({ run: m.run_id, campaign, jobs });
  }
  const kept = new Set<string>();
  for (const [job, { run, campaign }] of newest) {
    const gone = notFound.get(job);
    if (gone !== undefined && gone >= run) continue;
    if (completeListings.some((l) => l.campaign === campaign && l.run > run && !l.jobs.has(job))) continue;
    kept.add(`${job}/${run}`);
  }
  return kept;
}

/** 14: each current table holds the rows of the (job, run) pairs the latest views keep. */
export async function checkCurrentTables(
  s3: SimS3,
  manifests: ReadonlyMap<string, Manifest>,
  violate: Violate,
): Promise<void> {
  const published = [...manifests.values()].filter(
    (m) => m.table_format === 'iceberg' && (m.status === 'succeeded' || m.status === 'partial'),
  );
  if (published.length === 0) return;
  const kept = await latestPairs(s3, published);
  for (const base of REPORT_TABLES) {
    const table = currentTableOf(base);
    const want = new Map<string, number>();
    for (const m of published) {
      for (const f of m.files) {
        if (f.format !== 'parquet' || f.table_or_entity !== base) continue;
        for (const r of await readRows(s3, f.key, ['job_id', 'run_id'])) {
          const pair = `${Number(r.job_id as bigint)}/${r.run_id}`;
          if (kept.has(pair)) want.set(pair, (want.get(pair) ?? 0) + 1);
        }
      }
    }
    const have = await currentRows(s3, table);
    if (!have) continue; // a missing manifest is invariant 9's to report
    for (const pair of new Set([...want.keys(), ...have.keys()])) {
      const w = want.get(pair) ?? 0;
      const h = have.get(pair) ?? 0;
      if (w === h) continue;
      const [job, run] = pair.split('/') as [string, string];
      violate(
        CURRENT,
        `${table} holds ${h} rows of job ${job} from run ${run}, the latest views ${w}${w === 0 ? ` (its newest kept run is ${[...kept].find((p) => p.startsWith(`${job}/`))?.split('/')[1] ?? 'none: deleted'})` : ''}`,
        [run],
      );
    }
  }
}

/**
 * How many runs committed a snapshot of a table after a newer run's snapshot of that table (by
 * run id): older closings taken up late. Read from each metadata version the bucket holds, in
 * order, over every Iceberg table (the history tables too: a late run whose rows newer runs all
 * superseded may commit no current table).
 */
export function lateRuns(s3: SimS3): number {
  const late = new Set<string>();
  const tables = new Set(
    s3
      .keys(`${ICEBERG_ROOT}/`)
      .map((k) => /^iceberg\/([^/]+)\/metadata\//.exec(k)?.[1])
      .filter((t): t is string => t !== undefined),
  );
  for (const table of tables) {
    let newest = '';
    const seen = new Set<string>();
    for (const key of metadataChain(s3, table)) {
      const body = s3.peek(key);
      if (!body) continue;
      const metadata = parseJson(Buffer.from(body).toString('utf8')) as TableMetadata;
      for (const s of metadata.snapshots ?? []) {
        const run = s.summary['run-id'];
        if (run === undefined || seen.has(run)) continue;
        seen.add(run);
        if (run < newest) late.add(run);
        else newest = run;
      }
    }
  }
  return late.size;
}
