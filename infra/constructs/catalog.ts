import { Stack } from 'aws-cdk-lib';
import * as glue from 'aws-cdk-lib/aws-glue';
import { Construct } from 'constructs';
import { RAW_LINE_COLUMNS } from '../../shared/export/raw-lines.js';
import { glueType, TABLES, type TableDef, type TableName } from '../../shared/export/tables.js';
import {
  athenaViews,
  hiveType,
  RAW_REPORTS_TABLE,
  RUNS_COLUMNS,
  RUNS_TABLE,
} from '../../shared/export/views.js';
import {
  DEFAULT_TABLE_FORMAT,
  DT_PROJECTION_FORMAT,
  PARTITION_KEY,
  partitionTemplate,
  RUNS_PREFIX,
  rawPrefix,
  type TableFormat,
  tablePrefix,
} from '../../shared/layout.js';
import { athenaViewInput } from './athena-view.js';
import type { DataLake } from './data-lake.js';

/** The Glue table over the raw report JSON Lines (its name is shared with the `sql` command's). */
export { RAW_REPORTS_TABLE };

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

/** The `runs` columns: the manifest's fields, nested ones as struct, array and map types. */
export const RUNS_GLUE_COLUMNS: readonly glue.CfnTable.ColumnProperty[] = RUNS_COLUMNS.map((c) => ({
  name: c.name,
  type: hiveType(c.type),
  comment: c.doc,
}));

/** The raw report line (docs/ingest.md#output-layout), from its one definition. */
export const RAW_REPORT_COLUMNS: readonly glue.CfnTable.ColumnProperty[] = RAW_LINE_COLUMNS.reports.map(
  (c) => ({
    name: c.name,
    type: glueType(c.type),
    comment: c.doc,
  }),
);

/** The Glue columns of a contract table: names, Glue types and docs, in the definitions' order. */
export const glueColumns = (def: TableDef): glue.CfnTable.ColumnProperty[] =>
  def.columns.map((c) => ({ name: c.name, type: glueType(c.type), comment: c.doc }));

export interface ExporterCatalogProps {
  readonly dataLake: DataLake;
  readonly databaseName: string;
  /** First `dt` partition projection generates, YYYY-MM-DD. */
  readonly projectionStartDate: string;
  /**
   * `hive` (default): a Parquet table per contract table and the `*_latest` views. `iceberg`:
   * no Parquet table (the Iceberg tables are IcebergTables', iceberg-tables.ts), and of the
   * views only `campaigns_latest` and `jobs_latest` (the report tables have `_current` tables).
   */
  readonly tableFormat?: TableFormat;
}

const PARTITION_KEYS = [{ name: PARTITION_KEY, type: 'string', comment: 'export date (UTC), YYYY-MM-DD' }];

/**
 * The Glue database and its tables, generated from the table definitions and the key layout:
 * one Parquet table per contract table, `raw_reports` over the raw report lines, `runs` over
 * the run manifests, and the `*_latest` views (Athena views): the newest listing of each
 * campaign and job, and each job's newest report. With `tableFormat` iceberg, the database,
 * `raw_reports`, `runs`, `campaigns_latest` and `jobs_latest` (over the Iceberg tables of the
 * same names): the contract tables are Iceberg tables then (iceberg-tables.ts), and the report
 * tables' `_current` tables take their views' place.
 * Partition projection on `dt` (no crawler, no MSCK REPAIR): a run is queryable once it lands.
 */
export class ExporterCatalog extends Construct {
  readonly database: glue.CfnDatabase;
  readonly databaseName: string;
  /** The Parquet tables (none with `tableFormat` iceberg). */
  readonly tables: Readonly<Partial<Record<TableName, glue.CfnTable>>>;
  readonly rawReports: glue.CfnTable;
  readonly runs: glue.CfnTable;
  /** The `*_latest` views, by view name (`campaigns_latest` and `jobs_latest` only with Iceberg). */
  readonly views: Readonly<Record<string, glue.CfnTable>>;
  readonly #props: ExporterCatalogProps;

  constructor(scope: Construct, id: string, props: ExporterCatalogProps) {
    super(scope, id);
    this.#props = props;
    const { dataLake } = props;
    this.databaseName = props.databaseName;
    this.database = new glue.CfnDatabase(this, 'Database', {
      catalogId: Stack.of(this).account,
      databaseInput: {
        name: props.databaseName,
        description: 'campaign-report-exporter: campaigns, jobs and job reports (Parquet) and raw JSON Lines',
      },
    });

    const tableFormat = props.tableFormat ?? DEFAULT_TABLE_FORMAT;
    const hive = tableFormat === 'hive';
    const tables: Partial<Record<TableName, glue.CfnTable>> = {};
    for (const def of hive ? Object.values(TABLES) : []) {
      tables[def.name] = this.#table(`Table-${def.name}`, {
        name: def.name,
        description: def.doc,
        tableType: 'EXTERNAL_TABLE',
        parameters: {
          classification: 'parquet',
          EXTERNAL: 'TRUE',
          ...this.#projection(tablePrefix(def.name)),
        },
        partitionKeys: PARTITION_KEYS,
        storageDescriptor: {
          columns: glueColumns(def),
          location: dataLake.s3Url(tablePrefix(def.name)),
          ...PARQUET_FORMAT,
        },
      });
    }
    this.tables = tables;

    this.rawReports = this.#table('Table-raw-reports', {
      name: RAW_REPORTS_TABLE,
      description: 'Raw report responses as fetched, one JSON line per report (gzip JSON Lines)',
      tableType: 'EXTERNAL_TABLE',
      parameters: {
        classification: 'json',
        compressionType: 'gzip',
        EXTERNAL: 'TRUE',
        ...this.#projection(rawPrefix('reports')),
      },
      partitionKeys: PARTITION_KEYS,
      storageDescriptor: {
        columns: [...RAW_REPORT_COLUMNS],
        location: dataLake.s3Url(rawPrefix('reports')),
        ...JSON_LINES_FORMAT,
      },
    });

    // The manifests are one line of JSON each: the same SerDe reads them, nested fields typed.
    this.runs = this.#table('Table-runs', {
      name: RUNS_TABLE,
      description: 'One row per run: its manifest (status, outcome counts, requests, published files)',
      tableType: 'EXTERNAL_TABLE',
      parameters: { classification: 'json', EXTERNAL: 'TRUE', ...this.#projection(RUNS_PREFIX) },
      partitionKeys: PARTITION_KEYS,
      storageDescriptor: {
        columns: [...RUNS_GLUE_COLUMNS],
        location: dataLake.s3Url(RUNS_PREFIX),
        ...JSON_LINES_FORMAT,
      },
    });

    this.views = Object.fromEntries(
      athenaViews(tableFormat).map((view) => [
        view.name,
        this.#table(`View-${view.name}`, athenaViewInput(view, props.databaseName)),
      ]),
    );
  }

  /** Partition projection on `dt` over the files under `prefix`. */
  #projection(prefix: string): Record<string, string> {
    return {
      'projection.enabled': 'true',
      [`projection.${PARTITION_KEY}.type`]: 'date',
      [`projection.${PARTITION_KEY}.format`]: DT_PROJECTION_FORMAT,
      [`projection.${PARTITION_KEY}.range`]: `${this.#props.projectionStartDate},NOW`,
      [`projection.${PARTITION_KEY}.interval`]: '1',
      [`projection.${PARTITION_KEY}.interval.unit`]: 'DAYS',
      'storage.location.template': this.#props.dataLake.s3Url(partitionTemplate(prefix)),
    };
  }

  /** A table (or view) of the database, created after it. */
  #table(id: string, tableInput: glue.CfnTable.TableInputProperty): glue.CfnTable {
    const table = new glue.CfnTable(this, id, {
      catalogId: Stack.of(this).account,
      databaseName: this.databaseName,
      tableInput,
    });
    table.addResourceDependency(this.database);
    return table;
  }
}
