/**
 * How the exporter runs and is watched (cdk.json's context, bundling skipped): schedules,
 * alarms, the dashboard, egress and outputs.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FUNCTION_NAMES, SERVICE_NAME } from '../../infra/constructs/functions.js';
import { scheduledStartInput } from '../../shared/aws/payloads.js';
import { METRIC, METRICS_NAMESPACE } from '../../shared/metrics.js';
import {
  type FunctionIds,
  functionIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

let s: Synthesized;
let fnIds: FunctionIds;

beforeAll(() => {
  s = synthExporter({});
  fnIds = functionIds(s.template);
});

const fn = (name: (typeof FUNCTION_NAMES)[number]) =>
  resourcesOf(s.template, 'AWS::Lambda::Function')[fnIds[name]]!;

afterAll(removeSynthOutputs);

describe('schedules', () => {
  it('starts an incremental run on the configured cron and time zone', () => {
    s.template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'cron(0 2 * * ? *)',
      ScheduleExpressionTimezone: 'UTC',
      FlexibleTimeWindow: { Mode: 'OFF' },
      Target: {
        Arn: { 'Fn::GetAtt': [fnIds['start-run'], 'Arn'] },
        Input: JSON.stringify(scheduledStartInput('incremental')),
      },
    });
  });

  it('polls finish-run every 5 minutes and has no full refresh unless configured', () => {
    s.template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(5 minutes)',
      Target: { Arn: { 'Fn::GetAtt': [fnIds['finish-run'], 'Arn'] } },
    });
    expect(Object.keys(resourcesOf(s.template, 'AWS::Scheduler::Schedule'))).toHaveLength(2);
  });
});

describe('monitoring', () => {
  const alarms = () => Object.values(resourcesOf(s.template, 'AWS::CloudWatch::Alarm'));
  const topicId = () => Object.keys(resourcesOf(s.template, 'AWS::SNS::Topic'))[0]!;
  const exporterMetric = (name: string) => ({
    Namespace: METRICS_NAMESPACE,
    MetricName: name,
    Dimensions: [{ Name: 'service', Value: SERVICE_NAME }],
  });

  it('has an encrypted, TLS-only alarm topic without a subscription unless configured', () => {
    s.template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
    s.template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    s.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          // The topic's own policy replaces SNS's default one: CloudWatch needs this Allow.
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 'cloudwatch.amazonaws.com' },
            Action: 'sns:Publish',
            Condition: Match.objectLike({ StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } }),
          }),
        ]),
      },
    });
    s.template.resourceCountIs('AWS::SNS::Subscription', 0);
  });

  it('every alarm notifies the topic', () => {
    // Two work DLQs, the schedules' DLQ, four functions' errors, six on the exporter's metrics.
    expect(alarms().length).toBe(13);
    for (const a of alarms()) expect(a.Properties.AlarmActions).toEqual([{ Ref: topicId() }]);
  });

  it('alarms on a visible message in each DLQ', () => {
    const dlqIds = Object.keys(resourcesOf(s.template, 'AWS::SQS::Queue')).filter((id) =>
      /Dlq|DeadLetters/.test(id),
    );
    expect(dlqIds).toHaveLength(3);
    for (const dlq of dlqIds) {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [dlq, 'QueueName'] } }],
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 0,
      });
    }
  });

  it("alarms on each function's errors", () => {
    for (const name of FUNCTION_NAMES) {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: fnIds[name] } }],
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
      });
    }
  });

  it('alarms on auth failures, failed runs and unfinished runs (>= 1)', () => {
    for (const name of [METRIC.authFailures, METRIC.runsFailed, METRIC.runsUnfinished]) {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        ...exporterMetric(name),
        Statistic: 'Sum',
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
        TreatMissingData: 'notBreaching',
      });
    }
  });

  it('alarms on schema drift no earlier run had (>= 1 new path), saying the API changed, where the values are and what to do', () => {
    const alarm = s.template.findResources('AWS::CloudWatch::Alarm', {
      Properties: {
        ...exporterMetric(METRIC.schemaDriftNewPaths),
        Statistic: 'Sum',
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
        TreatMissingData: 'notBreaching',
      },
    });
    const descriptions = Object.values(alarm).map((a) => String(a.Properties.AlarmDescription));
    expect(descriptions).toHaveLength(1);
    expect(descriptions[0]).toMatch(/Integration API changed/);
    expect(descriptions[0]).toMatch(/no earlier run saw/);
    expect(descriptions[0]).toMatch(/_rescued/);
    expect(descriptions[0]).toMatch(/schema_drift/);
    expect(descriptions[0]).toMatch(/upgrade the exporter/);
    expect(descriptions[0]).toMatch(/schemaContract freeze/);
  });

  it("alarms when finish-run's hours since a finished run reach 26, and when its heartbeat stops", () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      ...exporterMetric(METRIC.hoursSinceFinishedRun),
      Statistic: 'Maximum',
      Period: 3600,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 26,
      EvaluationPeriods: 1,
      // A fresh deploy has no data: INSUFFICIENT_DATA, not ALARM; a stopped heartbeat notifies.
      TreatMissingData: 'missing',
      InsufficientDataActions: [{ Ref: topicId() }],
    });
  });

  it('alarms on a 429 share above the threshold (throttled / requests)', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0.05,
      Metrics: Match.arrayWith([
        Match.objectLike({ Expression: 'FILL(throttled, 0) / requests' }),
        Match.objectLike({
          Id: 'throttled',
          MetricStat: Match.objectLike({ Metric: exporterMetric(METRIC.apiThrottled) }),
        }),
        Match.objectLike({
          Id: 'requests',
          MetricStat: Match.objectLike({ Metric: exporterMetric(METRIC.apiRequests) }),
        }),
      ]),
    });
  });

  it('has a dashboard', () => {
    s.template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });
});

describe('egress and outputs', () => {
  it('has no VPC or NAT unless a fixed egress IP is asked for', () => {
    s.template.resourceCountIs('AWS::EC2::VPC', 0);
    s.template.resourceCountIs('AWS::EC2::NatGateway', 0);
    for (const name of FUNCTION_NAMES) expect(fn(name).Properties.VpcConfig).toBeUndefined();
  });

  it('outputs the bucket, data location, secret, database, workgroup and start-run function', () => {
    const outputs = s.template.toJSON().Outputs as Record<string, unknown>;
    for (const key of [
      'DataBucketName',
      'DataLocation',
      'ApiKeySecretId',
      'GlueDatabaseName',
      'AthenaWorkGroupName',
      'StartRunFunctionName',
    ]) {
      expect(outputs).toHaveProperty(key);
    }
  });
});
