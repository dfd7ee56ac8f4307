/**
 * Where the data lives and how it is read (cdk.json's context, bundling skipped): the bucket,
 * the queues and their invariants, the Glue catalog and Athena.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATHENA_ENGINE_VERSION } from '../../infra/constructs/athena.js';
import { RAW_REPORTS_TABLE } from '../../infra/constructs/catalog.js';
import { QUERIES } from '../../shared/export/queries.js';
import { TABLES } from '../../shared/export/tables.js';
import { LATEST_VIEWS, RUNS_TABLE } from '../../shared/export/views.js';
import { partitionTemplate, rawPrefix, STATE_KEYS, tablePrefix } from '../../shared/layout.js';
import {
  dataLakeUrl,
  logicalIdOf,
  projectedTableParameters,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

let s: Synthesized;
let bucketId: string;

beforeAll(() => {
  s = synthExporter({});
  bucketId = logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket');
});

const bucketUrl = (key: string) => dataLakeUrl(bucketId, key);

afterAll(removeSynthOutputs);

describe('data lake bucket', () => {
  it('blocks public access, encrypts with SSE-S3, versions and logs access to a separate bucket', () => {
    const buckets = resourcesOf(s.template, 'AWS::S3::Bucket');
    expect(Object.keys(buckets)).toHaveLength(2);
    const logId = Object.keys(buckets).find((id) => id !== bucketId)!;
    s.template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
      },
      VersioningConfiguration: { Status: 'Enabled' },
      LoggingConfiguration: { DestinationBucketName: { Ref: logId }, LogFilePrefix: 'data-lake/' },
    });
    expect(buckets[bucketId]!.Properties.LoggingConfiguration).toBeDefined();
  });

  it('keeps raw/ (moved to Glacier IR), ages out athena-results/ after the configured days, and old versions after 30', () => {
    const rules = (
      resourcesOf(s.template, 'AWS::S3::Bucket')[bucketId]!.Properties.LifecycleConfiguration as {
        Rules: Record<string, unknown>[];
      }
    ).Rules;
    expect(rules).toEqual(
      expect.arrayContaining([
        {
          Id: 'archive-raw',
          Prefix: 'raw/',
          Transitions: [{ StorageClass: 'GLACIER_IR', TransitionInDays: 90 }],
          Status: 'Enabled',
        },
        expect.objectContaining({ Prefix: 'athena-results/', ExpirationInDays: 7, Status: 'Enabled' }),
        expect.objectContaining({
          NoncurrentVersionExpiration: { NoncurrentDays: 30 },
          AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 },
        }),
      ]),
    );
  });

  it('bounds the growth of quarantine/ and state/: claims after 2 days, old state versions after 1', () => {
    const rules = (
      resourcesOf(s.template, 'AWS::S3::Bucket')[bucketId]!.Properties.LifecycleConfiguration as {
        Rules: Record<string, unknown>[];
      }
    ).Rules;
    const byId = Object.fromEntries(rules.map((r) => [r.Id, r]));
    expect(byId['expire-quarantine']).toEqual({
      Id: 'expire-quarantine',
      Prefix: 'quarantine/',
      ExpirationInDays: 90,
      Status: 'Enabled',
    });
    expect(byId['expire-scheduled-starts']).toEqual({
      Id: 'expire-scheduled-starts',
      Prefix: STATE_KEYS.scheduledStart('incremental', 'x').split('incremental')[0],
      ExpirationInDays: 2,
      Status: 'Enabled',
    });
    expect(byId['expire-noncurrent-state']).toEqual({
      Id: 'expire-noncurrent-state',
      Prefix: 'state/',
      NoncurrentVersionExpiration: { NoncurrentDays: 1 },
      Status: 'Enabled',
    });
    // The earlier rules stay as they were.
    expect(Object.keys(byId)).toEqual(
      expect.arrayContaining(['archive-raw', 'expire-athena-results', 'expire-noncurrent-versions']),
    );
  });

  it('denies every request without TLS on both buckets', () => {
    const policies = resourcesOf(s.template, 'AWS::S3::BucketPolicy');
    expect(Object.keys(policies)).toHaveLength(2);
    for (const policy of Object.values(policies)) {
      expect(policy.Properties.PolicyDocument).toMatchObject({
        Statement: expect.arrayContaining([
          expect.objectContaining({
            Effect: 'Deny',
            Action: 's3:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        ]),
      });
    }
  });
});

describe('queues', () => {
  const queues = () => resourcesOf(s.template, 'AWS::SQS::Queue');

  it('has a plan and a report queue, each with its own DLQ and maxReceiveCount 5', () => {
    const withRedrive = Object.entries(queues()).filter(([, q]) => q.Properties.RedrivePolicy !== undefined);
    expect(withRedrive.map(([id]) => id).sort()).toEqual([
      expect.stringMatching(/^QueuesPlanQueue/),
      expect.stringMatching(/^QueuesReportQueue/),
    ]);
    const targets = withRedrive.map(([, q]) => {
      const redrive = q.Properties.RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number };
      expect(redrive.maxReceiveCount).toBe(5);
      return [...referencedIds(redrive.deadLetterTargetArn)][0];
    });
    expect(new Set(targets).size).toBe(2);
  });

  it('every queue is SQS-SSE encrypted and denies non-TLS access', () => {
    const ids = Object.keys(queues());
    // Plan and report queues, their DLQs, and the schedules' DLQ.
    expect(ids).toHaveLength(5);
    for (const q of Object.values(queues())) expect(q.Properties.SqsManagedSseEnabled).toBe(true);
    const guarded = new Set<string>();
    for (const p of Object.values(resourcesOf(s.template, 'AWS::SQS::QueuePolicy'))) {
      expect(p.Properties.PolicyDocument).toMatchObject({
        Statement: expect.arrayContaining([
          expect.objectContaining({
            Effect: 'Deny',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        ]),
      });
      for (const id of referencedIds(p.Properties.Queues)) guarded.add(id);
    }
    expect([...guarded].sort()).toEqual([...ids].sort());
  });

  it('invariant: every queue has a DLQ or is one', () => {
    const all = queues();
    const dlqs = new Set<string>();
    for (const q of Object.values(all)) {
      const redrive = q.Properties.RedrivePolicy as { deadLetterTargetArn: unknown } | undefined;
      if (redrive) for (const id of referencedIds(redrive.deadLetterTargetArn)) dlqs.add(id);
    }
    // The schedules' dead letters: Scheduler puts there what it could not deliver.
    for (const schedule of Object.values(resourcesOf(s.template, 'AWS::Scheduler::Schedule'))) {
      const target = schedule.Properties.Target as { DeadLetterConfig?: { Arn: unknown } };
      for (const id of referencedIds(target.DeadLetterConfig?.Arn)) dlqs.add(id);
    }
    for (const [id, q] of Object.entries(all)) {
      expect(q.Properties.RedrivePolicy !== undefined || dlqs.has(id), `${id} has no DLQ and is none`).toBe(
        true,
      );
      expect(dlqs.has(id) && q.Properties.RedrivePolicy !== undefined, `${id} is a DLQ with a DLQ`).toBe(
        false,
      );
    }
    // No function consumes a dead-letter queue: they are for people.
    for (const m of Object.values(resourcesOf(s.template, 'AWS::Lambda::EventSourceMapping'))) {
      for (const id of referencedIds(m.Properties.EventSourceArn)) expect(dlqs.has(id)).toBe(false);
    }
  });

  it('invariant: visibility timeout >= 6 x the consumer timeout, for every queue/consumer pair', () => {
    const mappings = Object.values(resourcesOf(s.template, 'AWS::Lambda::EventSourceMapping'));
    expect(mappings).toHaveLength(2);
    for (const m of mappings) {
      const queue = queues()[[...referencedIds(m.Properties.EventSourceArn)][0]!]!;
      const consumer = resourcesOf(s.template, 'AWS::Lambda::Function')[
        [...referencedIds(m.Properties.FunctionName)][0]!
      ]!;
      const visibility = queue.Properties.VisibilityTimeout as number;
      const timeout = consumer.Properties.Timeout as number;
      // Lambda's advice for SQS event sources; a literal on purpose, not the constant under test.
      expect(visibility).toBeGreaterThanOrEqual(6 * timeout);
    }
  });
});

describe('Glue catalog', () => {
  const tables = () => Object.values(resourcesOf(s.template, 'AWS::Glue::Table'));
  const input = (name: string) =>
    tables().find((t) => (t.Properties.TableInput as { Name: string }).Name === name)!.Properties
      .TableInput as Record<string, unknown> & {
      StorageDescriptor: Record<string, unknown> & { Columns: { Name: string; Type: string }[] };
      Parameters: Record<string, unknown>;
    };

  it('has one database and one table per contract table plus raw reports, runs and the latest views', () => {
    s.template.resourceCountIs('AWS::Glue::Database', 1);
    s.template.hasResourceProperties('AWS::Glue::Database', {
      DatabaseInput: { Name: 'campaign_report_exporter' },
    });
    const names = tables().map((t) => (t.Properties.TableInput as { Name: string }).Name);
    expect(names.sort()).toEqual(
      [...Object.keys(TABLES), RAW_REPORTS_TABLE, RUNS_TABLE, ...LATEST_VIEWS.map((v) => v.name)].sort(),
    );
  });

  it('Glue columns and types equal the table definitions, in order', () => {
    for (const def of Object.values(TABLES)) {
      expect(
        input(def.name).StorageDescriptor.Columns.map((c) => [c.Name, c.Type]),
        def.name,
      ).toEqual(def.columns.map((c) => [c.name, c.type]));
    }
  });

  it('keeps every column comment within Glue’s 255 characters', () => {
    for (const t of tables()) {
      const columns = (t.Properties.TableInput as { StorageDescriptor: { Columns: { Comment?: string }[] } })
        .StorageDescriptor.Columns;
      for (const c of columns) expect((c.Comment ?? '').length).toBeLessThanOrEqual(255);
    }
  });

  it('reads Parquet and projects dt partitions from the key layout (no crawler)', () => {
    s.template.resourceCountIs('AWS::Glue::Crawler', 0);
    for (const def of Object.values(TABLES)) {
      const t = input(def.name);
      expect(t.PartitionKeys).toEqual([expect.objectContaining({ Name: 'dt', Type: 'string' })]);
      expect(t.StorageDescriptor).toMatchObject({
        Location: bucketUrl(tablePrefix(def.name)),
        InputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat',
        SerdeInfo: { SerializationLibrary: 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe' },
      });
      expect(t.Parameters).toEqual(projectedTableParameters(bucketId, tablePrefix(def.name), 'parquet'));
    }
  });

  it('reads the raw report JSON Lines with the OpenX SerDe, data as JSON text', () => {
    const t = input(RAW_REPORTS_TABLE);
    expect(t.StorageDescriptor.Columns.map((c) => [c.Name, c.Type])).toEqual([
      ['run_id', 'string'],
      ['fetched_at', 'string'],
      ['campaign_id', 'bigint'],
      ['job_id', 'bigint'],
      ['data', 'string'],
    ]);
    expect(t.StorageDescriptor).toMatchObject({
      Location: bucketUrl(rawPrefix('reports')),
      InputFormat: 'org.apache.hadoop.mapred.TextInputFormat',
      SerdeInfo: { SerializationLibrary: 'org.openx.data.jsonserde.JsonSerDe' },
    });
    expect(t.Parameters).toMatchObject({
      classification: 'json',
      compressionType: 'gzip',
      'projection.dt.type': 'date',
      'storage.location.template': bucketUrl(partitionTemplate(rawPrefix('reports'))),
    });
  });
});

describe('Athena', () => {
  it('has an engine v3 workgroup with enforced, encrypted results in the bucket and a scan limit', () => {
    s.template.hasResourceProperties('AWS::Athena::WorkGroup', {
      WorkGroupConfiguration: {
        EngineVersion: { SelectedEngineVersion: ATHENA_ENGINE_VERSION },
        EnforceWorkGroupConfiguration: true,
        BytesScannedCutoffPerQuery: 10_240 * 1024 * 1024,
        ResultConfiguration: {
          OutputLocation: bucketUrl('athena-results/'),
          EncryptionConfiguration: { EncryptionOption: 'SSE_S3' },
        },
      },
    });
  });

  it('registers every example query as a named query in that workgroup and database', () => {
    const wg = Object.keys(resourcesOf(s.template, 'AWS::Athena::WorkGroup'))[0]!;
    const named = Object.values(resourcesOf(s.template, 'AWS::Athena::NamedQuery'));
    expect(named.map((q) => q.Properties.Name).sort()).toEqual(QUERIES.map((q) => q.name).sort());
    for (const q of QUERIES) {
      s.template.hasResourceProperties('AWS::Athena::NamedQuery', {
        Name: q.name,
        QueryString: q.sql,
        Database: 'campaign_report_exporter',
        WorkGroup: { Ref: wg },
      });
    }
  });
});
