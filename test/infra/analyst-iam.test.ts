/**
 * The analyst path, evaluated: what an Athena query of the exporter's tables and views asks of
 * IAM under the analyst managed policy (and the bucket policy), from the Glue tables' locations
 * in the synthesized stack: the catalog reads, the listing and reads of each table's partition,
 * and the query results read and written. The state and quarantine stay out of reach.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ATHENA_RESULTS_PREFIX } from '../../infra/constructs/data-lake.js';
import { Deployment } from '../helpers/iam/deployment.js';
import { evaluate, type IamRequest, type NamedPolicy } from '../helpers/iam/policy.js';

const ANALYST = 'arn:aws:iam::123456789012:role/analyst';
const TLS = { 'aws:SecureTransport': 'true', 's3:TlsVersion': '1.3' };
const DT = 'dt=2026-11-22/';

let deployment: Deployment;
let analyst: NamedPolicy;
let bucket: string;
/** Each Glue table with files (not a view): its name and its location's key prefix. */
let tables: { name: string; prefix: string }[];
let database: string;
let workGroup: string;

const decide = (action: string, resource: string, context: IamRequest['context'] = TLS) => {
  const onBucket = resource.startsWith(`arn:aws:s3:::${bucket}`);
  return evaluate(
    { principal: ANALYST, action, resource, context },
    { identity: [analyst], resource: onBucket ? deployment.bucketPolicies(bucket) : [] },
  ).decision;
};
const object = (key: string) => `arn:aws:s3:::${bucket}/${key}`;
const athena = (resource: string) => `arn:aws:athena:eu-west-1:123456789012:${resource}`;
const glue = (resource: string) => `arn:aws:glue:eu-west-1:123456789012:${resource}`;

beforeAll(async () => {
  deployment = await Deployment.load();
  analyst = deployment.managedPolicy('Analysts').policy;
  const { resolver } = deployment;
  const [db] = deployment.resourcesOf('AWS::Glue::Database');
  database = resolver.string((db![1].Properties!.DatabaseInput as { Name: unknown }).Name);
  const [wg] = deployment.resourcesOf('AWS::Athena::WorkGroup');
  workGroup = resolver.string(wg![1].Properties?.Name);
  tables = [];
  for (const [, r] of deployment.resourcesOf('AWS::Glue::Table')) {
    const input = r.Properties?.TableInput as {
      Name: string;
      TableType: string;
      StorageDescriptor: { Location?: unknown };
    };
    if (input.TableType === 'VIRTUAL_VIEW') continue; // a view reads the tables below
    const [, b, prefix] =
      /^s3:\/\/([^/]+)\/(.*)$/.exec(resolver.string(input.StorageDescriptor.Location)) ?? [];
    bucket = b!;
    tables.push({ name: input.Name, prefix: prefix! });
  }
});

describe('an analyst querying in Athena', () => {
  it('found the tables of the catalog, parquet, raw and runs', () => {
    const roots = new Set(tables.map((t) => t.prefix.split('/')[0]));
    expect([...roots].sort()).toEqual(['parquet', 'raw', 'runs']);
    expect(tables.length).toBeGreaterThan(3);
  });

  it('may list and read every partition of every table', () => {
    const denied: string[] = [];
    for (const { name, prefix } of tables) {
      const list = decide('s3:ListBucket', `arn:aws:s3:::${bucket}`, {
        ...TLS,
        's3:prefix': `${prefix}${DT}`,
      });
      const read = decide('s3:GetObject', object(`${prefix}${DT}20261122T020000Z-a1b2c3-0.parquet`));
      if (list !== 'allow' || read !== 'allow') denied.push(`${name}: list ${list}, read ${read}`);
    }
    expect(denied).toEqual([]);
    expect(decide('s3:GetBucketLocation', `arn:aws:s3:::${bucket}`)).toBe('allow');
  });

  it('may read the catalog and run queries in the workgroup, prepared statements and statistics too', () => {
    for (const action of [
      'athena:StartQueryExecution',
      'athena:GetQueryResults',
      'athena:GetQueryRuntimeStatistics',
      'athena:CreateNamedQuery',
      'athena:CreatePreparedStatement',
      'athena:GetPreparedStatement',
      'athena:ListPreparedStatements',
      'athena:UpdatePreparedStatement',
      'athena:DeletePreparedStatement',
    ])
      expect(decide(action, athena(`workgroup/${workGroup}`)), action).toBe('allow');
    expect(decide('athena:StartQueryExecution', athena('workgroup/primary'))).toBe('implicit-deny');
    expect(decide('athena:ListEngineVersions', '*')).toBe('allow');
    for (const { name } of tables)
      expect(decide('glue:GetTable', glue(`table/${database}/${name}`))).toBe('allow');
    expect(decide('glue:GetTable', glue('table/other_db/reports'))).toBe('implicit-deny');
  });

  it('may write and read the query results, and list them', () => {
    const result = `${ATHENA_RESULTS_PREFIX}3f1c9a2e-0000-4000-8000-000000000000.csv`;
    for (const action of [
      's3:PutObject',
      's3:GetObject',
      's3:AbortMultipartUpload',
      's3:ListMultipartUploadParts',
    ])
      expect(decide(action, object(result)), action).toBe('allow');
    expect(
      decide('s3:ListBucket', `arn:aws:s3:::${bucket}`, { ...TLS, 's3:prefix': ATHENA_RESULTS_PREFIX }),
    ).toBe('allow');
  });

  it('reaches neither the state nor the quarantine, and nothing without TLS', () => {
    expect(decide('s3:GetObject', object('state/lock.json'))).toBe('implicit-deny');
    expect(decide('s3:GetObject', object('quarantine/dt=2026-11-22/r/job-1.json'))).toBe('implicit-deny');
    expect(decide('s3:ListBucket', `arn:aws:s3:::${bucket}`, { ...TLS, 's3:prefix': 'state/' })).toBe(
      'implicit-deny',
    );
    expect(decide('s3:PutObject', object(`${tables[0]!.prefix}${DT}x.parquet`))).toBe('implicit-deny');
    const plain = { 'aws:SecureTransport': 'false', 's3:TlsVersion': '1.3' };
    expect(decide('s3:GetObject', object(`${tables[0]!.prefix}${DT}x.parquet`), plain)).toBe('explicit-deny');
  });
});
