import { describe, expect, it } from 'vitest';
import { REPORT_TABLES, TABLES } from '../../../shared/export/tables.js';
import {
  duckdbType,
  hiveType,
  LATEST_VIEWS,
  prestoType,
  RUNS_COLUMNS,
  RUNS_VIEW_COLUMNS,
  type SqlType,
} from '../../../shared/export/views.js';

const NESTED: SqlType = {
  struct: { total: 'bigint', by_status: { map: 'bigint' }, files: { array: { struct: { key: 'string' } } } },
};

describe('column types in each engine’s spelling', () => {
  it('spells nested types for Glue (Hive DDL)', () => {
    expect(hiveType(NESTED)).toBe(
      'struct<total:bigint,by_status:map<string,bigint>,files:array<struct<key:string>>>',
    );
    expect(hiveType('array<string>')).toBe('array<string>');
  });

  it('spells nested types for an Athena view definition (Trino)', () => {
    expect(prestoType(NESTED)).toBe(
      'row(total bigint, by_status map(varchar, bigint), files array(row(key varchar)))',
    );
    expect([prestoType('int'), prestoType('timestamp'), prestoType('array<string>')]).toEqual([
      'integer',
      'timestamp(3)',
      'array(varchar)',
    ]);
  });

  it('spells nested types for DuckDB', () => {
    expect(duckdbType(NESTED)).toBe(
      'STRUCT("total" BIGINT, "by_status" MAP(VARCHAR, BIGINT), "files" STRUCT("key" VARCHAR)[])',
    );
    expect(duckdbType('timestamp')).toBe('TIMESTAMP WITH TIME ZONE');
  });
});

describe('views over the lake', () => {
  it('has a latest view for the campaigns, the jobs and each report table, its columns the table’s then dt', () => {
    const tables = ['campaigns', 'jobs', ...REPORT_TABLES] as const;
    expect(LATEST_VIEWS.map((v) => v.name)).toEqual(tables.map((t) => `${t}_latest`));
    for (const [i, table] of tables.entries()) {
      expect(LATEST_VIEWS[i]!.columns.map((c) => c.name)).toEqual([
        ...TABLES[table].columns.map((c) => c.name),
        'dt',
      ]);
    }
  });

  it('selects every column of the view, in order, from the table', () => {
    for (const view of LATEST_VIEWS) {
      // The view's own SELECT starts a line; the CTEs' are indented.
      const start = view.sql.indexOf('\nSELECT ') + 8;
      const select = view.sql.slice(start, view.sql.indexOf('\nFROM', start));
      expect(select.split(',').map((c) => c.trim())).toEqual(view.columns.map((c) => `t.${c.name}`));
    }
  });

  it('ends the runs view with dt, after the manifest fields', () => {
    expect(RUNS_VIEW_COLUMNS.map((c) => c.name)).toEqual([...RUNS_COLUMNS.map((c) => c.name), 'dt']);
  });
});
