/**
 * The contract's tables as Iceberg v2 tables: the same columns, by the same names, each with
 * its pinned field id (`field-ids.ts`), plus `dt` (the export date, a string as in the Hive
 * layout), the identity partition of every table. `dt` is written into the data files: the
 * spec lets a reader take an identity partition's value from the manifest when the file lacks
 * the column, but not every engine does, and the tables must read the same everywhere.
 *
 * Beside each report table there is a `<table>_current` table, of the same schema: the newest
 * report of each job (see `current.ts`).
 *
 * Two forms, as the schema contract gives them (`tablesOf`): `evolve` (report tables end with
 * `_rescued`, their non-key columns optional) and `freeze` (the tables of every release before
 * the option: a fresh table of a `freeze` run has exactly their schema). How a table of one form
 * takes files of the other is `schema-evolution.ts`.
 */

import {
  type ColumnType,
  REPORT_TABLES,
  type ReportTableName,
  type SchemaContract,
  TABLE_NAMES,
  type TableName,
  tablesOf,
} from '../export/tables.js';
import { currentTableName, PARTITION_KEY } from '../layout.js';
import type { ParquetColumn, ParquetTable } from '../parquet/schema.js';
import { FIELD_IDS } from './field-ids.js';
import type { IcebergField, IcebergPrimitive, IcebergSchema, PartitionSpec } from './types.js';

/** The current-state table of a report table. */
export type CurrentTableName = `${ReportTableName}_current`;
export type IcebergTableName = TableName | CurrentTableName;

export const currentTableOf = (table: ReportTableName): CurrentTableName => currentTableName(table);

/** Every Iceberg table, history tables first, in contract order. */
export const ICEBERG_TABLE_NAMES: readonly IcebergTableName[] = [
  ...TABLE_NAMES,
  ...REPORT_TABLES.map(currentTableOf),
];

/** The contract table an Iceberg table holds rows of. */
export function baseTableOf(table: IcebergTableName): TableName {
  return (table.endsWith('_current') ? table.slice(0, -'_current'.length) : table) as TableName;
}

/** Field id of the first (and only) partition field: the spec starts them at 1000. */
export const DT_PARTITION_FIELD_ID = 1000;
/** Schema and spec ids of the exporter's tables. */
export const SCHEMA_ID = 0;
export const SPEC_ID = 0;

const PRIMITIVE: Record<Exclude<ColumnType, 'array<string>'>, IcebergPrimitive> = {
  string: 'string',
  int: 'int',
  bigint: 'long',
  boolean: 'boolean',
  timestamp: 'timestamptz',
};

/** A column's field id; a column without one is a bug caught by the schema test. */
export function fieldId(table: TableName, column: string): number {
  const id = FIELD_IDS[table]?.[column];
  if (id === undefined) throw new Error(`no Iceberg field id for ${table}.${column}: add it to field-ids.ts`);
  return id;
}

/** The Parquet columns of an Iceberg data file of `table`: field ids, MICROS timestamps, `dt` last. */
function parquetColumns(table: TableName, contract: SchemaContract): ParquetColumn[] {
  const columns: ParquetColumn[] = tablesOf(contract)[table].columns.map((c) => ({
    name: c.name,
    type: c.type,
    nullable: c.nullable,
    fieldId: fieldId(table, c.name),
    ...(c.type === 'array<string>' && { elementFieldId: fieldId(table, `${c.name}.element`) }),
    ...(c.type === 'timestamp' && { timestampUnit: 'MICROS' as const }),
  }));
  columns.push({
    name: PARTITION_KEY,
    type: 'string',
    nullable: false,
    fieldId: fieldId(table, PARTITION_KEY),
  });
  return columns;
}

const parquetTables = new Map<string, ParquetTable>();

/**
 * The Parquet table of `table`'s Iceberg data files as a run of `contract` writes them. One
 * object per table and contract (the encoder keys its generated row appender by it), shared by
 * a history table and its current table.
 */
export function icebergParquetTable(table: IcebergTableName, contract: SchemaContract): ParquetTable {
  const base = baseTableOf(table);
  const key = `${base}\0${contract}`;
  let found = parquetTables.get(key);
  if (!found) {
    found = { name: base, columns: parquetColumns(base, contract) };
    parquetTables.set(key, found);
  }
  return found;
}

/**
 * The Iceberg schema of `table`'s data files as a run of `contract` writes them (schema id 0:
 * the id a fresh table gives it; an evolved table numbers its schemas itself).
 */
export function icebergSchema(table: IcebergTableName, contract: SchemaContract): IcebergSchema {
  const base = baseTableOf(table);
  const defs = tablesOf(contract)[base].columns;
  const fields: IcebergField[] = icebergParquetTable(base, contract).columns.map((c) => {
    const doc = defs.find((d) => d.name === c.name)?.doc ?? 'the export date (YYYY-MM-DD, UTC)';
    const type =
      c.type === 'array<string>'
        ? {
            type: 'list' as const,
            'element-id': c.elementFieldId!,
            element: 'string' as const,
            'element-required': false,
          }
        : PRIMITIVE[c.type];
    return { id: c.fieldId!, name: c.name, required: !c.nullable, type, doc };
  });
  return { type: 'struct', 'schema-id': SCHEMA_ID, fields };
}

/**
 * The highest field id of a schema, nested ids included: lists' elements, and the struct
 * fields and map keys and values of schemas other engines wrote.
 */
export function lastColumnId(schema: IcebergSchema): number {
  const highest = (type: unknown): number => {
    if (typeof type !== 'object' || type === null) return 0;
    const t = type as Record<string, unknown>;
    const ids = ['element-id', 'key-id', 'value-id'].map((k) =>
      typeof t[k] === 'number' ? (t[k] as number) : 0,
    );
    const nested = [t.element, t.key, t.value].map(highest);
    const fields = Array.isArray(t.fields)
      ? (t.fields as { id: number; type: unknown }[]).map((f) => Math.max(f.id, highest(f.type)))
      : [];
    return Math.max(0, ...ids, ...nested, ...fields);
  };
  return highest(schema);
}

/** Identity partition on `dt`. */
export function partitionSpec(table: IcebergTableName): PartitionSpec {
  return {
    'spec-id': SPEC_ID,
    fields: [
      {
        'source-id': fieldId(baseTableOf(table), PARTITION_KEY),
        'field-id': DT_PARTITION_FIELD_ID,
        name: PARTITION_KEY,
        transform: 'identity',
      },
    ],
  };
}

/**
 * Table properties the exporter sets. Athena reads `write.format.default`; the metadata log is
 * bounded and old metadata files deleted at each commit, so a year of 5-minute runs does not
 * leave 100,000 metadata files behind.
 */
export const TABLE_PROPERTIES: Readonly<Record<string, string>> = {
  'write.format.default': 'parquet',
  'write.parquet.compression-codec': 'zstd',
  'write.metadata.previous-versions-max': '100',
  'write.metadata.delete-after-commit.enabled': 'true',
};
