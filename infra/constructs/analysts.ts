import { Stack, Token, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import {
  DEFAULT_TABLE_FORMAT,
  ICEBERG_ROOT,
  PARQUET_ROOT,
  RAW_ROOT,
  RUNS_ROOT,
  type TableFormat,
} from '../../shared/layout.js';
import { ATHENA_RESULTS_PREFIX, type DataLake } from './data-lake.js';

/**
 * The layout roots a query reads: the tables (Parquet), the raw report lines and the run
 * manifests. Not `state/` (the exporter's bookkeeping) nor `quarantine/` (rejected bodies).
 */
export const ANALYST_DATA_ROOTS = [PARQUET_ROOT, RAW_ROOT, RUNS_ROOT] as const;
/**
 * With `tableFormat` iceberg, the Iceberg tables' metadata and data files too (Athena reads both
 * with the caller's credentials). `parquet/` stays readable: the files a Hive deployment wrote
 * before it switched remain there.
 */
export const analystDataRoots = (format: TableFormat): readonly string[] =>
  format === 'iceberg' ? [...ANALYST_DATA_ROOTS, ICEBERG_ROOT] : ANALYST_DATA_ROOTS;

/** Athena's AWS Glue catalog, the one the workgroup's tables live in. */
const GLUE_DATA_CATALOG = 'AwsDataCatalog';

export interface AnalystPolicyProps {
  readonly dataLake: DataLake;
  readonly databaseName: string;
  readonly workGroupName: string;
  /** Which tables the data is in (default hive); the Glue reads cover every table of the database. */
  readonly tableFormat?: TableFormat;
}

/**
 * A managed policy for the people who query the data: Athena in the exporter's workgroup,
 * Glue reads of its database, S3 reads of the data it holds, and the workgroup's results
 * prefix (Athena writes and reads query results with the caller's credentials). Attach it to
 * a role, user or group; it grants nothing else.
 */
export class AnalystPolicy extends Construct {
  readonly policy: iam.ManagedPolicy;

  constructor(scope: Construct, id: string, props: AnalystPolicyProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const { bucket, dataPrefix } = props.dataLake;
    const glue = (resource: string) =>
      `arn:${stack.partition}:glue:${stack.region}:${stack.account}:${resource}`;
    const athena = (resource: string) =>
      `arn:${stack.partition}:athena:${stack.region}:${stack.account}:${resource}`;
    const dataKeys = analystDataRoots(props.tableFormat ?? DEFAULT_TABLE_FORMAT).map(
      (root) => `${dataPrefix}${root}/*`,
    );

    this.policy = new iam.ManagedPolicy(this, 'Policy', {
      description: `Query the campaign-report-exporter data in Athena workgroup ${props.workGroupName}`,
      statements: [
        new iam.PolicyStatement({
          sid: 'AthenaWorkGroup',
          actions: [
            'athena:StartQueryExecution',
            'athena:StopQueryExecution',
            'athena:GetQueryExecution',
            'athena:BatchGetQueryExecution',
            'athena:ListQueryExecutions',
            'athena:GetQueryResults',
            'athena:GetQueryResultsStream',
            'athena:GetWorkGroup',
            // The console's query statistics tab.
            'athena:GetQueryRuntimeStatistics',
            // The workgroup's saved queries (the demo queries the stack creates) and the analyst's own.
            'athena:GetNamedQuery',
            'athena:BatchGetNamedQuery',
            'athena:ListNamedQueries',
            'athena:CreateNamedQuery',
            // Parameterized queries (EXECUTE … USING) live in the workgroup.
            'athena:CreatePreparedStatement',
            'athena:GetPreparedStatement',
            'athena:ListPreparedStatements',
            'athena:UpdatePreparedStatement',
            'athena:DeletePreparedStatement',
          ],
          resources: [athena(`workgroup/${props.workGroupName}`)],
        }),
        new iam.PolicyStatement({
          sid: 'AthenaCatalog',
          actions: [
            'athena:GetDataCatalog',
            'athena:ListDatabases',
            'athena:GetDatabase',
            'athena:ListTableMetadata',
            'athena:GetTableMetadata',
          ],
          resources: [athena(`datacatalog/${GLUE_DATA_CATALOG}`)],
        }),
        new iam.PolicyStatement({
          // The console lists workgroups, catalogs and engine versions to let the analyst pick
          // them; these actions take no resource and return names only.
          sid: 'AthenaConsoleLists',
          actions: ['athena:ListWorkGroups', 'athena:ListDataCatalogs', 'athena:ListEngineVersions'],
          resources: ['*'],
        }),
        new iam.PolicyStatement({
          sid: 'GlueRead',
          actions: [
            'glue:GetDatabase',
            'glue:GetDatabases',
            'glue:GetTable',
            'glue:GetTables',
            'glue:GetPartition',
            'glue:GetPartitions',
          ],
          resources: [
            glue('catalog'),
            glue(`database/${props.databaseName}`),
            glue(`table/${props.databaseName}/*`),
          ],
        }),
        new iam.PolicyStatement({
          sid: 'DataRead',
          actions: ['s3:GetObject'],
          resources: dataKeys.map((key) => bucket.arnForObjects(key)),
        }),
        new iam.PolicyStatement({
          sid: 'DataList',
          actions: ['s3:ListBucket'],
          resources: [bucket.bucketArn],
          conditions: { StringLike: { 's3:prefix': [...dataKeys, `${ATHENA_RESULTS_PREFIX}*`] } },
        }),
        new iam.PolicyStatement({
          sid: 'BucketLocation',
          actions: ['s3:GetBucketLocation'],
          resources: [bucket.bucketArn],
        }),
        new iam.PolicyStatement({
          sid: 'QueryResults',
          actions: ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts'],
          resources: [bucket.arnForObjects(`${ATHENA_RESULTS_PREFIX}*`)],
        }),
      ],
    });
    this.#acknowledge(bucket, props.databaseName, dataKeys);
  }

  #acknowledge(bucket: s3.Bucket, databaseName: string, dataKeys: readonly string[]): void {
    const stack = Stack.of(this);
    const bucketId = stack.getLogicalId(bucket.node.defaultChild as s3.CfnBucket);
    // cdk-nag names a pseudo parameter `<AWS::Region>`, a stack with an env its value.
    const shown = (value: string, pseudo: string) => (Token.isUnresolved(value) ? `<AWS::${pseudo}>` : value);
    const glueArn = `arn:${shown(stack.partition, 'Partition')}:glue:${shown(stack.region, 'Region')}:${shown(stack.account, 'AccountId')}`;
    const ack = (finding: string, reason: string) =>
      Validations.of(this.policy).acknowledge({ id: `AwsSolutions-IAM5[${finding}]`, reason });
    for (const key of [...dataKeys, `${ATHENA_RESULTS_PREFIX}*`]) {
      ack(
        `Resource::<${bucketId}.Arn>/${key}`,
        `Objects under ${key.replace(/\*$/, '')} are created per run and date (or per query, for results); the grant names that prefix only, with explicit actions.`,
      );
    }
    ack(
      `Resource::${glueArn}:table/${databaseName}/*`,
      `Every table and view of the exporter's Glue database ${databaseName} (they are generated from the table definitions); reads only.`,
    );
    ack(
      'Resource::*',
      'athena:ListWorkGroups, athena:ListDataCatalogs and athena:ListEngineVersions take no resource (IAM accepts only "*"); they return names only, and the console needs them to pick the workgroup.',
    );
  }
}
