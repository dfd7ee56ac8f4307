/**
 * The invariants of Iceberg runs (docs/iceberg.md), read from the bucket after
 * quiescence with the project's own readers (the file catalog's layout, `decodeManifestList`,
 * `decodeManifest`) and hyparquet for the data files' footers. Per table under `iceberg/`:
 * 9. the metadata chain is sound: v1..vN all there and parse; each v(k+1) is v(k) with one
 *    snapshot more (its metadata log ends with v(k), its parent is v(k)'s current snapshot, its
 *    sequence number the next one); along the current snapshot's parent chain, sequence numbers
 *    and timestamps strictly increase and every snapshot of vN is on it; every snapshot's manifest
 *    list and the current snapshot's manifests exist (sizes as listed), decode, and add their
 *    files as the snapshot that added them; `version-hint.text` names no version beyond N.
 * 10. one snapshot per published run: each run with a manifest under runs/ of status succeeded
 *    or partial whose `iceberg.tables` names the table has exactly one snapshot (summary
 *    `run-id`), the snapshot id the manifest names (the run's derived id), held by the metadata
 *    file the manifest names; a run that published Parquet files of a table names that table; no
 *    snapshot of a run without such a manifest (a failed or unfinished run publishes nothing).
 * 11. the current snapshot's data files are exactly the published runs' `files` of that table
 *    (none twice, none missing, none extra), each added by its run's snapshot, in its run's dt
 *    partition, with the size and rows its run manifest lists and its Parquet footer holds; per
 *    run, the records its snapshot adds are the rows its manifest lists.
 * With another engine writing the tables (other-engine.ts; its requests are the `other` actors'):
 * 9 also allows a version that changes metadata only (the same snapshots, current snapshot and
 * sequence number: a property or a tag); 10 leaves out its snapshots (summary `trino_query_id`,
 * no `run-id`); once it compacted a table (a `replace` snapshot of its own), 11 compares rows,
 * not files: the table's live rows (position deletes applied) are, as a multiset of whole rows,
 * the published runs' rows of that table, and each run's snapshot still added what its manifest
 * lists. And
 * 15. what the other engine committed stays: each property and tag it set is in the table's
 *    newest metadata with its value, each `replace` snapshot it committed among its snapshots.
 * Invariant 6 (invariants.ts) covers `iceberg/<table>/data/`; `metadata/` is the catalog's.
 * Tables whose name ends in `_current` (the newest report per job, replaced rather than
 * appended) get 9 here, and 13 (their rows are the `*_latest` views', in run order) in
 * iceberg-current.ts: what a run adds to them is not its `files`.
 */
import { parquetMetadata } from 'hyparquet';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { decodeManifest, decodeManifestList, type ManifestEntry, STATUS } from '../../shared/iceberg/avro.js';
import { snapshotIdOf } from '../../shared/iceberg/commit.js';
import { parseJson } from '../../shared/iceberg/json.js';
import type { Snapshot, TableMetadata } from '../../shared/iceberg/types.js';
import { ICEBERG_ROOT } from '../../shared/layout.js';
import { glueOf } from './glue.js';
import { keyOf, metadataChain, ROOT } from './iceberg-chain.js';
import { checkCurrentTables, liveRows, type Row, readRows } from './iceberg-current.js';
import { OTHER_ENGINE_SUMMARY_KEY, type OthersCommitted, parquetTableOf } from './other-engine.js';
import type { SimS3 } from './s3.js';

const CURRENT_SUFFIX = '_current';

type Violate = (invariant: string, message: string, runs: string[]) => void;

const CHAIN = '9 iceberg metadata chain';
const SNAPSHOTS = '10 one snapshot per run';
const FILES = '11 iceberg files are the runs';
const OTHERS = "15 another engine's changes stay";

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');
const id = (v: number | bigint | null | undefined): string | undefined =>
  v === undefined || v === null ? undefined : BigInt(v).toString();

/** Metadata files as parsed, by their stored bytes (a run's manifest names one the chain read). */
const parsed = new WeakMap<Uint8Array, TableMetadata>();
function metadataOf(body: Uint8Array): TableMetadata {
  let metadata = parsed.get(body);
  if (!metadata) {
    metadata = parseJson(text(body)) as TableMetadata;
    parsed.set(body, metadata);
  }
  return metadata;
}

/** The tables under `iceberg/`, and the keys there outside any table's `data/` or `metadata/`. */
export function icebergTables(s3: SimS3): { tables: string[]; stray: string[] } {
  const tables = new Set<string>();
  const stray: string[] = [];
  for (const key of s3.keys(`${ICEBERG_ROOT}/`)) {
    const match = /^iceberg\/([^/]+)\/(data|metadata)\//.exec(key);
    if (match) tables.add(match[1]!);
    else stray.push(key);
  }
  return { tables: [...tables].sort(), stray };
}

/** True for a table whose data files no run manifest lists (see the header). */
export const isCurrentTable = (table: string): boolean => table.endsWith(CURRENT_SUFFIX);

/** One data file as the current snapshot of a table holds it. */
interface TableFile {
  key: string;
  snapshot: string;
  rows: number;
  bytes: number;
  dt: string | null;
}

export async function checkIcebergInvariants(
  s3: SimS3,
  manifests: ReadonlyMap<string, Manifest>,
  violate: Violate,
  others?: OthersCommitted,
): Promise<void> {
  const { tables } = icebergTables(s3);
  const othersOn = s3.events.some((e) => e.actor.kind === 'other');
  // 10: a run that published a table's Parquet files names the table's snapshot.
  for (const m of manifests.values()) {
    if (m.table_format !== 'iceberg' || m.status === 'failed') continue;
    for (const f of m.files) {
      if (f.format === 'parquet' && m.iceberg?.tables[f.table_or_entity] === undefined) {
        violate(
          SNAPSHOTS,
          `run ${m.run_id} published ${f.key} but its manifest names no snapshot of ${f.table_or_entity}`,
          [m.run_id],
        );
      }
    }
    for (const table of Object.keys(m.iceberg?.tables ?? {})) {
      if (!tables.includes(table))
        violate(SNAPSHOTS, `run ${m.run_id} names a snapshot of ${table}, which has no metadata`, [m.run_id]);
    }
  }
  for (const table of tables) {
    const current = checkChain(s3, table, violate, othersOn);
    if (!current) continue;
    if (others) checkOthersKept(table, current, others, violate);
    const files = await currentFiles(s3, table, current, violate);
    if (files && !isCurrentTable(table))
      await checkRuns(s3, table, current, files, manifests, violate, othersOn);
  }
  // 14: the current tables hold what the latest views would, in run order.
  await checkCurrentTables(s3, manifests, violate);
}

/** 9: v1..vN parse and follow one another; returns vN (undefined when the chain is broken). */
function checkChain(
  s3: SimS3,
  table: string,
  violate: Violate,
  othersOn: boolean,
): TableMetadata | undefined {
  const prefix = `${ICEBERG_ROOT}/${table}/metadata/`;
  const chain = metadataChain(s3, table);
  if (chain.length === 0) {
    violate(CHAIN, `${table} has files but no metadata`, []);
    return undefined;
  }
  const last = chain.length;
  const hint = s3.peek(`${prefix}version-hint.text`);
  if (hint && !(Number(text(hint).trim()) <= last))
    violate(CHAIN, `${table}: version-hint.text says ${text(hint)}, the last metadata is v${last}`, []);
  // With Glue: every pointer an UpdateTable set is a commit, and the table's history holds it.
  for (const pointer of glueOf(s3)?.committed.get(table) ?? []) {
    const key = keyOf(pointer);
    if (key === undefined || !chain.includes(key))
      violate(CHAIN, `${table}: Glue took ${pointer}, which its pointer's metadata log does not hold`, []);
  }
  let previous: TableMetadata | undefined;
  let sound = true;
  for (let v = 1; v <= last; v++) {
    const key = chain[v - 1]!;
    const body = s3.peek(key);
    let metadata: TableMetadata;
    try {
      if (!body) throw new Error('missing');
      metadata = metadataOf(body);
    } catch (error) {
      violate(CHAIN, `${key}: ${(error as Error).message} (the table is at v${last})`, []);
      sound = false;
      previous = undefined;
      continue;
    }
    const snapshots = metadata.snapshots ?? [];
    const currentId = id(metadata['current-snapshot-id']);
    const head = snapshots.find((s) => id(s['snapshot-id']) === currentId);
    if (!head) {
      violate(CHAIN, `${key}: current snapshot ${currentId} is not among its snapshots`, []);
      sound = false;
    }
    if (previous && head) {
      const before = previous;
      const log = metadata['metadata-log'] ?? [];
      const logged = log[log.length - 1]?.['metadata-file'];
      // Another engine's metadata-only change: the same snapshots, current one and sequence.
      const metadataOnly =
        othersOn &&
        id(metadata['current-snapshot-id']) === id(before['current-snapshot-id']) &&
        snapshots.length === (before.snapshots ?? []).length &&
        metadata['last-sequence-number'] === before['last-sequence-number'];
      const problems = [
        logged !== `${ROOT}${chain[v - 2]}` && `its metadata log ends with ${logged}`,
        ...(metadataOnly
          ? []
          : [
              id(head['parent-snapshot-id']) !== id(before['current-snapshot-id']) &&
                `its current snapshot's parent is ${id(head['parent-snapshot-id'])}, v${v - 1}'s current is ${id(before['current-snapshot-id'])}`,
              head['sequence-number'] !== before['last-sequence-number'] + 1 &&
                `its snapshot has sequence number ${head['sequence-number']} after ${before['last-sequence-number']}`,
              (before.snapshots ?? []).some(
                (s) => !snapshots.some((t) => id(t['snapshot-id']) === id(s['snapshot-id'])),
              ) && `it lost snapshots of v${v - 1}`,
              snapshots.length !== (before.snapshots ?? []).length + 1 &&
                `it holds ${snapshots.length} snapshots after ${(before.snapshots ?? []).length}`,
            ]),
        metadataOnly &&
          (before.snapshots ?? []).some(
            (s) => !snapshots.some((t) => id(t['snapshot-id']) === id(s['snapshot-id'])),
          ) &&
          `it lost snapshots of v${v - 1}`,
      ].filter((p): p is string => typeof p === 'string');
      for (const p of problems) violate(CHAIN, `${key} does not follow v${v - 1}: ${p}`, runsOf([head]));
      if (problems.length > 0) sound = false;
    }
    previous = metadata;
  }
  if (!sound || !previous) return undefined;
  const metadata = previous;
  // Along the parent chain from the current snapshot: strictly increasing, covering them all.
  const byId = new Map((metadata.snapshots ?? []).map((s) => [id(s['snapshot-id'])!, s]));
  const seen = new Set<string>();
  let at = byId.get(id(metadata['current-snapshot-id'])!);
  while (at) {
    const here = id(at['snapshot-id'])!;
    seen.add(here);
    const parentId = id(at['parent-snapshot-id']);
    const parent = parentId === undefined ? undefined : byId.get(parentId);
    if (parentId !== undefined && !parent) {
      violate(CHAIN, `${table}: snapshot ${here}'s parent ${parentId} is not in v${last}`, runsOf([at]));
      return undefined;
    }
    if (
      parent &&
      (parent['sequence-number'] >= at['sequence-number'] || parent['timestamp-ms'] >= at['timestamp-ms'])
    ) {
      violate(
        CHAIN,
        `${table}: snapshot ${here} (sequence ${at['sequence-number']}, ${at['timestamp-ms']}) does not come after its parent ${parentId} (sequence ${parent['sequence-number']}, ${parent['timestamp-ms']})`,
        runsOf([at, parent]),
      );
      return undefined;
    }
    at = parent;
  }
  const off = (metadata.snapshots ?? []).filter((s) => !seen.has(id(s['snapshot-id'])!));
  if (off.length > 0) {
    violate(
      CHAIN,
      `${table}: snapshots ${off.map((s) => id(s['snapshot-id'])).join(', ')} are off the current chain`,
      runsOf(off),
    );
    return undefined;
  }
  for (const s of metadata.snapshots ?? []) {
    const listKey = keyOf(s['manifest-list']);
    if (!listKey || !s3.peek(listKey)) {
      violate(
        CHAIN,
        `${table}: the manifest list ${s['manifest-list']} of snapshot ${id(s['snapshot-id'])} is missing`,
        runsOf([s]),
      );
      return undefined;
    }
  }
  return metadata;
}

/** 9 (the current snapshot's manifests) and the data files they hold; undefined when unreadable. */
async function currentFiles(
  s3: SimS3,
  table: string,
  metadata: TableMetadata,
  violate: Violate,
): Promise<TableFile[] | undefined> {
  const head = (metadata.snapshots ?? []).find(
    (s) => id(s['snapshot-id']) === id(metadata['current-snapshot-id']),
  );
  if (!head) return [];
  const runs = runsOf([head]);
  const manifestFiles = await decodeManifestList(s3.peek(keyOf(head['manifest-list'])!)!).catch(
    (error: Error) => {
      violate(
        CHAIN,
        `${table}: manifest list ${head['manifest-list']} does not decode: ${error.message}`,
        runs,
      );
      return undefined;
    },
  );
  if (!manifestFiles) return undefined;
  const files: TableFile[] = [];
  const adders = new Set<string>();
  for (const mf of manifestFiles) {
    const key = keyOf(mf.manifest_path);
    const body = key === undefined ? undefined : s3.peek(key);
    if (!body || body.byteLength !== Number(mf.manifest_length)) {
      violate(
        CHAIN,
        `${table}: manifest ${mf.manifest_path} of the current snapshot is ${body ? `${body.byteLength} bytes, listed ${mf.manifest_length}` : 'missing'}`,
        runs,
      );
      return undefined;
    }
    // A history table's run adds one manifest of new files; a merged manifest adds none, and a
    // current table's snapshot adds its delete manifest and rewrites beside its data manifest.
    const adder = id(mf.added_snapshot_id)!;
    if (!isCurrentTable(table) && mf.added_files_count > 0) {
      if (adders.has(adder))
        violate(FILES, `${table}: snapshot ${adder} added two manifests of the current snapshot`, runs);
      adders.add(adder);
    }
    let entries: ManifestEntry[];
    try {
      entries = await decodeManifest(body);
    } catch (error) {
      violate(
        CHAIN,
        `${table}: manifest ${mf.manifest_path} does not decode: ${(error as Error).message}`,
        runs,
      );
      return undefined;
    }
    for (const e of entries) {
      if (e.status === STATUS.DELETED) continue;
      const fileKey = keyOf(e.data_file.file_path);
      if (fileKey === undefined || id(e.snapshot_id ?? mf.added_snapshot_id) !== adder) {
        violate(
          FILES,
          `${table}: ${mf.manifest_path} holds ${e.data_file.file_path} as added by ${id(e.snapshot_id)}, not by ${adder}`,
          runs,
        );
        continue;
      }
      files.push({
        key: fileKey,
        snapshot: adder,
        rows: Number(e.data_file.record_count),
        bytes: Number(e.data_file.file_size_in_bytes),
        dt: e.data_file.partition.dt,
      });
    }
  }
  return files;
}

/** 10 and 11 for one appended table. */
async function checkRuns(
  s3: SimS3,
  table: string,
  metadata: TableMetadata,
  files: readonly TableFile[],
  manifests: ReadonlyMap<string, Manifest>,
  violate: Violate,
  othersOn: boolean,
): Promise<void> {
  const published = [...manifests.values()].filter((m) => m.status !== 'failed' && m.iceberg?.tables[table]);
  const snapshotsOf = new Map<string, Snapshot[]>();
  const theirs = (s: Snapshot) =>
    othersOn && s.summary['run-id'] === undefined && s.summary[OTHER_ENGINE_SUMMARY_KEY] !== undefined;
  // Once another engine rewrote the table's files, its rows are compared, not its files.
  const compacted = (metadata.snapshots ?? []).some((s) => theirs(s) && s.summary.operation === 'replace');
  for (const s of metadata.snapshots ?? []) {
    if (theirs(s)) continue;
    const run = s.summary['run-id'] ?? '(none)';
    snapshotsOf.set(run, [...(snapshotsOf.get(run) ?? []), s]);
  }
  for (const [run, snapshots] of snapshotsOf) {
    if (!published.some((m) => m.run_id === run)) {
      const m = manifests.get(run);
      violate(
        SNAPSHOTS,
        `${table} has snapshot ${snapshots.map((s) => id(s['snapshot-id'])).join(', ')} of run ${run}, which has ${m ? `a ${m.status} manifest naming no snapshot of ${table}` : 'no manifest'}`,
        [run],
      );
    }
  }
  const byKey = new Map<string, TableFile>();
  for (const f of files) {
    if (byKey.has(f.key))
      violate(FILES, `${table}: ${f.key} is in the current snapshot twice`, runsIn(f.key));
    byKey.set(f.key, f);
  }
  const expected = new Set<string>();
  for (const m of published) {
    const named = m.iceberg!.tables[table]!;
    const own = snapshotsOf.get(m.run_id) ?? [];
    if (own.length !== 1) {
      violate(SNAPSHOTS, `run ${m.run_id} has ${own.length} snapshots in ${table}`, [m.run_id]);
      continue;
    }
    const snapshot = own[0]!;
    const sid = id(snapshot['snapshot-id'])!;
    if (sid !== id(named.snapshot_id) || sid !== id(snapshotIdOf(m.run_id, table))) {
      violate(
        SNAPSHOTS,
        `run ${m.run_id}'s snapshot in ${table} is ${sid}, its manifest names ${named.snapshot_id}`,
        [m.run_id],
      );
    }
    const at = keyOf(named.metadata_location);
    const body = at === undefined ? undefined : s3.peek(at);
    const holds =
      body !== undefined && (metadataOf(body).snapshots ?? []).some((s) => id(s['snapshot-id']) === sid);
    if (!holds) {
      violate(
        SNAPSHOTS,
        `run ${m.run_id}'s manifest names ${named.metadata_location} for ${table}, which ${body ? 'does not hold' : 'is missing, so cannot hold'} snapshot ${sid}`,
        [m.run_id],
      );
    }
    // 11: the run's files of this table are in the table, added by its snapshot.
    let listedRows = 0;
    let tableRows = 0;
    for (const f of m.files) {
      if (f.format !== 'parquet' || f.table_or_entity !== table) continue;
      expected.add(f.key);
      listedRows += f.rows;
      if (compacted) {
        tableRows += f.rows;
        continue;
      }
      const held = byKey.get(f.key);
      if (!held) {
        violate(FILES, `${f.key} (run ${m.run_id}) is not in ${table}'s current snapshot`, [m.run_id]);
        continue;
      }
      tableRows += held.rows;
      const footer = footerRows(s3, f.key);
      const problems = [
        held.snapshot !== sid && `added by snapshot ${held.snapshot}, not the run's ${sid}`,
        held.dt !== m.dt && `in partition dt=${held.dt}, the run's is ${m.dt}`,
        held.bytes !== f.bytes && `${held.bytes} bytes in the table, ${f.bytes} in the run manifest`,
        held.rows !== f.rows && `${held.rows} records in the table, ${f.rows} rows in the run manifest`,
        footer !== held.rows && `${footer} rows in its footer, ${held.rows} in the table`,
      ].filter((p): p is string => typeof p === 'string');
      for (const p of problems) violate(FILES, `${table}: ${f.key} is ${p}`, [m.run_id]);
    }
    const added = Number(snapshot.summary['added-records']);
    if (tableRows !== listedRows || added !== listedRows) {
      violate(
        FILES,
        `run ${m.run_id}: ${listedRows} rows of ${table} in its manifest, ${tableRows} in the table's files, ${added} records its snapshot says it added`,
        [m.run_id],
      );
    }
  }
  if (compacted) {
    await checkRows(s3, table, metadata, published, violate);
    return;
  }
  for (const key of byKey.keys()) {
    if (!expected.has(key))
      violate(FILES, `${table}'s current snapshot holds ${key}, which no published run lists`, runsIn(key));
  }
}

/** 11 for a table another engine compacted: its live rows are the published runs' rows. */
async function checkRows(
  s3: SimS3,
  table: string,
  metadata: TableMetadata,
  published: readonly Manifest[],
  violate: Violate,
): Promise<void> {
  const columns = parquetTableOf(table, metadata).columns.map((c) => c.name);
  const have = await liveRows(s3, table, columns);
  if (!have) return; // a missing manifest is 9's to report
  const count = new Map<string, number>();
  const runOf = new Map<string, string>();
  for (const r of have) {
    const k = rowKey(r);
    count.set(k, (count.get(k) ?? 0) + 1);
  }
  for (const m of published) {
    for (const f of m.files) {
      if (f.format !== 'parquet' || f.table_or_entity !== table) continue;
      for (const r of await readRows(s3, f.key, columns)) {
        const k = rowKey(r);
        count.set(k, (count.get(k) ?? 0) - 1);
        runOf.set(k, m.run_id);
      }
    }
  }
  for (const [k, n] of count) {
    if (n === 0) continue;
    const run = runOf.get(k);
    violate(
      FILES,
      `${table}, compacted by another engine, holds ${n > 0 ? `${n} row(s) more` : `${-n} row(s) fewer`} than the published runs of ${k.slice(0, 160)}`,
      run ? [run] : [],
    );
  }
}

const rowKey = (row: Row): string =>
  JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

/** 15: the other engine's properties, tags and compactions are in the table's newest metadata. */
function checkOthersKept(
  table: string,
  metadata: TableMetadata,
  others: OthersCommitted,
  violate: Violate,
): void {
  for (const [key, value] of others.properties.get(table) ?? []) {
    const held = metadata.properties?.[key];
    if (held !== value)
      violate(OTHERS, `${table}: property ${key} is ${held}, the other engine set ${value}`, []);
  }
  for (const [tag, snapshot] of others.tags.get(table) ?? []) {
    const ref = metadata.refs?.[tag];
    if (!ref || id(ref['snapshot-id']) !== snapshot || ref.type !== 'tag')
      violate(OTHERS, `${table}: tag ${tag} on ${snapshot} is ${ref ? JSON.stringify(ref) : 'gone'}`, []);
  }
  for (const snapshot of others.compactions.get(table) ?? []) {
    if (!(metadata.snapshots ?? []).some((s) => id(s['snapshot-id']) === snapshot))
      violate(OTHERS, `${table}: the other engine's compaction ${snapshot} is gone`, []);
  }
}

/** The rows a Parquet file's footer counts (-1 when it is missing or unreadable). */
function footerRows(s3: SimS3, key: string): number {
  const body = s3.peek(key);
  if (!body) return -1;
  try {
    return Number(parquetMetadata(body).num_rows);
  } catch {
    return -1; // reported as a mismatch by the caller
  }
}

const runsOf = (snapshots: readonly Snapshot[]): string[] =>
  snapshots.map((s) => s.summary['run-id']).filter((r): r is string => r !== undefined);

const runsIn = (key: string): string[] => {
  const match = /(\d{8}T\d{6}Z-[0-9a-f]{6})/.exec(key);
  return match ? [match[1]!] : [];
};
