/**
 * The stack under non-default configuration (bundling skipped: the code is checked in
 * stack.test.ts): fixed egress IP, imported secrets, e-mail, full refresh, prefix, tuning.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InfraConfigError } from '../../infra/config.js';
import { API_FUNCTIONS, FUNCTION_NAMES, FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import { scheduledStartInput } from '../../shared/aws/payloads.js';
import { TABLES } from '../../shared/export/tables.js';
import { LATEST_VIEWS } from '../../shared/export/views.js';
import { Deployment } from '../helpers/iam/deployment.js';
import type { TemplateJson } from '../helpers/iam/intrinsics.js';
import { evaluate } from '../helpers/iam/policy.js';
import {
  actionsOf,
  allowStatements,
  logicalIdOf,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

const FULL = {
  apiBaseUrl: 'https://api.acme.test/',
  fixedEgressIp: 'true',
  alarmEmail: 'ops@acme.test',
  fullRefreshCron: '0 3 ? * SUN *',
  scheduleCron: 'cron(30 4 * * ? *)',
  scheduleTimeZone: 'Europe/Berlin',
  existingSecretName: 'acme/integration-api-key',
  dataPrefix: 'exports/acme',
  reportBatchSize: '5',
  reportMaxConcurrency: '4',
  planMaxConcurrency: '3',
  unitSize: '20',
  reportConcurrency: '4',
  rateCeiling: '10',
  secretCacheTtlSeconds: '60',
  // The most the 512 MB API functions allow: four times the body fits.
  maxBodyMiB: '128',
  runDeadlineMinutes: '120',
  rawRetentionDays: '30',
  rawTransitionDays: '10',
  athenaResultsRetentionDays: '3',
  quarantineRetentionDays: '30',
  logRetentionDays: '14',
  logLevel: 'debug',
  bytesScannedCutoffMb: '100',
  maxReceiveCount: '3',
  projectionStartDate: '2024-06-01',
  databaseName: 'acme_reports',
  throttleShareThreshold: '0.35',
  missedRunAlarmHours: '50',
};

afterAll(removeSynthOutputs);

describe('everything configured', () => {
  let s: Synthesized;
  let fnIds: Record<(typeof FUNCTION_NAMES)[number], string>;
  beforeAll(() => {
    s = synthExporter(FULL);
    fnIds = Object.fromEntries(
      FUNCTION_NAMES.map((n) => [
        n,
        logicalIdOf(s.template, 'AWS::Lambda::Function', `Functions${FUNCTION_SETTINGS[n].id}`),
      ]),
    ) as typeof fnIds;
  });
  const fn = (n: (typeof FUNCTION_NAMES)[number]) =>
    resourcesOf(s.template, 'AWS::Lambda::Function')[fnIds[n]]!;
  const env = (n: (typeof FUNCTION_NAMES)[number]) =>
    (fn(n).Properties.Environment as { Variables: Record<string, unknown> }).Variables;

  it('egress: one VPC, one public and one private subnet, one NAT gateway on a stack-owned Elastic IP', () => {
    s.template.resourceCountIs('AWS::EC2::VPC', 1);
    s.template.resourceCountIs('AWS::EC2::Subnet', 2);
    s.template.resourceCountIs('AWS::EC2::NatGateway', 1);
    s.template.resourceCountIs('AWS::EC2::EIP', 1);
    const eip = Object.keys(resourcesOf(s.template, 'AWS::EC2::EIP'))[0]!;
    s.template.hasResourceProperties('AWS::EC2::NatGateway', {
      AllocationId: { 'Fn::GetAtt': [eip, 'AllocationId'] },
    });
    s.template.hasResourceProperties('AWS::EC2::Subnet', { MapPublicIpOnLaunch: true });
    s.template.hasResourceProperties('AWS::EC2::Subnet', { MapPublicIpOnLaunch: false });
    s.template.hasOutput('EgressIpAddress', { Value: { 'Fn::GetAtt': [eip, 'PublicIp'] } });
    s.template.hasResourceProperties('AWS::EC2::FlowLog', { TrafficType: 'ALL' });
  });

  it('egress: the API functions run in the private subnet, finish-run outside the VPC', () => {
    const privateSubnet = Object.entries(resourcesOf(s.template, 'AWS::EC2::Subnet')).find(
      ([, sub]) => sub.Properties.MapPublicIpOnLaunch === false,
    )![0];
    for (const name of API_FUNCTIONS) {
      expect(fn(name).Properties.VpcConfig).toMatchObject({ SubnetIds: [{ Ref: privateSubnet }] });
    }
    expect(fn('finish-run').Properties.VpcConfig).toBeUndefined();
  });

  it('imports the secret by name: readers get that secret only, handlers get its name', () => {
    s.template.resourceCountIs('AWS::SecretsManager::Secret', 0);
    for (const name of API_FUNCTIONS) expect(env(name).API_KEY_SECRET_ID).toBe('acme/integration-api-key');
    const readers = allowStatements(s.template).filter(({ statement }) =>
      actionsOf(statement).includes('secretsmanager:GetSecretValue'),
    );
    for (const { statement } of readers) {
      expect(JSON.stringify(statement.Resource)).toContain(':secret:acme/integration-api-key-??????');
    }
    const readerRoles = new Set(readers.flatMap(({ roles }) => [...roles]));
    const roleOf = (n: (typeof FUNCTION_NAMES)[number]) => [...referencedIds(fn(n).Properties.Role)][0]!;
    expect([...readerRoles].sort()).toEqual(API_FUNCTIONS.map(roleOf).sort());
  });

  it('subscribes the alarm e-mail', () => {
    s.template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@acme.test',
    });
  });

  it('schedules the incremental run and a weekly full refresh in the configured time zone', () => {
    s.template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'cron(30 4 * * ? *)',
      ScheduleExpressionTimezone: 'Europe/Berlin',
      Target: { Input: JSON.stringify(scheduledStartInput('incremental')) },
    });
    s.template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'cron(0 3 ? * SUN *)',
      ScheduleExpressionTimezone: 'Europe/Berlin',
      Target: {
        Arn: { 'Fn::GetAtt': [fnIds['start-run'], 'Arn'] },
        Input: JSON.stringify(scheduledStartInput('full')),
      },
    });
    s.template.resourceCountIs('AWS::Scheduler::Schedule', 3);
  });

  it('passes the tuning to the handlers and the event sources', () => {
    expect(env('start-run')).toMatchObject({
      API_BASE_URL: 'https://api.acme.test',
      DATA_PREFIX: 'exports/acme/',
      POWERTOOLS_LOG_LEVEL: 'DEBUG',
      SECRET_CACHE_TTL_SECONDS: '60',
    });
    expect(env('plan-campaign')).toMatchObject({ UNIT_SIZE: '20' });
    expect(env('export-reports')).toMatchObject({ REPORT_CONCURRENCY: '4', RATE_CEILING: '10' });
    // start-run's lock lasts the deadline (and its estimate names it), not the default 6 h.
    for (const name of ['start-run', 'finish-run'] as const)
      expect(env(name)).toMatchObject({ RUN_DEADLINE_MINUTES: '120' });
    for (const name of API_FUNCTIONS) expect(env(name)).toMatchObject({ MAX_BODY_MIB: '128' });
    expect(env('finish-run')).not.toHaveProperty('MAX_BODY_MIB');
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fnIds['export-reports'] },
      BatchSize: 5,
      ScalingConfig: { MaximumConcurrency: 4 },
    });
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fnIds['plan-campaign'] },
      ScalingConfig: { MaximumConcurrency: 3 },
    });
    for (const name of FUNCTION_NAMES) {
      expect(fn(name).Properties.LoggingConfig).toMatchObject({ ApplicationLogLevel: 'DEBUG' });
    }
    s.template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 14 });
  });

  it('applies retention days, maxReceiveCount and the scan limit', () => {
    const bucketId = logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket');
    const bucket = resourcesOf(s.template, 'AWS::S3::Bucket')[bucketId]!;
    expect(bucket.Properties.LifecycleConfiguration).toMatchObject({
      Rules: expect.arrayContaining([
        expect.objectContaining({
          Prefix: 'exports/acme/raw/',
          Transitions: [{ StorageClass: 'GLACIER_IR', TransitionInDays: 10 }],
          ExpirationInDays: 30,
        }),
        expect.objectContaining({ Prefix: 'athena-results/', ExpirationInDays: 3 }),
        expect.objectContaining({
          Id: 'expire-quarantine',
          Prefix: 'exports/acme/quarantine/',
          ExpirationInDays: 30,
        }),
        expect.objectContaining({
          Id: 'expire-scheduled-starts',
          Prefix: 'exports/acme/state/scheduled-starts/',
        }),
        expect.objectContaining({ Id: 'expire-noncurrent-state', Prefix: 'exports/acme/state/' }),
      ]),
    });
    for (const q of Object.values(resourcesOf(s.template, 'AWS::SQS::Queue'))) {
      const redrive = q.Properties.RedrivePolicy as { maxReceiveCount: number } | undefined;
      if (redrive) expect(redrive.maxReceiveCount).toBe(3);
    }
    s.template.hasResourceProperties('AWS::Athena::WorkGroup', {
      WorkGroupConfiguration: { BytesScannedCutoffPerQuery: 100 * 1024 * 1024 },
    });
  });

  it('puts every table, projection and grant under the data prefix', () => {
    s.template.hasResourceProperties('AWS::Glue::Database', { DatabaseInput: { Name: 'acme_reports' } });
    for (const t of Object.values(resourcesOf(s.template, 'AWS::Glue::Table'))) {
      const input = t.Properties.TableInput as { TableType: string; Parameters: Record<string, unknown> };
      expect(t.Properties.DatabaseName).toBe('acme_reports');
      if (input.TableType === 'VIRTUAL_VIEW') continue; // a view has no files of its own
      expect(JSON.stringify(input.Parameters['storage.location.template'])).toContain('/exports/acme/');
      expect(input.Parameters['projection.dt.range']).toBe('2024-06-01,NOW');
    }
    // The contract tables, raw_reports and runs, and the latest views.
    s.template.resourceCountIs('AWS::Glue::Table', Object.keys(TABLES).length + 2 + LATEST_VIEWS.length);
    s.template.allResourcesProperties('AWS::Athena::NamedQuery', { Database: 'acme_reports' });
    const objectGrants = allowStatements(s.template).filter(({ statement }) =>
      actionsOf(statement).includes('s3:PutObject'),
    );
    for (const { statement } of objectGrants) {
      for (const r of statement.Resource as unknown[])
        expect(JSON.stringify(r)).toMatch(/"\/exports\/acme\/[a-z]+\/[^"]*"/);
    }
  });

  it('alarms with the configured throttle share and missed-run window', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Threshold: 0.35,
      Metrics: Match.arrayWith([Match.objectLike({ Expression: 'FILL(throttled, 0) / requests' })]),
    });
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Threshold: 50,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
  });
});

describe('imported secret by ARN', () => {
  const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key-AbCdEf';

  /** Whether each API function's role may read the secret whose real ARN is `real`. */
  const mayRead = (s: Synthesized, real: string) => {
    const deployment = new Deployment(s.template.toJSON() as TemplateJson);
    return API_FUNCTIONS.map(
      (name) =>
        evaluate(
          {
            principal: deployment.functions[name].roleArn,
            action: 'secretsmanager:GetSecretValue',
            resource: real,
          },
          { identity: deployment.functions[name].policies },
        ).decision,
    );
  };
  const allowed = API_FUNCTIONS.map(() => 'allow');

  it('reads an ARN that may be complete as is, and as a partial ARN whose name ends in -AbCdEf', () => {
    const s = synthExporter({ existingSecretArn: arn });
    s.template.resourceCountIs('AWS::SecretsManager::Secret', 0);
    const readers = allowStatements(s.template).filter(({ statement }) =>
      actionsOf(statement).includes('secretsmanager:GetSecretValue'),
    );
    expect(readers.map(({ statement }) => statement.Resource).sort()).toEqual(
      API_FUNCTIONS.flatMap(() => [arn, `${arn}-??????`]).sort(),
    );
    // A secret named acme/key (this ARN complete), or named acme/key-AbCdEf (this ARN partial).
    expect(mayRead(s, arn)).toEqual(allowed);
    expect(mayRead(s, `${arn}-Q1w2E3`)).toEqual(allowed);
    expect(mayRead(s, arn.replace('AbCdEf', 'AbCdEg'))).not.toContain('allow');
    s.template.allResourcesProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ POWERTOOLS_SERVICE_NAME: 'campaign-report-exporter' }) },
    });
    const withSecret = Object.values(resourcesOf(s.template, 'AWS::Lambda::Function')).filter(
      (f) =>
        (f.Properties.Environment as { Variables: Record<string, unknown> }).Variables.API_KEY_SECRET_ID ===
        arn,
    );
    expect(withSecret).toHaveLength(API_FUNCTIONS.length);
  });

  it('matches any suffix for a partial ARN', () => {
    const s = synthExporter({
      existingSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key',
    });
    const readers = allowStatements(s.template).filter(({ statement }) =>
      actionsOf(statement).includes('secretsmanager:GetSecretValue'),
    );
    for (const { statement } of readers)
      expect(JSON.stringify(statement.Resource)).toContain('secret:acme/key-??????');
    expect(mayRead(s, 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key-Q1w2E3')).toEqual(
      allowed,
    );
    expect(mayRead(s, 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key2-Q1w2E3')).not.toContain(
      'allow',
    );
  });
});

describe('configuration errors at synth', () => {
  it('rejects a batch that cannot fit export-reports’ timeout, naming the keys', () => {
    expect(() => synthExporter({ reportBatchSize: 10, unitSize: 500 })).toThrow(InfraConfigError);
    expect(() => synthExporter({ reportBatchSize: 10, unitSize: 500 })).toThrow(
      /"reportBatchSize" x "unitSize"/,
    );
  });

  it('counts each fetcher at its share of the deployment-wide rateCeiling, not each invocation', () => {
    // 2 x 100 reports at 20 req/s shared by 25 fetchers: 250 s, past a third of 5 minutes.
    expect(() => synthExporter({ reportMaxConcurrency: 25, reportFetchers: 25 })).toThrow(
      /"rateCeiling" 20 req\/s shared by 25 fetchers \("reportFetchers"\)/,
    );
    expect(() =>
      synthExporter({ reportMaxConcurrency: 25, reportFetchers: 25, rateCeiling: 100 }),
    ).not.toThrow();
    // By default one fetcher per 50 req/s: 25 invocations at 20 req/s fetch one at a time (10 s a batch).
    expect(() => synthExporter({ reportMaxConcurrency: 25 })).not.toThrow();
  });

  it('gives export-reports one fetcher slot per 50 req/s of rateCeiling, and none when every invocation may fetch', () => {
    const fetchersAt = (context: Record<string, unknown>) => {
      const { template } = synthExporter(context);
      const fns = template.findResources('AWS::Lambda::Function', {
        Properties: { Description: Match.stringLikeRegexp('^Fetches a batch') },
      });
      const fn = Object.values(fns)[0] as {
        Properties: { Environment: { Variables: Record<string, unknown> } };
      };
      return fn.Properties.Environment.Variables.REPORT_FETCHERS;
    };
    expect(fetchersAt({})).toBe('1');
    expect(fetchersAt({ rateCeiling: 120, reportMaxConcurrency: 10 })).toBe('3');
    expect(fetchersAt({ reportFetchers: 2, reportMaxConcurrency: 4 })).toBe('2');
    // As many fetchers as invocations: no slot to take.
    expect(fetchersAt({ rateCeiling: 120 })).toBeUndefined();
    expect(() => synthExporter({ reportFetchers: 3 })).toThrow(/"reportFetchers".*at most 2/s);
  });

  it('rejects a body size limit an API function could not hold four times, naming the key and the most allowed', () => {
    expect(() => synthExporter({ maxBodyMiB: 129 })).toThrow(InfraConfigError);
    expect(() => synthExporter({ maxBodyMiB: '129' })).toThrow(
      'context "maxBodyMiB" 129: reading and parsing an answer that large takes about 4 times its size, more than the 512 MB of start-run ("startRunMemoryMb"): give at most 128, or more memory',
    );
  });

  it('rejects a missing base URL with the key name', () => {
    expect(() => synthExporter({ apiBaseUrl: '' })).toThrow(
      'no apiBaseUrl: put your Integration API {base_url} in deploy/prod.json (or cdk.json "context"), e.g. "apiBaseUrl": "https://api.acme.com"',
    );
  });
});
