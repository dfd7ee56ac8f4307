/**
 * Schema evolution of the exporter's Iceberg tables, comparing schemas by meaning (field id,
 * name, type, requiredness), never by JSON text: the schema a table must have for a run's data
 * files to be valid under it, and the table's next schema when its current one does not take
 * them. Only Iceberg's safe changes are made:
 * - a column the files have and the table lacks is added, optional, with its pinned field id
 *   (above the table's `last-column-id`: ids are never reused), and old rows read it as NULL;
 * - a required column the files may leave null becomes optional.
 * Nothing is taken away: a column the files lack stays (old rows keep it; it must be optional),
 * and a column optional in the table stays optional though the files always set it. So a table
 * an `evolve` run evolved stays evolved when a `freeze` run writes to it: the frozen files are
 * valid under it (fewer columns, required where the table allows null). Anything else (a
 * changed type, a field id under another name) is refused, saying what to do.
 *
 * Compared with Iceberg's `UpdateSchema`, this is the union-by-name of the exporter's own
 * columns only: issue 28 generalises it to schemas other engines wrote.
 */
import { ExporterError } from '../errors.js';
import { lastColumnId } from './schema.js';
import type { IcebergField, IcebergSchema, IcebergType, PartitionSpec, TableMetadata } from './types.js';

/** Two field types are the same type: primitives by name, lists by element id, type and requiredness. */
export function sameType(a: IcebergType, b: IcebergType): boolean {
  if (typeof a === 'string' || typeof b === 'string') return a === b;
  return (
    a.type === b.type &&
    a['element-id'] === b['element-id'] &&
    a.element === b.element &&
    a['element-required'] === b['element-required']
  );
}

/** The same fields, in the same order, by id, name, type and requiredness (docs and schema ids aside). */
export function sameFields(a: IcebergSchema, b: IcebergSchema): boolean {
  return (
    a.fields.length === b.fields.length &&
    a.fields.every((f, i) => {
      const g = b.fields[i]!;
      return f.id === g.id && f.name === g.name && f.required === g.required && sameType(f.type, g.type);
    })
  );
}

/** The same partition fields by source id, field id, name and transform (key order aside). */
export function sameSpec(a: PartitionSpec, b: PartitionSpec): boolean {
  return (
    a.fields.length === b.fields.length &&
    a.fields.every((f, i) => {
      const g = b.fields[i]!;
      return (
        f['source-id'] === g['source-id'] &&
        f['field-id'] === g['field-id'] &&
        f.name === g.name &&
        f.transform === g.transform
      );
    })
  );
}

/** The current schema of `metadata`; throws when the metadata does not hold it. */
export function currentSchemaOf(metadata: TableMetadata): IcebergSchema {
  const found = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
  if (!found) {
    throw new ExporterError(
      `Iceberg metadata names current schema ${metadata['current-schema-id']} but does not hold it`,
    );
  }
  return found;
}

/** Why `current` cannot take files of `written`; a new column's id at or under `lastId` was used before. */
function refusal(current: IcebergSchema, written: IcebergSchema, lastId: number): string | undefined {
  const byId = new Map(current.fields.map((f) => [f.id, f]));
  const writtenIds = new Set(written.fields.map((f) => f.id));
  for (const w of written.fields) {
    const c = byId.get(w.id);
    if (c === undefined) {
      if (w.required) return `the new column ${w.name} is required`;
      if (w.id <= lastId) return `the new column ${w.name}'s field id ${w.id} was used before`;
      const other = current.fields.find((f) => f.name === w.name);
      if (other) return `its column ${w.name} has field id ${other.id}, the exporter's ${w.id}`;
    } else if (c.name !== w.name) {
      return `its field ${w.id} is ${c.name}, the exporter's ${w.name}`;
    } else if (!sameType(c.type, w.type)) {
      return `its column ${w.name} is of type ${JSON.stringify(c.type)}, the exporter's ${JSON.stringify(w.type)}`;
    }
  }
  const missing = current.fields.find((f) => f.required && !writtenIds.has(f.id));
  if (missing) return `it requires the column ${missing.name}, which the run does not write`;
  return undefined;
}

/**
 * The schema `metadata`'s table must have for data files of `written` to go in: its current
 * schema when that takes them, otherwise a new one (the next schema id) in the order of
 * `written`'s fields, then the table's columns the files lack. Throws, naming `table` and what to
 * do, when no safe change makes the table take them.
 *
 * @example
 * // a table of frozen form, a run of evolve form: schema 1 adds `_rescued`, relaxes the rest
 * const schema = schemaFor('reports', metadata, icebergSchema('reports', 'evolve'));
 */
export function schemaFor(table: string, metadata: TableMetadata, written: IcebergSchema): IcebergSchema {
  const current = currentSchemaOf(metadata);
  const why = refusal(current, written, metadata['last-column-id']);
  if (why !== undefined) {
    throw new ExporterError(
      `the Iceberg table ${table} (${metadata.location}) holds snapshots with another schema: ${why}; ` +
        'the exporter writes only tables of its own columns: drop the table or point the export elsewhere',
    );
  }
  const byId = new Map(current.fields.map((f) => [f.id, f]));
  let changed = false;
  const fields: IcebergField[] = written.fields.map((w) => {
    const c = byId.get(w.id);
    if (c === undefined) changed = true;
    else if (c.required && !w.required) changed = true;
    // The table's requiredness wins unless the files may hold NULL: never required again.
    return { ...w, required: c === undefined ? false : c.required && w.required };
  });
  if (!changed) return current;
  const writtenIds = new Set(written.fields.map((f) => f.id));
  fields.push(...current.fields.filter((f) => !writtenIds.has(f.id)));
  const nextId = Math.max(...metadata.schemas.map((s) => s['schema-id'])) + 1;
  return { type: 'struct', 'schema-id': nextId, fields };
}

/**
 * `metadata` with `schema` current: added to `schemas` (the old ones kept: old snapshots and
 * manifests name them) and `last-column-id` raised to its highest id. `metadata` itself when
 * `schema` is its current schema already.
 */
export function withSchema(metadata: TableMetadata, schema: IcebergSchema): TableMetadata {
  if (schema['schema-id'] === metadata['current-schema-id']) return metadata;
  return {
    ...metadata,
    'last-column-id': Math.max(metadata['last-column-id'], lastColumnId(schema)),
    'current-schema-id': schema['schema-id'],
    schemas: [...metadata.schemas, schema],
  };
}
