/**
 * The Glue tables Athena reads must match the Parquet files the exporter writes: same column
 * names, same order, same types. Both sides are read here: the synthesized CloudFormation and
 * files written by a real run, described by DuckDB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TABLE_NAMES } from '../../shared/export/tables.js';
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

  it.each(TABLE_NAMES)('%s: same columns, order and types', async (table) => {
    const described = await db.all(
      `DESCRIBE SELECT * FROM read_parquet('${out}/parquet/${table}/*/*.parquet', hive_partitioning = false)`,
    );
    const parquet = described.map((c) => ({
      Name: String(c.column_name),
      Type: ATHENA_OF_DUCKDB[String(c.column_type)] ?? `unmapped ${String(c.column_type)}`,
    }));
    expect(glue.get(table)?.map(({ Name, Type }) => ({ Name, Type }))).toEqual(parquet);
  });
});
