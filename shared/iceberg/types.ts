/**
 * Apache Iceberg v2 table metadata, as the spec's JSON (https://iceberg.apache.org/spec/#table-metadata-fields).
 * Only what the exporter writes and reads; unknown fields of metadata written by others (Glue,
 * Athena's OPTIMIZE) are kept as they are when a commit builds on them.
 */

/** A primitive type of the spec: the exporter's columns use these. */
export type IcebergPrimitive = 'string' | 'int' | 'long' | 'boolean' | 'timestamptz';

export interface IcebergListType {
  type: 'list';
  'element-id': number;
  element: IcebergPrimitive;
  'element-required': boolean;
}

export type IcebergType = IcebergPrimitive | IcebergListType;

export interface IcebergField {
  id: number;
  name: string;
  required: boolean;
  type: IcebergType;
  doc?: string;
  /** v3 defaults (pyiceberg writes them in v2 tables too): what rows without the column read, and what writers write. */
  'initial-default'?: unknown;
  'write-default'?: unknown;
}

export interface IcebergSchema {
  type: 'struct';
  'schema-id': number;
  fields: IcebergField[];
  'identifier-field-ids'?: number[];
}

export interface PartitionField {
  'source-id': number;
  'field-id': number;
  name: string;
  transform: string;
}

export interface PartitionSpec {
  'spec-id': number;
  fields: PartitionField[];
}

export interface SortOrder {
  'order-id': number;
  fields: unknown[];
}

export interface Snapshot {
  'snapshot-id': number | bigint;
  'parent-snapshot-id'?: number | bigint;
  'sequence-number': number;
  'timestamp-ms': number;
  'manifest-list': string;
  summary: { operation: 'append' | 'replace' | 'overwrite' | 'delete'; [key: string]: string };
  'schema-id'?: number;
}

/** A branch or tag, with its own retention (spec, "Snapshot References"); absent: the table's. */
export interface SnapshotRef {
  'snapshot-id': number | bigint;
  type: 'branch' | 'tag';
  'max-ref-age-ms'?: number;
  'max-snapshot-age-ms'?: number;
  'min-snapshots-to-keep'?: number;
}

/** A snapshot's statistics file (spec, "Table Statistics" and "Partition Statistics"): other engines write them. */
export interface StatisticsFile {
  'snapshot-id': number | bigint;
  'statistics-path': string;
  [other: string]: unknown;
}

export interface TableMetadata {
  /** 2 for what the exporter writes; others' tables may hold 1 or 3 (refused by the commit). */
  'format-version': number;
  'table-uuid': string;
  location: string;
  'last-sequence-number': number;
  'last-updated-ms': number;
  'last-column-id': number;
  'current-schema-id': number;
  schemas: IcebergSchema[];
  'default-spec-id': number;
  'partition-specs': PartitionSpec[];
  'last-partition-id': number;
  'default-sort-order-id': number;
  'sort-orders': SortOrder[];
  properties?: Record<string, string>;
  'current-snapshot-id'?: number | bigint | null;
  snapshots?: Snapshot[];
  'snapshot-log'?: { 'timestamp-ms': number; 'snapshot-id': number | bigint }[];
  'metadata-log'?: { 'timestamp-ms': number; 'metadata-file': string }[];
  refs?: Record<string, SnapshotRef>;
  statistics?: StatisticsFile[];
  'partition-statistics'?: StatisticsFile[];
  [other: string]: unknown;
}
