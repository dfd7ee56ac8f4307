/**
 * Another engine writing the exporter's Iceberg tables through the same bucket, as Athena or
 * Spark would on a file-catalog (Hadoop-style) table: it loads a table's newest
 * `vN.metadata.json`, writes its own files, and creates `v(N+1)` if absent, so the file
 * catalog's conditional create decides a race between it and the exporter's committers. What it
 * commits is shaped as those engines write it: metadata in Java's key order and spacing
 * (`javaMetadataText`), manifests and manifest lists with Athena's Avro writer schemas
 * (`athenaManifest`, `athenaManifestList`, test/helpers/foreign-engine.ts). Two changes:
 * - `ALTER TABLE … SET TBLPROPERTIES`: a metadata-only version (no snapshot) with a property of
 *   its own, and in half of them a tag on the current snapshot;
 * - `OPTIMIZE … REWRITE DATA`: a `replace` snapshot whose new data files (one per `dt`, written
 *   with the project's Parquet encoder and the tables' field ids) hold the table's live rows,
 *   position deletes applied (files of several runs' rows, as a compaction makes), and whose
 *   manifests mark every old data file and delete file DELETED.
 * A create that meets 412 (the exporter won) is retried from a fresh load, as Iceberg's commit
 * retries; the engine's actor crashes, loses answers and meets 409/503 like every other.
 * `committed` records what it committed (invariant 15, iceberg-invariants.ts: the exporter's
 * later commits keep it).
 */
import { zstdDecompressSync } from 'node:zlib';
import { parquetReadObjects } from 'hyparquet';
import { PreconditionFailedError } from '../../shared/errors.js';
import { SCHEMA_CONTRACTS } from '../../shared/export/tables.js';
import {
  CONTENT,
  decodeManifest,
  decodeManifestList,
  type ManifestEntry,
  STATUS,
} from '../../shared/iceberg/avro.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { keyOfLocation, locationOfKey } from '../../shared/iceberg/locations.js';
import { type IcebergTableName, icebergParquetTable } from '../../shared/iceberg/schema.js';
import type { Snapshot, TableMetadata } from '../../shared/iceberg/types.js';
import { decodeRows, openDecodable } from '../../shared/parquet/decode.js';
import { encodeParquetColumns } from '../../shared/parquet/encode.js';
import type { Cell, ParquetTable } from '../../shared/parquet/schema.js';
import type { Storage } from '../../shared/storage/storage.js';
import {
  athenaManifest,
  athenaManifestList,
  type ForeignEntry,
  javaMetadataText,
} from '../helpers/foreign-engine.js';
import type { Actor } from './scheduler.js';

/** What the engine takes of its actor: its randomness (an integration test gives it a seeded one). */
type Randomness = Pick<Actor, 'rng'>;

/** What the other engine did in a seed (iceberg-cases.ts adds the races it won, from the log). */
export interface OtherEngineCases {
  /** Versions it created: metadata-only changes and compactions. */
  othersCommits: number;
  /** Its creates that met 412: an exporter's commit came first (it retried from a fresh load). */
  othersRaceLost: number;
  /** Compactions committed, of history tables and of `_current` tables (delete files removed). */
  compactions: number;
  currentCompactions: number;
}

export const noOtherEngineCases = (): OtherEngineCases => ({
  othersCommits: 0,
  othersRaceLost: 0,
  compactions: 0,
  currentCompactions: 0,
});

/** What it committed, per table: the properties and tags the exporter must keep. */
export interface OthersCommitted {
  properties: Map<string, Map<string, string>>;
  tags: Map<string, Map<string, string>>;
  /** The `replace` snapshots it committed, per table (as decimal ids). */
  compactions: Map<string, Set<string>>;
}

/** Summary key the other engine's snapshots carry (Athena's), so that invariants can tell them. */
export const OTHER_ENGINE_SUMMARY_KEY = 'trino_query_id';
/** Attempts of one change before it gives up (Iceberg's `commit.retry.num-retries` is 4). */
const ATTEMPTS = 4;

const hex = (actor: Randomness, n: number): string =>
  Array.from({ length: n }, () => actor.rng.int(0, 15).toString(16)).join('');
const uuid = (actor: Randomness): string =>
  `${hex(actor, 8)}-${hex(actor, 4)}-4${hex(actor, 3)}-a${hex(actor, 3)}-${hex(actor, 12)}`;
/** A positive 63-bit snapshot id, as Athena's are. */
const snapshotId = (actor: Randomness): bigint =>
  (BigInt(actor.rng.int(1, 0x3fff_ffff)) << 32n) | BigInt(actor.rng.int(0, 0xffff_ffff));

const sameId = (a: number | bigint | null | undefined, b: number | bigint | null | undefined) =>
  a !== undefined && a !== null && b !== undefined && b !== null && BigInt(a) === BigInt(b);

/** A Trino query id (what Athena's snapshots carry in their summary). */
const queryId = (actor: Randomness, at: number): string =>
  `${new Date(at).toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '_')}_${String(actor.rng.int(0, 99999)).padStart(5, '0')}_${hex(actor, 5)}`;

export class OtherEngine {
  readonly cases = noOtherEngineCases();
  readonly committed: OthersCommitted = { properties: new Map(), tags: new Map(), compactions: new Map() };
  #changes = 0;

  /**
   * One change to one of the tables the bucket holds (none while there is none): a compaction
   * in `compactShare` of them (a property change when there is nothing to rewrite), otherwise a
   * property change. `now` is the engine's clock.
   */
  async act(
    actor: Randomness,
    storage: Storage,
    tables: readonly string[],
    now: () => number,
    compactShare: number,
  ): Promise<void> {
    if (tables.length === 0) return;
    const table = actor.rng.pick(tables);
    const compact = actor.rng.chance(compactShare);
    const change = ++this.#changes;
    const catalog = new FileCatalog(storage);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const base = await catalog.load(table);
      const metadata = base.metadata;
      if (!metadata || !base.metadataLocation) return;
      const at = Math.max(now(), metadata['last-updated-ms'] + 1);
      // A compaction with nothing to rewrite sets a property instead.
      const next =
        (compact ? await this.#compaction(actor, storage, table, metadata, at) : undefined) ??
        this.#properties(actor, table, metadata, change);
      if (!next) return;
      const version = Number(base.version) + 1;
      const key = `${keyOfLocation(storage, base.metadataLocation).replace(/[^/]+$/, '')}v${version}.metadata.json`;
      const written: TableMetadata = {
        ...next.metadata,
        'last-updated-ms': at,
        'metadata-log': [
          ...(metadata['metadata-log'] ?? []),
          { 'timestamp-ms': metadata['last-updated-ms'], 'metadata-file': base.metadataLocation },
        ],
      };
      try {
        await storage.put(key, javaMetadataText(written), {
          ifNoneMatch: '*',
          contentType: 'application/json',
        });
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
        this.cases.othersRaceLost++;
        continue;
      }
      this.cases.othersCommits++;
      next.done();
      await storage
        .put(key.replace(/v\d+\.metadata\.json$/, 'version-hint.text'), String(version))
        .catch(() => {});
      return;
    }
  }

  /** `ALTER TABLE … SET TBLPROPERTIES`: a property of its own; in half of them a tag too. */
  #properties(actor: Randomness, table: string, metadata: TableMetadata, change: number) {
    const property = `sim.other-engine.change-${change}`;
    const value = hex(actor, 6);
    const current = metadata['current-snapshot-id'];
    const tag =
      current !== undefined && current !== null && actor.rng.chance(0.5) ? `audit-${change}` : undefined;
    const refs = { ...(metadata.refs ?? {}) };
    if (tag) refs[tag] = { 'snapshot-id': current!, type: 'tag', 'max-ref-age-ms': 31_536_000_000 };
    return {
      metadata: { ...metadata, properties: { ...(metadata.properties ?? {}), [property]: value }, refs },
      done: () => {
        add(this.committed.properties, table, property, value);
        if (tag) add(this.committed.tags, table, tag, String(current));
      },
    };
  }

  /**
   * `OPTIMIZE … REWRITE DATA` of the whole table: its live rows (deletes applied) into one new
   * data file per `dt`, the old data and delete files marked DELETED (a single file too, as
   * Spark's `rewrite-all` does). Undefined when the table holds no data file.
   */
  async #compaction(actor: Randomness, storage: Storage, table: string, metadata: TableMetadata, at: number) {
    const head = (metadata.snapshots ?? []).find((s) =>
      sameId(s['snapshot-id'], metadata['current-snapshot-id']),
    );
    if (!head) return undefined;
    const list = await storage.get(keyOfLocation(storage, head['manifest-list']));
    if (!list) return undefined;
    const data: ManifestEntry[] = [];
    const deletes: ManifestEntry[] = [];
    for (const mf of await decodeManifestList(list.body)) {
      const body = await storage.get(keyOfLocation(storage, mf.manifest_path));
      if (!body) return undefined;
      for (const e of await decodeManifest(body.body)) {
        if (e.status === STATUS.DELETED) continue;
        // Sequence numbers made explicit, as a rewrite writes them (ADDED entries inherit theirs).
        const entry = {
          ...e,
          sequence_number: e.sequence_number ?? mf.sequence_number,
          file_sequence_number: e.file_sequence_number ?? mf.sequence_number,
        };
        (e.data_file.content === CONTENT.DATA ? data : deletes).push(entry);
      }
    }
    if (data.length === 0) return undefined;
    const deleted = new Set<string>();
    for (const d of deletes) {
      const file = await storage.get(keyOfLocation(storage, d.data_file.file_path));
      if (!file) return undefined;
      const rows = await parquetReadObjects({
        file: arrayBuffer(file.body),
        columns: ['file_path', 'pos'],
        compressors: ZSTD,
      });
      for (const r of rows) deleted.add(`${r.file_path}#${Number(r.pos)}`);
    }
    const parquet = parquetTableOf(table, metadata);
    const byDt = new Map<string, Cell[][]>();
    for (const d of data) {
      const file = await storage.get(keyOfLocation(storage, d.data_file.file_path));
      if (!file) return undefined;
      const decodable = openDecodable(file.body);
      const rows = Number(decodable.metadata.num_rows);
      const columns: Cell[][] = parquet.columns.map(() => []);
      await decodeRows(parquet, decodable, 0, rows, columns);
      const dt = d.data_file.partition.dt ?? '';
      const out = byDt.get(dt) ?? parquet.columns.map(() => []);
      for (let pos = 0; pos < rows; pos++) {
        if (deleted.has(`${d.data_file.file_path}#${pos}`)) continue;
        for (let i = 0; i < columns.length; i++) out[i]!.push(columns[i]![pos]!);
      }
      byDt.set(dt, out);
    }
    const id = snapshotId(actor);
    const name = uuid(actor);
    const stamp = new Date(at).toISOString().slice(0, 10).replace(/-/g, '');
    const folder = keyOfLocation(storage, metadata.location);
    const added: ForeignEntry[] = [];
    let addedRows = 0;
    let addedBytes = 0;
    for (const [dt, columns] of [...byDt].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const rows = columns[0]!.length;
      if (rows === 0) continue;
      const bytes = encodeParquetColumns(parquet, columns);
      const key = `${folder}/data/dt=${dt}/${stamp}_optimize-${name}-${String(added.length).padStart(5, '0')}.parquet`;
      await storage.put(key, bytes);
      added.push({
        status: STATUS.ADDED,
        snapshot_id: id,
        sequence_number: null,
        file_sequence_number: null,
        data_file: {
          content: CONTENT.DATA,
          file_path: locationOfKey(storage, key),
          record_count: rows,
          file_size_in_bytes: bytes.length,
          dt,
        },
      });
      addedRows += rows;
      addedBytes += bytes.length;
    }
    const gone = (entries: readonly ManifestEntry[]): ForeignEntry[] =>
      entries.map((e) => ({
        status: STATUS.DELETED,
        snapshot_id: id,
        sequence_number: e.sequence_number,
        file_sequence_number: e.file_sequence_number,
        data_file: {
          content: e.data_file.content as 0 | 1,
          file_path: e.data_file.file_path,
          record_count: e.data_file.record_count,
          file_size_in_bytes: e.data_file.file_size_in_bytes,
          dt: e.data_file.partition.dt ?? '',
        },
      }));
    const sequence = metadata['last-sequence-number'] + 1;
    const header = {
      schemaJson: JSON.stringify(
        metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']),
      ),
      schemaId: metadata['current-schema-id'],
      specJson: JSON.stringify(
        metadata['partition-specs'].find((s) => s['spec-id'] === metadata['default-spec-id'])?.fields ?? [],
      ),
    };
    const rowsOf = (entries: readonly ManifestEntry[]) =>
      entries.reduce((n, e) => n + Number(e.data_file.record_count), 0);
    const manifests = [
      { entries: added, content: 0, added: added.length, deleted: 0, addedRows, deletedRows: 0 },
      {
        entries: gone(data),
        content: 0,
        added: 0,
        deleted: data.length,
        addedRows: 0,
        deletedRows: rowsOf(data),
      },
      {
        entries: gone(deletes),
        content: 1,
        added: 0,
        deleted: deletes.length,
        addedRows: 0,
        deletedRows: rowsOf(deletes),
      },
    ].filter((m) => m.entries.length > 0);
    const listed = [];
    for (const [i, m] of manifests.entries()) {
      const bytes = await athenaManifest(m.entries, header);
      const key = `${folder}/metadata/${name}-m${i}.avro`;
      await storage.put(key, bytes);
      listed.push({
        manifest_path: locationOfKey(storage, key),
        manifest_length: bytes.length,
        content: m.content,
        sequence_number: sequence,
        min_sequence_number: sequence,
        added_snapshot_id: id,
        added: m.added,
        existing: 0,
        deleted: m.deleted,
        addedRows: m.addedRows,
        existingRows: 0,
        deletedRows: m.deletedRows,
      });
    }
    const listBytes = await athenaManifestList(listed, {
      snapshotId: id,
      parentSnapshotId: head['snapshot-id'],
      sequenceNumber: sequence,
    });
    const listKey = `${folder}/metadata/snap-${id}-1-${name}.avro`;
    await storage.put(listKey, listBytes);
    const replace: Snapshot = {
      'sequence-number': sequence,
      'snapshot-id': id,
      'parent-snapshot-id': head['snapshot-id'],
      'timestamp-ms': at,
      summary: {
        operation: 'replace',
        [OTHER_ENGINE_SUMMARY_KEY]: queryId(actor, at),
        'added-data-files': String(added.length),
        'deleted-data-files': String(data.length),
        'removed-position-delete-files': String(deletes.length),
        'added-records': String(addedRows),
        'deleted-records': String(rowsOf(data)),
        'total-records': String(addedRows),
        'total-data-files': String(added.length),
        'total-delete-files': '0',
        'total-files-size': String(addedBytes),
        'total-position-deletes': '0',
        'total-equality-deletes': '0',
      },
      'manifest-list': locationOfKey(storage, listKey),
      'schema-id': metadata['current-schema-id'],
    };
    return {
      metadata: {
        ...metadata,
        'last-sequence-number': sequence,
        'current-snapshot-id': id,
        refs: { ...(metadata.refs ?? {}), main: { 'snapshot-id': id, type: 'branch' as const } },
        snapshots: [...(metadata.snapshots ?? []), replace],
        'snapshot-log': [...(metadata['snapshot-log'] ?? []), { 'timestamp-ms': at, 'snapshot-id': id }],
      } as TableMetadata,
      done: () => {
        if (table.endsWith('_current')) this.cases.currentCompactions++;
        else this.cases.compactions++;
        const set = this.committed.compactions.get(table) ?? new Set<string>();
        set.add(id.toString());
        this.committed.compactions.set(table, set);
      },
    };
  }
}

/**
 * The Parquet table of `table`'s data files: the contract whose columns are the table's current
 * schema's (the engine writes the table's schema, with its field ids).
 */
export function parquetTableOf(table: string, metadata: TableMetadata): ParquetTable {
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
  const names = (schema?.fields ?? []).map((f) => f.name).join(',');
  const tables = SCHEMA_CONTRACTS.map((c) => icebergParquetTable(table as IcebergTableName, c));
  const found = tables.find((t) => t.columns.map((c) => c.name).join(',') === names);
  if (!found) throw new Error(`${table}: no schema contract has the columns ${names}`);
  return found;
}

function add(map: Map<string, Map<string, string>>, table: string, key: string, value: string): void {
  const inner = map.get(table) ?? new Map<string, string>();
  inner.set(key, value);
  map.set(table, inner);
}

const ZSTD = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };
const arrayBuffer = (body: Uint8Array): ArrayBuffer =>
  body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
