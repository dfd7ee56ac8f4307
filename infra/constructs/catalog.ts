import { Stack } from 'aws-cdk-lib';
import * as glue from 'aws-cdk-lib/aws-glue';
import { Construct } from 'constructs';
import {
  DT_PROJECTION_FORMAT,
  PARTITION_KEY,
  partitionTemplate,
  rawPrefix,
  tablePrefix,
} from '../../shared/export/layout.js';
import { glueType, TABLES, type TableDef, type TableName } from '../../shared/export/tables.js';
import type { DataLake } from './data-lake.js';

/** The Glue table over the raw report JSON Lines. */
export const RAW_REPORTS_TABLE = 'raw_reports';

const PARQUET_FORMAT = {
  inputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat',
  outputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat',
  serdeInfo: {
    serializationLibrary: 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe',
    parameters: { 'serialization.format': '1' },
  },
};

/**
 * The raw lines are read with the OpenX JSON SerDe because `data` is declared `string`:
 * Athena's OpenX reader hands a nested object or array to a string column as its JSON text
 * (query it with json_extract / json_extract_scalar), while the Hive JSON SerDe rejects a
 * non-scalar value in a string column. A struct type is no option: it would drop the unknown
 * fields the raw copy exists to keep, and cannot type the spec's variants (a response that is
 * a string or an array, an input answer that is a string or an object, null gallery items).
 * Text files ending in .gz are read as gzip.
 */
const JSON_LINES_FORMAT = {
  inputFormat: 'org.apache.hadoop.mapred.TextInputFormat',
  outputFormat: 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat',
  serdeInfo: {
    serializationLibrary: 'org.openx.data.jsonserde.JsonSerDe',
    // A malformed line fails the query instead of becoming a row of NULLs.
    parameters: { 'ignore.malformed.json': 'FALSE' },
  },
};

/** The raw report line (CONTRACT.md, "Raw lines"). */
export const RAW_REPORT_COLUMNS: readonly glue.CfnTable.ColumnProperty[] = [
  { name: 'run_id', type: 'string', comment: 'the run that fetched the report' },
  {
    name: 'fetched_at',
    type: 'string',
    comment: 'when the report was fetched, ISO 8601 UTC as written; from_iso8601_timestamp() converts',
  },
  { name: 'campaign_id', type: 'bigint', comment: 'campaign id from the request path' },
  { name: 'job_id', type: 'bigint', comment: 'job id from the request path' },
  {
    name: 'data',
    type: 'string',
    comment: "the report response's data object as JSON text (lossless); use json_extract",
  },
];

/** The Glue columns of a contract table: names, Glue types and docs, in the definitions' order. */
export const glueColumns = (def: TableDef): glue.CfnTable.ColumnProperty[] =>
  def.columns.map((c) => ({ name: c.name, type: glueType(c.type), comment: c.doc }));

export interface ExporterCatalogProps {
  readonly dataLake: DataLake;
  readonly databaseName: string;
  /** First `dt` partition projection generates, YYYY-MM-DD. */
  readonly projectionStartDate: string;
}

/**
 * The Glue database and its tables, generated from the table definitions and the key layout.
 * Partition projection on `dt` (no crawler, no MSCK REPAIR): a run is queryable once it lands.
 */
export class ExporterCatalog extends Construct {
  readonly database: glue.CfnDatabase;
  readonly databaseName: string;
  readonly tables: Readonly<Record<TableName, glue.CfnTable>>;
  readonly rawReports: glue.CfnTable;

  constructor(scope: Construct, id: string, props: ExporterCatalogProps) {
    super(scope, id);
    const { dataLake } = props;
    const catalogId = Stack.of(this).account;
    this.databaseName = props.databaseName;
    this.database = new glue.CfnDatabase(this, 'Database', {
      catalogId,
      databaseInput: {
        name: props.databaseName,
        description: 'campaign-report-exporter: campaigns, jobs and job reports (Parquet) and raw JSON Lines',
      },
    });

    const projection = (prefix: string): Record<string, string> => ({
      'projection.enabled': 'true',
      [`projection.${PARTITION_KEY}.type`]: 'date',
      [`projection.${PARTITION_KEY}.format`]: DT_PROJECTION_FORMAT,
      [`projection.${PARTITION_KEY}.range`]: `${props.projectionStartDate},NOW`,
      [`projection.${PARTITION_KEY}.interval`]: '1',
      [`projection.${PARTITION_KEY}.interval.unit`]: 'DAYS',
      'storage.location.template': dataLake.s3Url(partitionTemplate(prefix)),
    });
    const partitionKeys = [{ name: PARTITION_KEY, type: 'string', comment: 'export date (UTC), YYYY-MM-DD' }];

    const tables = {} as Record<TableName, glue.CfnTable>;
    for (const def of Object.values(TABLES)) {
      const table = new glue.CfnTable(this, `Table-${def.name}`, {
        catalogId,
        databaseName: props.databaseName,
        tableInput: {
          name: def.name,
          description: def.doc,
          tableType: 'EXTERNAL_TABLE',
          parameters: {
            classification: 'parquet',
            EXTERNAL: 'TRUE',
            ...projection(tablePrefix(def.name)),
          },
          partitionKeys,
          storageDescriptor: {
            columns: glueColumns(def),
            location: dataLake.s3Url(tablePrefix(def.name)),
            ...PARQUET_FORMAT,
          },
        },
      });
      table.addResourceDependency(this.database);
      tables[def.name] = table;
    }
    this.tables = tables;

    this.rawReports = new glue.CfnTable(this, 'Table-raw-reports', {
      catalogId,
      databaseName: props.databaseName,
      tableInput: {
        name: RAW_REPORTS_TABLE,
        description: 'Raw report responses as fetched, one JSON line per report (gzip JSON Lines)',
        tableType: 'EXTERNAL_TABLE',
        parameters: {
          classification: 'json',
          compressionType: 'gzip',
          EXTERNAL: 'TRUE',
          ...projection(rawPrefix('reports')),
        },
        partitionKeys,
        storageDescriptor: {
          columns: [...RAW_REPORT_COLUMNS],
          location: dataLake.s3Url(rawPrefix('reports')),
          ...JSON_LINES_FORMAT,
        },
      },
    });
    this.rawReports.addResourceDependency(this.database);
  }
}
