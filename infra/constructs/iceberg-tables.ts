/**
 * The Glue tables of the Iceberg option (`tableFormat` iceberg): each contract table and each
 * `<report table>_current` table as an Apache Iceberg v2 table at `<root>/iceberg/<name>`.
 *
 * What Athena needs to read a Glue table as Iceberg: the parameter `table_type` = `ICEBERG` and
 * `metadata_location` naming the current metadata JSON. CloudFormation's open table format input
 * (`IcebergInput`, `MetadataOperation: CREATE`) makes Glue write an initial metadata file
 * (`metadata/00000-<uuid>.metadata.json`: a schema from the columns, no snapshot) and set both
 * parameters; `TableType` is `EXTERNAL_TABLE`, as Iceberg's own Glue catalog writes it.
 *
 * No partition spec here: the shape that deploys carries the table in `TableInput` (location and
 * columns) and only the create directive in `IcebergInput`, and Glue makes that table
 * unpartitioned (Iceberg tables have no Glue partition keys). `IcebergInput.IcebergTableInput`
 * (schema, partition spec) is in the CloudFormation schema, but its field types are plain strings
 * (no `list<string>`), and deployments of it are reported to roll back. So the exporter's first
 * commit writes its own schema (field ids) and its `dt` identity partition spec.
 *
 * The hazard: CloudFormation updates an AWS::Glue::Table with UpdateTable and the template's
 * table input, which has no `metadata_location`: any change to one of these resources would
 * point Athena at nothing until the exporter's next commit (the commit sets `table_type` and
 * `metadata_location` again, and the core re-adopts its last committed metadata from its record
 * under `state/` when Glue's pointer is gone or foreign). So every property here derives from
 * fixed definitions (names, columns, the bucket, the database) and nothing that changes between
 * deploys; a change to the contract's columns is such a change, and its release must say so.
 */
import { Stack } from 'aws-cdk-lib';
import * as glue from 'aws-cdk-lib/aws-glue';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { REPORT_TABLES, TABLE_NAMES, TABLES, type TableDef } from '../../shared/export/tables.js';
import { GLUE_PARAMETERS, ICEBERG_TABLE_TYPE } from '../../shared/iceberg/glue-parameters.js';
import { currentTableName, icebergTablePrefix, PARTITION_KEY } from '../../shared/layout.js';
import { glueColumns } from './catalog.js';
import type { DataLake } from './data-lake.js';

/** One Iceberg table of the stack: its name and the contract table whose columns it has. */
export interface IcebergTableDef {
  readonly name: string;
  readonly def: TableDef;
  readonly description: string;
}

/** The 14 Iceberg tables: the 8 contract tables, then a `_current` table per report table. */
export const ICEBERG_TABLES: readonly IcebergTableDef[] = [
  ...TABLE_NAMES.map((name) => ({ name, def: TABLES[name], description: TABLES[name].doc })),
  ...REPORT_TABLES.map((name) => ({
    name: currentTableName(name),
    def: TABLES[name],
    description: `The newest report per job: ${TABLES[name].doc}`,
  })),
];

/**
 * The Glue columns of an Iceberg table: the contract table's columns (their Hive types), then
 * `dt`, the identity partition's source column. For people and Glue clients only: Athena reads
 * the schema from the metadata. Until shared/iceberg exports the schema's own columns.
 */
export const icebergGlueColumns = (def: TableDef): glue.CfnTable.ColumnProperty[] => [
  ...glueColumns(def),
  { name: PARTITION_KEY, type: 'string', comment: 'export date (UTC), YYYY-MM-DD; the identity partition' },
];

/** The Glue actions a commit makes: read the pointer and its version, swap it. */
export const ICEBERG_COMMIT_ACTIONS = ['glue:GetTable', 'glue:UpdateTable'] as const;

export interface IcebergTablesProps {
  readonly dataLake: DataLake;
  readonly databaseName: string;
  /** The database resource: the tables are created after it. */
  readonly database: glue.CfnDatabase;
}

export class IcebergTables extends Construct {
  /** The tables by name. */
  readonly tables: Readonly<Record<string, glue.CfnTable>>;
  readonly databaseName: string;

  constructor(scope: Construct, id: string, props: IcebergTablesProps) {
    super(scope, id);
    this.databaseName = props.databaseName;
    const account = Stack.of(this).account;
    this.tables = Object.fromEntries(
      ICEBERG_TABLES.map(({ name, def, description }) => {
        const table = new glue.CfnTable(this, `Table-${name}`, {
          catalogId: account,
          databaseName: props.databaseName,
          tableInput: {
            name,
            description,
            tableType: 'EXTERNAL_TABLE',
            // Glue sets it too; kept in the template so that an update by CloudFormation at
            // least keeps the table an Iceberg table.
            parameters: { [GLUE_PARAMETERS.tableType]: ICEBERG_TABLE_TYPE },
            storageDescriptor: {
              location: props.dataLake.s3Url(icebergTablePrefix(name)),
              columns: icebergGlueColumns(def),
            },
          },
          openTableFormatInput: { icebergInput: { metadataOperation: 'CREATE', version: '2' } },
        });
        table.addResourceDependency(props.database);
        return [name, table];
      }),
    );
  }

  /**
   * The ARNs Glue authorizes a table call on: the catalog, the database and each table (Glue
   * checks all three).
   */
  get arns(): string[] {
    const stack = Stack.of(this);
    const arn = (resource: string) =>
      `arn:${stack.partition}:glue:${stack.region}:${stack.account}:${resource}`;
    return [
      arn('catalog'),
      arn(`database/${this.databaseName}`),
      ...ICEBERG_TABLES.map((t) => arn(`table/${this.databaseName}/${t.name}`)),
    ];
  }

  /** Lets `role` commit: read each table's pointer and swap it (GetTable, UpdateTable). */
  grantCommit(role: iam.IRole): void {
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'IcebergCommit',
        actions: [...ICEBERG_COMMIT_ACTIONS],
        resources: this.arns,
      }),
    );
  }
}
