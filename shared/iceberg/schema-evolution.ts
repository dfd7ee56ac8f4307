/**
 * Schema evolution of the exporter's Iceberg tables, beside other engines that change them too,
 * comparing schemas by meaning (field id, name, type, requiredness), never by JSON text, and
 * keeping every key of a field or schema that others wrote (`doc`, `initial-default`,
 * `write-default`, `identifier-field-ids` ...).
 *
 * The run's Parquet files are written before the commit, with the exporter's pinned field ids
 * (`field-ids.ts`), and Iceberg readers resolve a file's columns by field id. So the one rule:
 * a field id of the files must mean, in the table, the column the files mean by it. Then:
 * - a column the files have and the table lacks is added, optional, with its pinned id, if the
 *   table never used that id (above its `last-column-id`), or used it only for this very column
 *   (the exporter's column, dropped by another engine: it comes back with its id, and old rows
 *   that had it read their values again); old rows read NULL for a new column;
 * - a column of the files that another engine renamed keeps the table's name (the files map by
 *   id); one it promoted (int→long, float→double, decimal precision widened) keeps the wider
 *   type; one the exporter now writes wider is promoted in the table; a required column the files
 *   may leave null becomes optional (`element-required` likewise);
 * - the table's columns the files lack stay (other engines' columns, and the exporter's old
 *   ones): they read NULL (or their `initial-default`) in the exporter's rows.
 * Refused, in one line saying what to do: a pinned id the table uses, or used, for another
 * column (another engine's `ADD COLUMN` took the id the exporter pinned for a later column), a
 * type no promotion joins, a column of the exporter's name under another id, a required column
 * or one with its own `write-default` that the files lack, an identifier field the files may
 * leave null. The next schema takes the next schema id, or the id of an equal older schema, as
 * Java's `TableMetadata` does.
 */
import { ExporterError } from '../errors.js';
import { RESCUED_COLUMN } from '../export/tables.js';
import { stringifyJson } from './json.js';
import { lastColumnId } from './schema.js';
import type { IcebergField, IcebergSchema, IcebergType, PartitionSpec, TableMetadata } from './types.js';

/** Two field types are the same type: primitives by name, lists by element id, type and requiredness. */
export function sameType(a: IcebergType, b: IcebergType): boolean {
  return canonical(a) === canonical(b);
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

/**
 * The same partition fields by source id, field id and transform (key order aside): a field
 * another engine renamed (`ALTER TABLE … RENAME PARTITION FIELD`) is the same field, as readers
 * match partition values by field id.
 */
export function sameSpec(a: PartitionSpec, b: PartitionSpec): boolean {
  return (
    a.fields.length === b.fields.length &&
    a.fields.every((f, i) => {
      const g = b.fields[i]!;
      return (
        f['source-id'] === g['source-id'] && f['field-id'] === g['field-id'] && f.transform === g.transform
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

/**
 * A type as one comparable string: a primitive by name (`decimal(16,2)` however spaced), a
 * nested type by its meaning (ids, element/key/value types, requiredness; `doc` and other
 * keys aside). Other engines' types (struct, map, fixed ...) are compared the same way.
 */
function canonical(type: unknown): string {
  if (typeof type === 'string') return type.replace(/\s+/g, '');
  if (typeof type !== 'object' || type === null) return stringifyJson(type);
  const t = type as Record<string, unknown>;
  if (t.type === 'list') return `list<${t['element-id']}:${canonical(t.element)}:${t['element-required']}>`;
  if (t.type === 'map') {
    return `map<${t['key-id']}:${canonical(t.key)},${t['value-id']}:${canonical(t.value)}:${t['value-required']}>`;
  }
  const fields = Array.isArray(t.fields) ? (t.fields as Record<string, unknown>[]) : [];
  return `struct<${fields.map((f) => `${f.id}:${f.name}:${canonical(f.type)}:${f.required}`).join(',')}>`;
}

const DECIMAL = /^decimal\((\d+),(\d+)\)$/;

/** Whether values of primitive `from` read as primitive `to`: the same type, or an Iceberg promotion. */
function promotes(from: string, to: string): boolean {
  if (from === to) return true;
  if (from === 'int' && to === 'long') return true;
  if (from === 'float' && to === 'double') return true;
  const f = DECIMAL.exec(from);
  const t = DECIMAL.exec(to);
  return f !== null && t !== null && f[2] === t[2] && Number(t[1]) >= Number(f[1]);
}

/**
 * The type a table's column must have to read both its own data (`table`) and files of
 * `file`: `table` itself (the same object) when it reads them already, a wider or relaxed one
 * when Iceberg allows the change, undefined when no promotion joins them.
 */
function joinedType(table: unknown, file: unknown): unknown {
  if (typeof table === 'string' && typeof file === 'string') {
    const t = canonical(table);
    const f = canonical(file);
    if (promotes(f, t)) return table;
    return promotes(t, f) ? file : undefined;
  }
  const t = table as Record<string, unknown> | null;
  const f = file as Record<string, unknown> | null;
  if (t?.type === 'list' && f?.type === 'list' && t['element-id'] === f['element-id']) {
    const element = joinedType(t.element, f.element);
    if (element === undefined) return undefined;
    const required = t['element-required'] === true && f['element-required'] === true;
    if (element === t.element && required === t['element-required']) return table;
    return { ...t, element, 'element-required': required };
  }
  return canonical(table) === canonical(file) ? table : undefined;
}

const typeText = (type: unknown): string => (typeof type === 'string' ? type : canonical(type));

/** Every field a schema of `metadata` ever gave the id `id` (a dropped column lives on in old schemas). */
const fieldsEverWithId = (metadata: TableMetadata, id: number): IcebergField[] =>
  metadata.schemas.flatMap((s) => s.fields.filter((f) => f.id === id));

/** A refusal: why the table cannot take the files, then what to do. */
class Refusal {
  constructor(
    readonly why: string,
    readonly todo: string,
  ) {}
}

const NEW_TABLE = 'export to a new table (docs/iceberg.md, "Schema changes")';

/** What to do when the files' field id of `column` means another column in the table: `freeze` files lack `_rescued`. */
const idTaken = (column: string): string =>
  column === RESCUED_COLUMN ? `run with schema_contract freeze, or ${NEW_TABLE}` : NEW_TABLE;

/**
 * The field of the table for the files' field `w`: the table's own (`current`), changed where
 * the files need it (type, requiredness), a field to add, or a refusal.
 */
function fieldFor(metadata: TableMetadata, current: IcebergSchema, w: IcebergField): IcebergField | Refusal {
  const c = current.fields.find((f) => f.id === w.id);
  const history = fieldsEverWithId(metadata, w.id);
  if (c !== undefined) {
    // Another engine's rename keeps the id: the exporter's column all the same. An id the
    // exporter's name never had is another column: its values are not the files' values.
    if (c.name !== w.name && !history.some((f) => f.name === w.name)) {
      return new Refusal(
        `field id ${w.id}, the exporter's ${w.name}, is the table's column ${c.name}`,
        idTaken(w.name),
      );
    }
    const type = joinedType(c.type, w.type);
    if (type === undefined) {
      return new Refusal(
        `its column ${c.name} (field id ${w.id}) is of type ${typeText(c.type)}, the exporter writes ${typeText(w.type)}, and Iceberg promotes neither to the other`,
        NEW_TABLE,
      );
    }
    const required = c.required && w.required;
    if (!w.required && (current['identifier-field-ids'] ?? []).includes(w.id)) {
      return new Refusal(
        `its column ${c.name} is an identifier field, which the exporter's files may leave null`,
        `remove it from the table's identifier fields (ALTER TABLE ... DROP IDENTIFIER FIELDS ${c.name})`,
      );
    }
    if (type === c.type && required === c.required) return c;
    return { ...c, type: type as IcebergType, required };
  }
  const other = current.fields.find((f) => f.name === w.name);
  if (other !== undefined) {
    return new Refusal(
      `its column ${w.name} has field id ${other.id}, the exporter's files ${w.id}`,
      `rename the table's column ${w.name} (the exporter then adds its own back) or ${NEW_TABLE}`,
    );
  }
  if (history.length === 0 && w.id <= metadata['last-column-id']) {
    return new Refusal(
      `the field id ${w.id} of the exporter's new column ${w.name} was given to a column the table no longer describes (last-column-id ${metadata['last-column-id']})`,
      idTaken(w.name),
    );
  }
  if (history.length > 0 && !history.some((f) => f.name === w.name)) {
    return new Refusal(
      `the field id ${w.id} of the exporter's new column ${w.name} was the table's column ${history[0]!.name}, whose values old files hold`,
      idTaken(w.name),
    );
  }
  // New, or the exporter's own column that another engine dropped: back with its id, and of a
  // type that reads every old file that has it.
  let type: unknown = w.type;
  for (const h of history) {
    type = type === undefined ? undefined : joinedType(type, h.type);
  }
  if (type === undefined) {
    return new Refusal(
      `the exporter's column ${w.name} (field id ${w.id}), dropped from the table, was of type ${typeText(history.at(-1)!.type)} and is now ${typeText(w.type)}`,
      NEW_TABLE,
    );
  }
  return { ...w, type: type as IcebergType, required: false };
}

/** Why the exporter's rows would read wrong in `f`, a column of the table the files lack. */
function lackedRefusal(f: IcebergField): Refusal | undefined {
  const initial = f['initial-default'];
  const write = f['write-default'];
  if (f.required && (initial === undefined || initial === null)) {
    return new Refusal(
      `it requires the column ${f.name}, which the exporter does not write`,
      `make it optional (ALTER TABLE ... ALTER COLUMN ${f.name} DROP NOT NULL)`,
    );
  }
  if (write !== undefined && write !== null && stringifyJson(write) !== stringifyJson(initial)) {
    return new Refusal(
      `its column ${f.name} has a write-default the exporter's rows would not get (the exporter does not write ${f.name})`,
      `drop the column's default, or the column`,
    );
  }
  return undefined;
}

/**
 * The table's fields with the files' fields in them: the table's order, each changed field in
 * its place, each added field before the next field of `written` the table has (`_rescued`
 * before `dt`, as in a fresh table), or last.
 */
function mergedFields(
  current: IcebergSchema,
  written: IcebergSchema,
  resolved: IcebergField[],
): IcebergField[] {
  const byId = new Map(resolved.map((f) => [f.id, f]));
  const fields = current.fields.map((f) => byId.get(f.id) ?? f);
  const inTable = new Set(current.fields.map((f) => f.id));
  written.fields.forEach((w, i) => {
    if (inTable.has(w.id)) return;
    const next = written.fields.slice(i + 1).find((g) => inTable.has(g.id));
    const at = next === undefined ? -1 : fields.findIndex((f) => f.id === next.id);
    if (at < 0) fields.push(byId.get(w.id)!);
    else fields.splice(at, 0, byId.get(w.id)!);
  });
  return fields;
}

/**
 * The schema `metadata`'s table must have for data files of `written` (the exporter's pinned
 * field ids) to go in: its current schema when that takes them, otherwise the next one (see the
 * module comment). Throws, naming `table` and what to do, when no safe change makes the table
 * take them.
 *
 * @example
 * // a table of frozen form, a run of evolve form: schema 1 adds `_rescued`, relaxes the rest
 * const schema = schemaFor('reports', metadata, icebergSchema('reports', 'evolve'));
 */
export function schemaFor(table: string, metadata: TableMetadata, written: IcebergSchema): IcebergSchema {
  const current = currentSchemaOf(metadata);
  const refuse = (r: Refusal): never => {
    throw new ExporterError(
      `the Iceberg table ${table} (${metadata.location}) cannot take the exporter's files: ${r.why}; ${r.todo}`,
    );
  };
  const resolved = written.fields.map((w) => {
    const f = fieldFor(metadata, current, w);
    return f instanceof Refusal ? refuse(f) : f;
  });
  const writtenIds = new Set(written.fields.map((f) => f.id));
  for (const f of current.fields) {
    const r = writtenIds.has(f.id) ? undefined : lackedRefusal(f);
    if (r) refuse(r);
  }
  if (resolved.every((f) => current.fields.includes(f))) return current;
  const fields = mergedFields(current, written, resolved);
  // Java's TableMetadata re-uses the id of an equal older schema (an undrop that restores it).
  const same = metadata.schemas.find(
    (s) =>
      sameFields(s, { ...current, fields }) &&
      canonical(s['identifier-field-ids'] ?? []) === canonical(current['identifier-field-ids'] ?? []),
  );
  if (same) return same;
  const nextId = Math.max(...metadata.schemas.map((s) => s['schema-id'])) + 1;
  return { ...current, 'schema-id': nextId, fields };
}

/**
 * `metadata` with `schema` current: added to `schemas` unless one of them already (the old
 * ones kept: old snapshots and manifests name them), and `last-column-id` raised to its
 * highest id. `metadata` itself when `schema` is its current schema already.
 */
export function withSchema(metadata: TableMetadata, schema: IcebergSchema): TableMetadata {
  if (schema['schema-id'] === metadata['current-schema-id']) return metadata;
  const known = metadata.schemas.some((s) => s['schema-id'] === schema['schema-id']);
  return {
    ...metadata,
    'last-column-id': Math.max(metadata['last-column-id'], lastColumnId(schema)),
    'current-schema-id': schema['schema-id'],
    schemas: known ? metadata.schemas : [...metadata.schemas, schema],
  };
}

/**
 * A data file's bounds (`lower_bounds`/`upper_bounds`, by field id) as the columns of `schema`
 * serialize them: a bound of the files' `int` (4 bytes) in a column the table promoted to
 * `long` becomes 8 bytes, a `float`'s in a `double` column 8 bytes (Appendix D; readers decode
 * a bound by the column's current type). Other bounds are returned as they are.
 */
export function boundsUnder(
  schema: IcebergSchema,
  bounds: { key: number; value: Buffer }[] | null,
): { key: number; value: Buffer }[] | null {
  if (bounds === null) return null;
  const types = new Map(schema.fields.map((f) => [f.id, f.type as unknown]));
  return bounds.map(({ key, value }) => {
    const type = types.get(key);
    if (value.length !== 4 || (type !== 'long' && type !== 'double')) return { key, value };
    const wide = Buffer.alloc(8);
    if (type === 'long') wide.writeBigInt64LE(BigInt(value.readInt32LE()));
    else wide.writeDoubleLE(value.readFloatLE());
    return { key, value: wide };
  });
}
