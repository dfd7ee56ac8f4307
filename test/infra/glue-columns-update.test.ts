/**
 * A release that adds a column to the contract adds it to the Hive layout's Glue tables at the
 * stack update, in place. The stack of the release before `_rescued` is synthesized from the
 * definitions of that release (`FROZEN_TABLES`, "the tables of every release before the
 * option", substituted for `TABLES`), the current one as it is; between the two templates each
 * Glue table keeps its logical id and name (CloudFormation updates its `TableInput` without
 * replacing it: no table dropped, no partition lost), its location and partition keys, every
 * column by name, type and place, and a report table (and its `_latest` view) gains `_rescued`
 * last. Athena reads the Hive tables'
 * Parquet by column name, so files written before read NULL in it (glue-parquet.test.ts: a
 * `freeze` run's files are the Glue columns but `_rescued`).
 */
import { afterAll, describe, expect, it, vi } from 'vitest';

interface GlueTableInput {
  Name: string;
  PartitionKeys: unknown;
  StorageDescriptor: { Columns: { Name: string; Type: string }[]; Location: unknown };
}

type HelpersModule = typeof import('./helpers.js');
const helpers: HelpersModule[] = [];

/** The Hive Glue tables of the stack synthesized from the definitions of `release`, by logical id. */
async function hiveTables(release: 'before _rescued' | 'current'): Promise<Map<string, GlueTableInput>> {
  vi.resetModules();
  if (release === 'before _rescued') {
    vi.doMock('../../shared/export/tables.js', async (importOriginal) => {
      const tables = await importOriginal<typeof import('../../shared/export/tables.js')>();
      return { ...tables, TABLES: tables.FROZEN_TABLES };
    });
  } else {
    vi.doUnmock('../../shared/export/tables.js');
  }
  const h = (await import('./helpers.js')) as HelpersModule;
  helpers.push(h);
  const { template } = h.synthExporter({ tableFormat: 'hive' });
  return new Map(
    Object.entries(h.resourcesOf(template, 'AWS::Glue::Table')).map(([id, r]) => [
      id,
      r.Properties.TableInput as GlueTableInput,
    ]),
  );
}

describe('a stack update of the Hive layout to a contract with a new column', () => {
  afterAll(() => {
    for (const h of helpers) h.removeSynthOutputs();
    vi.doUnmock('../../shared/export/tables.js');
  });

  it('updates each Glue table in place, adding `_rescued` after the columns it had', async () => {
    const before = await hiveTables('before _rescued');
    const after = await hiveTables('current');
    const { REPORT_TABLES, TABLE_NAMES } = await import('../../shared/export/tables.js');

    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    const byName = new Map([...after.values()].map((t) => [t.Name, t]));
    for (const name of TABLE_NAMES) expect(byName.has(name), name).toBe(true);

    for (const [id, old] of before) {
      const next = after.get(id)!;
      expect(next.Name).toBe(old.Name);
      expect(next.StorageDescriptor.Location).toEqual(old.StorageDescriptor.Location);
      expect(next.PartitionKeys).toEqual(old.PartitionKeys);
      const oldColumns = old.StorageDescriptor.Columns.map(({ Name, Type }) => ({ Name, Type }));
      const newColumns = next.StorageDescriptor.Columns.map(({ Name, Type }) => ({ Name, Type }));
      // A report table, and its `_latest` view (Athena views are Glue tables too, `dt` among their columns).
      const expected = [...oldColumns];
      if ((REPORT_TABLES as readonly string[]).includes(old.Name.replace(/_latest$/, ''))) {
        const dt = expected.findIndex((c) => c.Name === 'dt');
        expected.splice(dt < 0 ? expected.length : dt, 0, { Name: '_rescued', Type: 'string' });
      }
      expect(newColumns, old.Name).toEqual(expected);
    }
    expect(
      [...before.values()].filter((t) => (REPORT_TABLES as readonly string[]).includes(t.Name)),
    ).toHaveLength(REPORT_TABLES.length);
  }, 120_000);
});
