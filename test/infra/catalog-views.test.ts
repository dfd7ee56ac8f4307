/**
 * The `runs` table over the run manifests and the `*_latest` Athena views, as synthesized: the
 * runs columns cannot drift from `ManifestSchema`, and each view decodes to the SQL of
 * `shared/export/views.ts` with the columns and Trino types of the table definitions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { ManifestSchema } from '../../shared/export/state/manifest.js';
import { type ColumnType, REPORT_TABLES, TABLES } from '../../shared/export/tables.js';
import { LATEST_VIEWS, RUNS_TABLE } from '../../shared/export/views.js';
import { RUNS_PREFIX } from '../../shared/layout.js';
import {
  dataLakeUrl,
  glueSurface,
  localSqlSurface,
  logicalIdOf,
  projectedTableParameters,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

interface TableInput {
  Name: string;
  TableType: string;
  Owner?: string;
  Parameters: Record<string, unknown>;
  PartitionKeys?: { Name: string; Type: string }[];
  ViewOriginalText?: string;
  ViewExpandedText?: string;
  StorageDescriptor: Record<string, unknown> & { Columns: { Name: string; Type: string }[] };
}

/** Trino's names for the contract types (what Athena shows for a view over the Parquet tables). */
const TRINO_TYPE: Record<ColumnType, string> = {
  string: 'varchar',
  int: 'integer',
  bigint: 'bigint',
  boolean: 'boolean',
  timestamp: 'timestamp(3)',
  'array<string>': 'array(varchar)',
};

/** The Hive type a manifest field must have in Glue, read off its zod schema. */
function hiveTypeOf(schema: z.ZodType): string {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault)
    return hiveTypeOf(schema.unwrap() as z.ZodType);
  if (schema instanceof z.ZodObject) {
    const fields = Object.entries(schema.shape as Record<string, z.ZodType>);
    return `struct<${fields.map(([k, v]) => `${k}:${hiveTypeOf(v)}`).join(',')}>`;
  }
  if (schema instanceof z.ZodArray) return `array<${hiveTypeOf(schema.element as z.ZodType)}>`;
  if (schema instanceof z.ZodRecord) return `map<string,${hiveTypeOf(schema.valueType as z.ZodType)}>`;
  // Counts are non-negative integers of any size: bigint, never int.
  if (schema instanceof z.ZodNumber) return 'bigint';
  if (schema instanceof z.ZodString || schema instanceof z.ZodEnum) return 'string';
  if (schema instanceof z.ZodBoolean) return 'boolean';
  throw new Error(`no Glue type for a manifest field of zod type ${schema.def.type}`);
}

let s: Synthesized;
let inputs: Map<string, TableInput>;
let bucketId: string;

beforeAll(() => {
  s = synthExporter({});
  bucketId = logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket');
  inputs = new Map(
    Object.values(resourcesOf(s.template, 'AWS::Glue::Table')).map((r) => {
      const input = r.Properties.TableInput as TableInput;
      return [input.Name, input];
    }),
  );
});
afterAll(removeSynthOutputs);

const bucketUrl = (key: string) => dataLakeUrl(bucketId, key);

describe('the sql command over a Hive output', () => {
  it('offers exactly the tables and views of the Hive stack, with their columns in order', async () => {
    // A query tried locally must name nothing Athena lacks, nor miss what it has (raw_reports).
    expect(await localSqlSurface('hive')).toEqual(glueSurface(s.template));
  });
});

describe('the runs table', () => {
  const runs = () => inputs.get(RUNS_TABLE)!;

  it('has a column for every manifest field but dt, typed as the schema says', () => {
    const expected = Object.entries(ManifestSchema.shape as Record<string, z.ZodType>)
      .filter(([name]) => name !== 'dt')
      .map(([name, schema]) => [name, hiveTypeOf(schema)]);
    const actual = runs().StorageDescriptor.Columns.map((c) => [c.Name, c.Type]);
    expect(actual.sort()).toEqual(expected.sort());
  });

  it('reads the one-line JSON manifests with the OpenX SerDe, dt projected from the key layout', () => {
    const t = runs();
    expect(t.TableType).toBe('EXTERNAL_TABLE');
    expect(t.PartitionKeys).toEqual([expect.objectContaining({ Name: 'dt', Type: 'string' })]);
    expect(t.StorageDescriptor).toMatchObject({
      Location: bucketUrl(RUNS_PREFIX),
      InputFormat: 'org.apache.hadoop.mapred.TextInputFormat',
      SerdeInfo: { SerializationLibrary: 'org.openx.data.jsonserde.JsonSerDe' },
    });
    expect(t.Parameters).toEqual(projectedTableParameters(bucketId, RUNS_PREFIX, 'json'));
  });
});

describe('the *_latest views', () => {
  const PREFIX = '/* Presto View: ';
  const SUFFIX = ' */';
  const decode = (text: string) => {
    expect(text.startsWith(PREFIX) && text.endsWith(SUFFIX)).toBe(true);
    return JSON.parse(Buffer.from(text.slice(PREFIX.length, -SUFFIX.length), 'base64').toString('utf8')) as {
      originalSql: string;
      catalog: string;
      schema: string;
      columns: { name: string; type: string }[];
    };
  };

  it('registers one Athena view per report table, and campaigns_latest and jobs_latest', () => {
    const views = [...inputs.values()].filter((t) => t.TableType === 'VIRTUAL_VIEW').map((t) => t.Name);
    expect(views.sort()).toEqual(['campaigns', 'jobs', ...REPORT_TABLES].map((t) => `${t}_latest`).sort());
  });

  it.each(['campaigns', 'jobs', ...REPORT_TABLES] as const)(
    '%s_latest is a Presto view of the shared SQL, with the table’s columns and dt',
    (table) => {
      const view = inputs.get(`${table}_latest`)!;
      expect(view.Parameters).toMatchObject({ presto_view: 'true' });
      // As Athena records a view it creates.
      expect(view.Owner).toBe('hadoop');
      expect(view.ViewExpandedText).toBe('/* Presto View */');
      const definition = decode(view.ViewOriginalText!);
      expect(definition.originalSql).toBe(LATEST_VIEWS.find((v) => v.name === `${table}_latest`)!.sql);
      expect(definition.catalog).toBe('awsdatacatalog');
      expect(definition.schema).toBe('campaign_report_exporter');
      const columns = TABLES[table].columns;
      expect(definition.columns).toEqual([
        ...columns.map((c) => ({ name: c.name, type: TRINO_TYPE[c.type] })),
        { name: 'dt', type: 'varchar' },
      ]);
      expect(view.StorageDescriptor.Columns.map((c) => [c.Name, c.Type])).toEqual([
        ...columns.map((c) => [c.name, c.type]),
        ['dt', 'string'],
      ]);
    },
  );

  it('resolves the SQL in the configured database', () => {
    const other = synthExporter({ databaseName: 'acme_reports' });
    for (const r of Object.values(resourcesOf(other.template, 'AWS::Glue::Table'))) {
      const input = r.Properties.TableInput as TableInput;
      if (input.TableType === 'VIRTUAL_VIEW')
        expect(decode(input.ViewOriginalText!).schema).toBe('acme_reports');
    }
  });

  it('reads only tables of the catalog', () => {
    for (const view of LATEST_VIEWS) {
      const ctes = new Set([...view.sql.matchAll(/\b(\w+) AS \(/g)].map((m) => m[1]));
      // UNNEST(...) is a function of a row, not a table.
      const read = [...view.sql.matchAll(/\b(?:FROM|JOIN)\s+(\w+)(?!\w|\()/g)]
        .map((m) => m[1]!)
        .filter((n) => !ctes.has(n));
      expect(read.length, view.name).toBeGreaterThan(0);
      for (const name of read)
        expect(inputs.get(name)?.TableType, `${view.name} reads ${name}`).toBe('EXTERNAL_TABLE');
    }
  });
});
