/**
 * The analysts' managed policy: Athena in the workgroup, Glue reads of the database, S3 reads
 * of the data and the workgroup's results prefix, and nothing else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATHENA_RESULTS_PREFIX } from '../../infra/constructs/data-lake.js';
import {
  actionsOf,
  logicalIdOf,
  removeSynthOutputs,
  resourcesOf,
  type Statement,
  type Synthesized,
  synthExporter,
} from './helpers.js';

let s: Synthesized;
let statements: (Statement & { Sid: string })[];
let bucketArn: unknown;

beforeAll(() => {
  s = synthExporter({ dataPrefix: 'exports/acme', stage: 'qa' });
  const policies = resourcesOf(s.template, 'AWS::IAM::ManagedPolicy');
  expect(Object.keys(policies)).toHaveLength(1);
  const policy = Object.values(policies)[0]!;
  statements = (policy.Properties.PolicyDocument as { Statement: (Statement & { Sid: string })[] }).Statement;
  bucketArn = { 'Fn::GetAtt': [logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket'), 'Arn'] };
});
afterAll(removeSynthOutputs);

const arn = (service: string, resource: string) => ({
  'Fn::Join': [
    '',
    [
      'arn:',
      { Ref: 'AWS::Partition' },
      `:${service}:`,
      { Ref: 'AWS::Region' },
      ':',
      { Ref: 'AWS::AccountId' },
      `:${resource}`,
    ],
  ],
});
const objects = (key: string) => ({ 'Fn::Join': ['', [bucketArn, `/${key}`]] });

describe('analyst policy', () => {
  it('holds exactly these statements', () => {
    const data = ['exports/acme/parquet/*', 'exports/acme/raw/*', 'exports/acme/runs/*'];
    expect(statements).toEqual([
      {
        Sid: 'AthenaWorkGroup',
        Effect: 'Allow',
        Action: [
          'athena:StartQueryExecution',
          'athena:StopQueryExecution',
          'athena:GetQueryExecution',
          'athena:BatchGetQueryExecution',
          'athena:ListQueryExecutions',
          'athena:GetQueryResults',
          'athena:GetQueryResultsStream',
          'athena:GetWorkGroup',
          'athena:GetQueryRuntimeStatistics',
          'athena:GetNamedQuery',
          'athena:BatchGetNamedQuery',
          'athena:ListNamedQueries',
          'athena:CreateNamedQuery',
          'athena:CreatePreparedStatement',
          'athena:GetPreparedStatement',
          'athena:ListPreparedStatements',
          'athena:UpdatePreparedStatement',
          'athena:DeletePreparedStatement',
        ],
        Resource: arn('athena', 'workgroup/CampaignReportExporter-qa'),
      },
      {
        Sid: 'AthenaCatalog',
        Effect: 'Allow',
        Action: [
          'athena:GetDataCatalog',
          'athena:ListDatabases',
          'athena:GetDatabase',
          'athena:ListTableMetadata',
          'athena:GetTableMetadata',
        ],
        Resource: arn('athena', 'datacatalog/AwsDataCatalog'),
      },
      {
        Sid: 'AthenaConsoleLists',
        Effect: 'Allow',
        Action: ['athena:ListWorkGroups', 'athena:ListDataCatalogs', 'athena:ListEngineVersions'],
        Resource: '*',
      },
      {
        Sid: 'GlueRead',
        Effect: 'Allow',
        Action: [
          'glue:GetDatabase',
          'glue:GetDatabases',
          'glue:GetTable',
          'glue:GetTables',
          'glue:GetPartition',
          'glue:GetPartitions',
        ],
        Resource: [
          arn('glue', 'catalog'),
          arn('glue', 'database/campaign_report_exporter_qa'),
          arn('glue', 'table/campaign_report_exporter_qa/*'),
        ],
      },
      { Sid: 'DataRead', Effect: 'Allow', Action: 's3:GetObject', Resource: data.map(objects) },
      {
        Sid: 'DataList',
        Effect: 'Allow',
        Action: 's3:ListBucket',
        Resource: bucketArn,
        Condition: { StringLike: { 's3:prefix': [...data, `${ATHENA_RESULTS_PREFIX}*`] } },
      },
      { Sid: 'BucketLocation', Effect: 'Allow', Action: 's3:GetBucketLocation', Resource: bucketArn },
      {
        Sid: 'QueryResults',
        Effect: 'Allow',
        Action: ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts'],
        Resource: objects(`${ATHENA_RESULTS_PREFIX}*`),
      },
    ]);
  });

  it('grants no wildcard action and writes nowhere but the results prefix', () => {
    for (const statement of statements) {
      for (const action of actionsOf(statement)) expect(action).not.toContain('*');
      const writes = actionsOf(statement).filter((a) =>
        /^s3:(Put|Delete|Abort)|^glue:(Create|Update|Delete|Batch)/.test(a),
      );
      if (writes.length > 0) expect(statement.Resource).toEqual(objects(`${ATHENA_RESULTS_PREFIX}*`));
    }
    // state/ and quarantine/ are the exporter's, not the analysts'.
    expect(JSON.stringify(statements)).not.toMatch(/state\/|quarantine\//);
  });

  it('is an output of the stack', () => {
    const id = Object.keys(resourcesOf(s.template, 'AWS::IAM::ManagedPolicy'))[0]!;
    s.template.hasOutput('AnalystPolicyArn', { Value: { Ref: id } });
  });
});
