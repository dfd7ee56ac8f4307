/**
 * The stack with `tableFormat` iceberg (one synth, cdk-nag included: an unacknowledged finding
 * fails it): 14 Glue tables Athena reads as Iceberg v2, no Hive table nor `*_latest` view, and
 * grants evaluated as IAM would: the functions that close runs commit (Glue GetTable/UpdateTable
 * and S3 under `iceberg/`), the others do not, analysts read. And the default (hive) stack
 * gains none of it.
 */
import { GetTableCommand, GlueClient, UpdateTableCommand } from '@aws-sdk/client-glue';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { glueColumns } from '../../infra/constructs/catalog.js';
import { ICEBERG_COMMITTERS } from '../../infra/constructs/data-lake-access.js';
import { FUNCTION_NAMES, type FunctionName } from '../../infra/constructs/functions.js';
import { ICEBERG_TABLES } from '../../infra/constructs/iceberg-tables.js';
import { REPORT_TABLES, RESCUED_COLUMN, TABLE_NAMES, TABLES } from '../../shared/export/tables.js';
import { LATEST_VIEWS, LISTING_VIEWS } from '../../shared/export/views.js';
import { type IcebergTableName, icebergSchema } from '../../shared/iceberg/schema.js';
import type { IcebergType } from '../../shared/iceberg/types.js';
import { Deployment, synthesizedTemplate } from '../helpers/iam/deployment.js';
import { IamGuard } from '../helpers/iam/guard.js';
import type { TemplateJson } from '../helpers/iam/intrinsics.js';
import { evaluate } from '../helpers/iam/policy.js';
import {
  glueSurface,
  localSqlSurface,
  logicalIdOf,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

const TLS = { 'aws:SecureTransport': 'true', 's3:TlsVersion': '1.3' };

interface TableInput {
  Name: string;
  TableType: string;
  Parameters?: Record<string, unknown>;
  PartitionKeys?: unknown[];
  StorageDescriptor: { Location: unknown; Columns: { Name: string; Type: string }[] };
}

let s: Synthesized;
let deployment: Deployment;
let bucketId: string;
let tables: { id: string; props: Record<string, unknown>; input: TableInput }[];

beforeAll(() => {
  s = synthExporter({ tableFormat: 'iceberg' });
  deployment = new Deployment(s.template.toJSON() as TemplateJson);
  bucketId = logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket');
  tables = Object.entries(resourcesOf(s.template, 'AWS::Glue::Table')).map(([id, r]) => ({
    id,
    props: r.Properties,
    input: r.Properties.TableInput as TableInput,
  }));
});
afterAll(removeSynthOutputs);

const iceberg = () => tables.filter((t) => t.props.OpenTableFormatInput !== undefined);
const fnDecision = (
  fn: FunctionName,
  action: string,
  resource: string,
  context: Record<string, string> = TLS,
) =>
  evaluate(
    { principal: deployment.functions[fn].roleArn, action, resource, context },
    {
      identity: deployment.functions[fn].policies,
      resource: resource.startsWith('arn:aws:s3:::') ? deployment.bucketPolicies(bucketName()) : [],
    },
  ).decision;
const bucketName = () => deployment.functions['finish-run'].environment.DATA_BUCKET!;
const glueArn = (resource: string) =>
  `arn:aws:glue:${deployment.target.region}:${deployment.target.account}:${resource}`;
const databaseName = () => deployment.functions['finish-run'].environment.GLUE_DATABASE!;

describe('tableFormat iceberg: the sql command over an Iceberg output', () => {
  it('offers exactly the tables and views of the Iceberg stack (no reports_latest), with their columns in order', async () => {
    expect(await localSqlSurface('iceberg')).toEqual(glueSurface(s.template));
  });
});

describe('tableFormat iceberg: the Glue tables', () => {
  it('has the 8 contract tables and the 6 _current tables as Iceberg tables, beside raw_reports, runs and the listing views', () => {
    const names = iceberg().map((t) => t.input.Name);
    expect(names.sort()).toEqual([...TABLE_NAMES, ...REPORT_TABLES.map((t) => `${t}_current`)].sort());
    expect(tables.map((t) => t.input.Name).sort()).toEqual(
      [...names, 'raw_reports', 'runs', ...LISTING_VIEWS.map((v) => v.name)].sort(),
    );
  });

  it('creates each as Athena reads an Iceberg v2 table: CREATE v2, EXTERNAL_TABLE, table_type ICEBERG', () => {
    for (const { props, input } of iceberg()) {
      expect(props.OpenTableFormatInput).toEqual({
        IcebergInput: { MetadataOperation: 'CREATE', Version: '2' },
      });
      expect(input.TableType).toBe('EXTERNAL_TABLE');
      expect(input.Parameters).toEqual({ table_type: 'ICEBERG' });
      // Iceberg tables have no Glue partition keys: the partition spec is in the metadata.
      expect(input.PartitionKeys).toBeUndefined();
    }
  });

  it("places each at iceberg/<name> in the data bucket, where the Glue catalog's commits look", () => {
    for (const { input } of iceberg()) {
      expect(deployment.resolver.string(input.StorageDescriptor.Location)).toBe(
        `s3://${bucketName()}/iceberg/${input.Name}`,
      );
    }
  });

  it("gives each its contract table's columns, then dt", () => {
    for (const { name, def } of ICEBERG_TABLES) {
      const table = iceberg().find((t) => t.input.Name === name)!;
      expect(table.input.StorageDescriptor.Columns.map((c) => [c.Name, c.Type])).toEqual([
        ...glueColumns(def).map((c) => [c.name, c.type]),
        ['dt', 'string'],
      ]);
    }
    expect(ICEBERG_TABLES.find((t) => t.name === 'questions_current')?.def).toBe(TABLES.questions);
  });

  it('registers the columns of the schema an evolve run commits (_rescued included), by name and type', () => {
    const glueType = (t: IcebergType): string =>
      typeof t === 'object'
        ? `array<${t.element}>`
        : t === 'long'
          ? 'bigint'
          : t === 'timestamptz'
            ? 'timestamp'
            : t;
    for (const { name } of ICEBERG_TABLES) {
      const table = iceberg().find((t) => t.input.Name === name)!;
      expect(
        table.input.StorageDescriptor.Columns.map((c) => [c.Name, c.Type]),
        name,
      ).toEqual(
        icebergSchema(name as IcebergTableName, 'evolve').fields.map((f) => [f.name, glueType(f.type)]),
      );
    }
    expect(
      iceberg().find((t) => t.input.Name === 'reports_current')!.input.StorageDescriptor.Columns,
    ).toContainEqual(expect.objectContaining({ Name: RESCUED_COLUMN, Type: 'string' }));
  });

  it('builds each from fixed values only (the bucket and the account): a redeploy leaves them untouched', () => {
    for (const { props } of iceberg()) {
      expect([...referencedIds(props)].sort()).toEqual(['AWS::AccountId', bucketId].sort());
    }
  });

  it('has no Hive table of the contract, and of the *_latest views only campaigns_latest and jobs_latest', () => {
    const views = tables.filter((t) => t.input.TableType === 'VIRTUAL_VIEW').map((t) => t.input.Name);
    expect(views.sort()).toEqual(['campaigns_latest', 'jobs_latest']);
    expect(LATEST_VIEWS.length).toBeGreaterThan(views.length);
    const parquet = tables.filter((t) =>
      JSON.stringify(t.input.StorageDescriptor.Location ?? '').includes('/parquet/'),
    );
    expect(parquet).toEqual([]);
  });

  it('has the saved queries read the _current tables, which exist, and no *_latest view', () => {
    const queries = Object.values(resourcesOf(s.template, 'AWS::Athena::NamedQuery')).map(
      (r) => r.Properties.QueryString as string,
    );
    expect(queries.length).toBeGreaterThan(0);
    const names = new Set(tables.map((t) => t.input.Name));
    for (const sql of queries) {
      expect(sql).not.toMatch(/_latest\b/);
      for (const [table] of sql.matchAll(/\b\w+_current\b/g)) expect(names.has(table)).toBe(true);
    }
    expect(queries.some((sql) => sql.includes('reports_current'))).toBe(true);
  });
});

describe('tableFormat iceberg: the grants', () => {
  const committers = ICEBERG_COMMITTERS as readonly FunctionName[];
  const others = FUNCTION_NAMES.filter((n) => !committers.includes(n));

  it('tells every function the format, and the committers the Glue database', () => {
    for (const name of FUNCTION_NAMES) {
      expect(deployment.functions[name].environment.TABLE_FORMAT).toBe('iceberg');
      expect(deployment.functions[name].environment.GLUE_DATABASE).toBe(
        committers.includes(name) ? 'campaign_report_exporter' : undefined,
      );
    }
  });

  it('lets start-run and finish-run read and swap every Iceberg table pointer (catalog, database, table)', () => {
    for (const fn of committers) {
      for (const { name } of ICEBERG_TABLES) {
        for (const action of ['glue:GetTable', 'glue:UpdateTable']) {
          for (const resource of ['catalog', `database/${databaseName()}`, `table/${databaseName()}/${name}`])
            expect(fnDecision(fn, action, glueArn(resource)), `${fn} ${action} ${resource}`).toBe('allow');
        }
      }
      expect(fnDecision(fn, 'glue:UpdateTable', glueArn(`table/${databaseName()}/runs`))).not.toBe('allow');
      expect(fnDecision(fn, 'glue:DeleteTable', glueArn(`table/${databaseName()}/reports`))).not.toBe(
        'allow',
      );
    }
  });

  it('lets the committers read, write and delete under iceberg/, and no other function', () => {
    const key = (k: string) => `arn:aws:s3:::${bucketName()}/${k}`;
    const files = [
      'iceberg/reports/metadata/00001-u.metadata.json',
      'iceberg/reports/data/dt=2026-11-22/r-0.parquet',
    ];
    for (const file of files) {
      for (const action of ['s3:GetObject', 's3:PutObject', 's3:DeleteObject']) {
        for (const fn of committers)
          expect(fnDecision(fn, action, key(file)), `${fn} ${action}`).toBe('allow');
        for (const fn of others)
          expect(fnDecision(fn, action, key(file)), `${fn} ${action}`).not.toBe('allow');
      }
    }
    for (const fn of others) expect(fnDecision(fn, 'glue:UpdateTable', glueArn('catalog'))).not.toBe('allow');
  });

  it('lets analysts read the Iceberg tables: Glue, list and objects under iceberg/', () => {
    const analyst = deployment.managedPolicy('Analysts').policy;
    const decide = (action: string, resource: string, context: Record<string, string> = TLS) =>
      evaluate(
        { principal: 'arn:aws:iam::123456789012:role/analyst', action, resource, context },
        {
          identity: [analyst],
          resource: resource.startsWith('arn:aws:s3') ? deployment.bucketPolicies(bucketName()) : [],
        },
      ).decision;
    expect(decide('glue:GetTable', glueArn(`table/${databaseName()}/reports_current`))).toBe('allow');
    expect(
      decide(
        's3:GetObject',
        `arn:aws:s3:::${bucketName()}/iceberg/reports_current/metadata/00001-u.metadata.json`,
      ),
    ).toBe('allow');
    expect(
      decide('s3:ListBucket', `arn:aws:s3:::${bucketName()}`, {
        ...TLS,
        's3:prefix': 'iceberg/reports/data/',
      }),
    ).toBe('allow');
    expect(decide('glue:UpdateTable', glueArn(`table/${databaseName()}/reports`))).not.toBe('allow');
    expect(decide('s3:PutObject', `arn:aws:s3:::${bucketName()}/iceberg/reports/metadata/x.json`)).not.toBe(
      'allow',
    );
  });
});

describe('tableFormat iceberg: the IAM guard of the handler tests', () => {
  it("evaluates a commit's Glue calls: finish-run may, export-reports may not", async () => {
    const glue = mockClient(GlueClient);
    glue.on(GetTableCommand).resolves({ Table: { Name: 'reports', VersionId: '1' } });
    glue.on(UpdateTableCommand).resolves({});
    const guard = new IamGuard(deployment);
    guard.install();
    try {
      const client = new GlueClient({ region: 'eu-west-1' });
      const env = { GLUE_DATABASE: 'local_db' };
      const commit = () =>
        client.send(new GetTableCommand({ DatabaseName: 'local_db', Name: 'reports_current' })).then(() =>
          client.send(
            new UpdateTableCommand({
              DatabaseName: 'local_db',
              TableInput: { Name: 'reports_current' },
              VersionId: '1',
            }),
          ),
        );
      await guard.as({ fn: 'finish-run', env }, commit);
      expect(guard.problems()).toEqual([]);
      expect(
        guard.made('finish-run', 'glue:UpdateTable', /:table\/campaign_report_exporter\/reports_current$/),
      ).toBe(true);
      await expect(guard.as({ fn: 'export-reports', env }, commit)).rejects.toThrow(
        /export-reports may not glue:GetTable/,
      );
    } finally {
      guard.uninstall();
      glue.restore();
    }
  });
});

describe('the default (hive) stack', () => {
  let hive: TemplateJson;
  beforeAll(async () => {
    // The IAM tests' template, cached on disk (no synth of its own when they ran first).
    hive = await synthesizedTemplate();
  });

  it('gains no Iceberg table, Glue write, iceberg/ grant nor Glue database variable; only TABLE_FORMAT=hive', () => {
    const text = JSON.stringify(hive.Resources);
    expect(text).not.toContain('OpenTableFormatInput');
    expect(text).not.toContain('glue:UpdateTable');
    expect(text).not.toContain('/iceberg/');
    expect(text).not.toContain('GLUE_DATABASE');
    const functions = Object.values(hive.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    expect(functions).toHaveLength(FUNCTION_NAMES.length);
    for (const f of functions) {
      expect(
        (f.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables
          ?.TABLE_FORMAT,
      ).toBe('hive');
    }
  });
});
