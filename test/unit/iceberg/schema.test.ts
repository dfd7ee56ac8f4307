/**
 * The Iceberg schemas of both forms: every column has its pinned field id, a `freeze` schema is
 * exactly the schema of every release before the schema contract (a fixture of what one wrote),
 * and schema evolution makes only the safe changes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import {
  FROZEN_TABLES,
  REPORT_TABLES,
  RESCUED_COLUMN,
  TABLE_NAMES,
  TABLES,
} from '../../../shared/export/tables.js';
import { FIELD_IDS } from '../../../shared/iceberg/field-ids.js';
import {
  ICEBERG_TABLE_NAMES,
  icebergParquetTable,
  icebergSchema,
  lastColumnId,
} from '../../../shared/iceberg/schema.js';
import { sameFields, schemaFor, withSchema } from '../../../shared/iceberg/schema-evolution.js';
import type { IcebergSchema, TableMetadata } from '../../../shared/iceberg/types.js';

const FIXTURE = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../fixtures/iceberg/frozen-schemas.json'), 'utf8'),
) as Record<string, { 'current-schema-id': number; 'last-column-id': number; schemas: IcebergSchema[] }>;

/** Metadata of a table whose only schema is `schema`, as a commit reads it. */
const metadataOf = (schema: IcebergSchema): TableMetadata => ({
  'format-version': 2,
  'table-uuid': 'u',
  location: '/lake/iceberg/reports',
  'last-sequence-number': 1,
  'last-updated-ms': 0,
  'last-column-id': lastColumnId(schema),
  'current-schema-id': schema['schema-id'],
  schemas: [schema],
  'default-spec-id': 0,
  'partition-specs': [],
  'last-partition-id': 1000,
  'default-sort-order-id': 0,
  'sort-orders': [],
});

describe('Iceberg field ids', () => {
  it('pins one for every column of both forms, unique per table, `_rescued` above every older id', () => {
    for (const name of TABLE_NAMES) {
      for (const table of [TABLES[name], FROZEN_TABLES[name]]) {
        for (const column of table.columns) expect(FIELD_IDS[name]?.[column.name], column.name).toBeDefined();
      }
      const ids = Object.values(FIELD_IDS[name]!);
      expect(new Set(ids).size).toBe(ids.length);
    }
    for (const name of REPORT_TABLES) {
      const frozen = icebergSchema(name, 'freeze');
      expect(FIELD_IDS[name]![RESCUED_COLUMN]).toBe(lastColumnId(frozen) + 1);
    }
  });
});

describe('Iceberg schemas of the two forms', () => {
  it("freeze: every table's schema is the one a release before the schema contract wrote", () => {
    for (const table of ICEBERG_TABLE_NAMES) {
      expect(icebergSchema(table, 'freeze')).toEqual(FIXTURE[table]!.schemas[0]);
      expect(JSON.stringify(icebergSchema(table, 'freeze'))).toBe(JSON.stringify(FIXTURE[table]!.schemas[0]));
    }
  });

  it('evolve: report tables add `_rescued` (optional, before dt) and relax the non-key columns', () => {
    const schema = icebergSchema('questions', 'evolve');
    const names = schema.fields.map((f) => f.name);
    expect(names.slice(-3)).toEqual(['exported_at', RESCUED_COLUMN, 'dt']);
    const field = (name: string) => schema.fields.find((f) => f.name === name)!;
    expect(field(RESCUED_COLUMN)).toMatchObject({ id: 23, type: 'string', required: false });
    expect(field('obtained_score').required).toBe(false);
    expect(field('job_id').required).toBe(true);
    expect(field('dt').required).toBe(true);
    expect(icebergSchema('jobs', 'evolve').fields).toEqual(icebergSchema('jobs', 'freeze').fields);
    expect(icebergParquetTable('reports', 'evolve').columns.map((c) => c.name)).toContain(RESCUED_COLUMN);
    expect(icebergParquetTable('reports', 'freeze').columns.map((c) => c.name)).not.toContain(RESCUED_COLUMN);
  });
});

describe('schemaFor: the schema a table needs for a run’s files', () => {
  it('evolves a frozen table for evolve files: next schema id, the evolve fields, last-column-id raised', () => {
    const frozen = metadataOf(icebergSchema('reports', 'freeze'));
    const schema = schemaFor('reports', frozen, icebergSchema('reports', 'evolve'));
    expect(schema['schema-id']).toBe(1);
    expect(sameFields(schema, icebergSchema('reports', 'evolve'))).toBe(true);
    const next = withSchema(frozen, schema);
    expect(next['current-schema-id']).toBe(1);
    expect(next['last-column-id']).toBe(19);
    expect(next.schemas.map((s) => s['schema-id'])).toEqual([0, 1]);
    expect(next.schemas[0]).toEqual(frozen.schemas[0]);
  });

  it('keeps an evolved table as it is for frozen files, and a table of the same form', () => {
    const evolved = metadataOf({ ...icebergSchema('reports', 'evolve'), 'schema-id': 1 });
    expect(schemaFor('reports', evolved, icebergSchema('reports', 'freeze'))).toBe(evolved.schemas[0]);
    expect(schemaFor('reports', evolved, icebergSchema('reports', 'evolve'))).toBe(evolved.schemas[0]);
    const frozen = metadataOf(icebergSchema('reports', 'freeze'));
    expect(schemaFor('reports', frozen, icebergSchema('reports', 'freeze'))).toBe(frozen.schemas[0]);
  });

  it('refuses what Iceberg does not allow, saying what differs', () => {
    const frozen = icebergSchema('reports', 'freeze');
    const retyped = metadataOf({
      ...frozen,
      fields: frozen.fields.map((f) => (f.name === 'job_status' ? { ...f, type: 'string' as const } : f)),
    });
    expect(() => schemaFor('reports', retyped, icebergSchema('reports', 'evolve'))).toThrow(
      /job_status \(field id 5\) is of type string, the exporter writes int, and Iceberg promotes neither/,
    );
    const reused = { ...metadataOf(frozen), 'last-column-id': 19 };
    expect(() => schemaFor('reports', reused, icebergSchema('reports', 'evolve'))).toThrow(
      /field id 19 of the exporter's new column _rescued was given to a column the table no longer describes.*schema_contract freeze/,
    );
    const extra = metadataOf({
      ...frozen,
      fields: [...frozen.fields, { id: 40, name: 'other', required: true, type: 'string' }],
    });
    expect(() => schemaFor('reports', extra, icebergSchema('reports', 'evolve'))).toThrow(ExporterError);
  });
});
