/**
 * The Glue tables Athena reads must match the Parquet files the exporter writes: same column
 * names, same order, same types. Both sides are read here: the synthesized CloudFormation and
 * files described by DuckDB: those of a real (`freeze`) run, which are the Glue columns but
 * `_rescued` (Athena reads it as NULL), and an `evolve` run's file of each table, which are
 * exactly the Glue columns.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parquetTableOf, TableBuffer } from '../../shared/export/format/table-buffer.js';
import {
  type Cell,
  type ColumnType,
  RESCUED_COLUMN,
  type Row,
  TABLE_NAMES,
} from '../../shared/export/tables.js';
import { type DuckDb, openDuckDb } from '../helpers/duckdb.js';
import { exporter, tempDir } from '../helpers/export.js';
import { type Simulator, startSimulator } from '../simulator/index.js';
import { removeSynthOutputs, resourcesOf, synthExporter } from './helpers.js';

/** DuckDB's name for each Athena type the exporter writes. */
const ATHENA_OF_DUCKDB: Record<string, string> = {
  VARCHAR: 'string',
  INTEGER: 'int',
  BIGINT: 'bigint',
  BOOLEAN: 'boolean',
  'TIMESTAMP WITH TIME ZONE': 'timestamp',
  'VARCHAR[]': 'array<string>',
};

/** A value of each column type, for a one-row file. */
const SAMPLE: Record<ColumnType, Cell> = {
  string: 's',
  int: 1,
  bigint: 2,
  boolean: true,
  timestamp: new Date('2026-11-22T00:00:00Z'),
  'array<string>': ['a'],
};

interface GlueTableInput {
  Name: string;
  StorageDescriptor: { Columns: { Name: string; Type: string }[] };
}

describe('Glue tables and the Parquet the exporter writes', () => {
  let simulator: Simulator;
  let db: DuckDb;
  let out: string;
  let glue: Map<string, { Name: string; Type: string }[]>;

  beforeAll(async () => {
    const { template } = synthExporter();
    glue = new Map(
      Object.values(resourcesOf(template, 'AWS::Glue::Table')).map((r) => {
        const input = r.Properties.TableInput as GlueTableInput;
        return [input.Name, input.StorageDescriptor.Columns];
      }),
    );
    simulator = await startSimulator({ seed: 3, campaigns: 2, jobsPerCampaign: 15, reportSize: 'small' });
    out = await tempDir('glue-parquet');
    await exporter(simulator, out).run();
    db = await openDuckDb();
  });
  afterAll(async () => {
    removeSynthOutputs();
    await simulator?.close();
    await db?.close();
  });

  const describe_ = async (source: string) =>
    (await db.all(`DESCRIBE SELECT * FROM read_parquet(${source}, hive_partitioning = false)`)).map((c) => ({
      Name: String(c.column_name),
      Type: ATHENA_OF_DUCKDB[String(c.column_type)] ?? `unmapped ${String(c.column_type)}`,
    }));
  const glueOf = (table: string) => glue.get(table)?.map(({ Name, Type }) => ({ Name, Type }));

  it.each(TABLE_NAMES)(
    '%s: a freeze run writes the same columns, order and types, but _rescued',
    async (table) => {
      const parquet = await describe_(`'${out}/parquet/${table}/*/*.parquet'`);
      expect(glueOf(table)?.filter((c) => c.Name !== RESCUED_COLUMN)).toEqual(parquet);
    },
  );

  it.each(TABLE_NAMES)(
    '%s: an evolve run writes exactly the same columns, order and types',
    async (table) => {
      const run = { schema_contract: 'evolve' as const, dt: '2026-11-22' };
      const buffer = new TableBuffer(run);
      const row: Row = {};
      for (const c of parquetTableOf(run, table).columns) row[c.name] = SAMPLE[c.type];
      buffer.add(table, row);
      const parquet = await describe_(await db.file(buffer.encode(table), 'parquet'));
      expect(glueOf(table)).toEqual(parquet);
    },
  );
});
