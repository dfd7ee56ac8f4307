/**
 * The metadata a commit builds on: the table's own (its schema evolved when the run's files
 * need it), fresh metadata for a table without snapshots, or the exporter's last committed
 * metadata when the catalog lost its pointer.
 */
import { createHash } from 'node:crypto';
import { ExporterError } from '../errors.js';
import { STATE_KEYS } from '../layout.js';
import type { Storage } from '../storage/storage.js';
import type { CatalogTable } from './catalog.js';
import { parseJson } from './json.js';
import { keyOfLocation } from './locations.js';
import {
  type IcebergTableName,
  lastColumnId,
  partitionSpec,
  SCHEMA_ID,
  SPEC_ID,
  TABLE_PROPERTIES,
} from './schema.js';
import { sameFields, sameSpec, schemaFor, withSchema } from './schema-evolution.js';
import type { IcebergSchema, TableMetadata } from './types.js';

/** The Iceberg format version the exporter writes (manifests, lists and metadata alike). */
export const FORMAT_VERSION = 2;

/**
 * Refuses a table the exporter cannot write without harm: one of a later format version (v2
 * metadata written over a v3 table drops its row lineage, `next-row-id`, and v3 readers' data),
 * or a v1 table holding snapshots (v1 metadata lacks what v2 requires; Iceberg upgrades it).
 */
function checkFormatVersion(table: IcebergTableName, base: CatalogTable): void {
  const found = base.metadata;
  const version = Number(found?.['format-version'] ?? FORMAT_VERSION);
  const holdsSnapshots = (found?.snapshots?.length ?? 0) > 0;
  if (version > FORMAT_VERSION || (version < FORMAT_VERSION && holdsSnapshots)) {
    const what =
      version > FORMAT_VERSION
        ? `the exporter writes version ${FORMAT_VERSION} and would drop what version ${version} keeps: point the export at another location`
        : `upgrade it to version ${FORMAT_VERSION} first (ALTER TABLE … SET TBLPROPERTIES ('format-version'='${FORMAT_VERSION}') in Spark)`;
    throw new ExporterError(
      `the Iceberg table ${table} (${base.metadataLocation}) is of format version ${version}: ${what}`,
    );
  }
}

/** A deterministic UUID (v4 layout) from a name, for a new table's `table-uuid`. */
function uuidOf(name: string): string {
  const h = createHash('sha256').update(name).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * The metadata a commit builds on. A table holding snapshots: its own metadata, its schema
 * evolved when the run's files (`written`) need it (`schema-evolution.ts`); one of another
 * partition spec is not ours to write. A table without snapshots: its own metadata when it has
 * the exporter's spec and `written`'s schema, otherwise (no metadata yet, or Glue's initial
 * metadata made from the stack's columns, with ids of its own choosing) fresh metadata with
 * `written`'s schema (schema id 0), keeping the table's uuid and history. Everything else others
 * wrote in the table's metadata (properties, refs, statistics, sort orders, keys unknown here)
 * is carried as it is. Throws for a table of another format version (`checkFormatVersion`).
 */
export function baseMetadata(
  table: IcebergTableName,
  location: string,
  base: CatalogTable,
  written: IcebergSchema,
  now: Date,
): TableMetadata {
  checkFormatVersion(table, base);
  const found = base.metadata;
  const spec = found?.['partition-specs'].find((s) => s['spec-id'] === found['default-spec-id']);
  const ownSpec = spec !== undefined && sameSpec(spec, partitionSpec(table));
  if (found && (found.snapshots?.length ?? 0) > 0) {
    if (!ownSpec) {
      throw new ExporterError(
        `the Iceberg table ${table} (${base.metadataLocation}) holds snapshots with another schema or partition spec: ` +
          'the exporter writes only tables of its own layout; drop the table or point the export elsewhere',
      );
    }
    return withSchema(found, schemaFor(table, found, written));
  }
  const schema = found?.schemas.find((s) => s['schema-id'] === found['current-schema-id']);
  if (found && ownSpec && schema && sameFields(schema, written)) return found;
  return {
    'format-version': FORMAT_VERSION,
    'table-uuid': found?.['table-uuid'] ?? uuidOf(location),
    location,
    'last-sequence-number': found?.['last-sequence-number'] ?? 0,
    'last-updated-ms': now.getTime(),
    'last-column-id': lastColumnId(written),
    'current-schema-id': SCHEMA_ID,
    schemas: [written],
    'default-spec-id': SPEC_ID,
    'partition-specs': [partitionSpec(table)],
    'last-partition-id': Math.max(...partitionSpec(table).fields.map((f) => f['field-id'])),
    'default-sort-order-id': 0,
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    properties: { ...(found?.properties ?? {}), ...TABLE_PROPERTIES },
    'current-snapshot-id': null,
    snapshots: [],
    'snapshot-log': [],
    'metadata-log': found?.['metadata-log'] ?? [],
    refs: {},
  };
}

/**
 * Records the metadata file a commit made current (`state/iceberg/<table>.json`), best effort:
 * it is only read when the catalog has lost its pointer.
 */
export async function keepPointer(storage: Storage, table: string, metadataLocation: string): Promise<void> {
  await storage
    .put(STATE_KEYS.icebergPointer(table), `${JSON.stringify({ metadata_location: metadataLocation })}\n`)
    .catch(() => undefined);
}

/**
 * The table to build on: as loaded, unless the catalog lost its pointer — no metadata, or
 * metadata without a snapshot — while the exporter had committed snapshots (a CloudFormation
 * update of a Glue Iceberg table rewrites its parameters and drops `metadata_location`; Glue
 * then knows no metadata, or its own fresh one). Then the last metadata the exporter committed
 * is the base, and the catalog's own version is kept for the swap, so the table's history,
 * snapshots and files stay whole instead of starting again from nothing.
 */
export async function adoptLostPointer(
  storage: Storage,
  table: string,
  loaded: CatalogTable,
): Promise<CatalogTable> {
  if ((loaded.metadata?.snapshots?.length ?? 0) > 0) return loaded;
  const record = await storage.get(STATE_KEYS.icebergPointer(table));
  if (!record) return loaded;
  const { metadata_location: location } = JSON.parse(Buffer.from(record.body).toString('utf8')) as {
    metadata_location: string;
  };
  if (location === loaded.metadataLocation) return loaded;
  const found = await storage.get(keyOfLocation(storage, location));
  if (!found) return loaded;
  const metadata = parseJson(Buffer.from(found.body).toString('utf8')) as TableMetadata;
  if ((metadata.snapshots?.length ?? 0) === 0) return loaded;
  return { ...loaded, metadata };
}
