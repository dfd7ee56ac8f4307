/**
 * The monitoring construct in a small test stack (the queues, four functions, schedule
 * dead-letter queues): who may publish to the alarm topic and use its key, NoFinishedRun's
 * heartbeat, an alarm per schedule dead-letter queue, and the service dimension of every metric.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FUNCTION_NAMES,
  FUNCTION_SETTINGS,
  type FunctionName,
  SERVICE_NAME,
} from '../../infra/constructs/functions.js';
import { ExporterMonitoring, type ExporterMonitoringProps } from '../../infra/constructs/monitoring.js';
import { ExporterQueues } from '../../infra/constructs/queues.js';
import { METRIC, METRICS_NAMESPACE } from '../../shared/metrics.js';
import { TargetResolver } from '../helpers/doc-checks.js';
import { logicalIdOf, type Resources, resourcesOf } from './helpers.js';

const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface TestStack {
  readonly template: Template;
  readonly topicId: string;
  /** Logical ids of the schedule dead-letter queues, in the order given. */
  readonly scheduleDlqIds: string[];
}

/** A stack with what the monitoring watches, and the monitoring as the exporter stack adds it. */
function synthMonitoring(
  options: Partial<Pick<ExporterMonitoringProps, 'serviceName' | 'missedRunAlarmHours'>> & {
    scheduleDlqs?: string[];
  } = {},
): TestStack {
  const outdir = mkdtempSync(join(tmpdir(), 'cre-monitoring-'));
  outdirs.push(outdir);
  const stack = new Stack(new App({ outdir }), 'MonitoringTest');
  const queues = new ExporterQueues(stack, 'Queues', {
    maxReceiveCount: 5,
    planConsumerTimeout: Duration.minutes(5),
    reportConsumerTimeout: Duration.minutes(5),
  });
  // The monitoring reads only the functions' own metrics: any Lambda function will do.
  const byName = Object.fromEntries(
    FUNCTION_NAMES.map((name) => [
      name,
      new lambda.Function(stack, FUNCTION_SETTINGS[name].id, {
        runtime: lambda.Runtime.NODEJS_24_X,
        handler: 'index.handler',
        code: lambda.Code.fromInline('exports.handler = async () => {};'),
      }),
    ]),
  ) as Record<FunctionName, lambda.Function>;
  const scheduleDlqs = (options.scheduleDlqs ?? []).map(
    (id) => new sqs.Queue(stack, id, { encryption: sqs.QueueEncryption.SQS_MANAGED, enforceSSL: true }),
  );
  new ExporterMonitoring(stack, 'Monitoring', {
    functions: { byName },
    queues,
    ...(scheduleDlqs.length > 0 ? { scheduleDeadLetterQueues: scheduleDlqs } : {}),
    ...(options.serviceName === undefined ? {} : { serviceName: options.serviceName }),
    throttleShareThreshold: 0.05,
    missedRunAlarmHours: options.missedRunAlarmHours ?? 26,
  });
  const template = Template.fromStack(stack);
  return {
    template,
    topicId: logicalIdOf(template, 'AWS::SNS::Topic', 'MonitoringAlarmTopic'),
    scheduleDlqIds: scheduleDlqs.map((q) => stack.getLogicalId(q.node.defaultChild as sqs.CfnQueue)),
  };
}

const alarmsOf = (t: Template): Resources[string][] =>
  Object.values(resourcesOf(t, 'AWS::CloudWatch::Alarm'));

/** The condition that confines CloudWatch to acting for alarms of the stack's account and region. */
const FOR_OWN_ALARMS = {
  StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
  ArnLike: {
    'aws:SourceArn': {
      'Fn::Join': [
        '',
        [
          'arn:',
          { Ref: 'AWS::Partition' },
          ':cloudwatch:',
          { Ref: 'AWS::Region' },
          ':',
          { Ref: 'AWS::AccountId' },
          ':alarm:*',
        ],
      ],
    },
  },
};

interface PolicyStatement {
  Sid?: string;
  Effect: string;
  Principal?: unknown;
  Action: string | string[];
  Resource?: unknown;
  Condition?: unknown;
}

describe('alarm topic', () => {
  let s: TestStack;
  beforeAll(() => {
    s = synthMonitoring();
  });

  it("lets CloudWatch publish to the topic for this account's alarms only, beside the TLS-only Deny", () => {
    const policies = Object.values(resourcesOf(s.template, 'AWS::SNS::TopicPolicy'));
    expect(policies).toHaveLength(1);
    expect(policies[0]!.Properties.Topics).toEqual([{ Ref: s.topicId }]);
    const statements = (policies[0]!.Properties.PolicyDocument as { Statement: PolicyStatement[] }).Statement;
    // The policy replaces SNS's default one: this Allow is the only way an alarm reaches the topic.
    expect(statements.filter((st) => st.Effect === 'Allow')).toEqual([
      {
        Sid: 'CloudWatchAlarmsPublish',
        Effect: 'Allow',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: 'sns:Publish',
        Resource: { Ref: s.topicId },
        Condition: FOR_OWN_ALARMS,
      },
    ]);
    expect(statements).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
  });

  it("lets CloudWatch use the topic's key for this account's alarms only", () => {
    const keyId = logicalIdOf(s.template, 'AWS::KMS::Key', 'MonitoringTopicKey');
    s.template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] } });
    const key = resourcesOf(s.template, 'AWS::KMS::Key')[keyId]!;
    const statements = (key.Properties.KeyPolicy as { Statement: PolicyStatement[] }).Statement;
    expect(statements.filter((st) => JSON.stringify(st.Principal).includes('cloudwatch'))).toEqual([
      {
        Sid: 'CloudWatchAlarmsPublish',
        Effect: 'Allow',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        Resource: '*',
        Condition: FOR_OWN_ALARMS,
      },
    ]);
  });

  it('keeps the logical ids the topic, its key, policy and alarms had before the split', () => {
    // A new logical id replaces the resource: a new topic loses its confirmed subscriptions.
    const ids = Object.keys(s.template.toJSON().Resources as object);
    expect(ids).toEqual(
      expect.arrayContaining([
        'MonitoringTopicKey423AF5B2',
        'MonitoringAlarmTopicAF62D4F1',
        'MonitoringAlarmTopicPolicyCB9CCFB0',
        'MonitoringNoFinishedRunF00F3C5E',
        'MonitoringPlanDlqNotEmpty234E7ED7',
        'MonitoringDashboard0C3675C6',
      ]),
    );
  });
});

describe('NoFinishedRun', () => {
  let s: TestStack;
  beforeAll(() => {
    s = synthMonitoring({ missedRunAlarmHours: 48 });
  });

  it("alarms on finish-run's hourly maximum of hours since a finished run, at missedRunAlarmHours", () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: METRICS_NAMESPACE,
      MetricName: METRIC.hoursSinceFinishedRun,
      Dimensions: [{ Name: 'service', Value: SERVICE_NAME }],
      Statistic: 'Maximum',
      Period: 3600,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 48,
      EvaluationPeriods: 1,
      DatapointsToAlarm: 1,
    });
  });

  it('stays quiet without data and notifies when the heartbeat stops (INSUFFICIENT_DATA)', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: METRIC.hoursSinceFinishedRun,
      TreatMissingData: 'missing',
      AlarmActions: [{ Ref: s.topicId }],
      InsufficientDataActions: [{ Ref: s.topicId }],
      OKActions: Match.absent(),
      AlarmDescription: Match.stringLikeRegexp('INSUFFICIENT_DATA: finish-run stopped'),
    });
  });

  it('is the only alarm that notifies on INSUFFICIENT_DATA', () => {
    const withInsufficientData = alarmsOf(s.template).filter((a) => a.Properties.InsufficientDataActions);
    expect(withInsufficientData.map((a) => a.Properties.MetricName)).toEqual([METRIC.hoursSinceFinishedRun]);
  });
});

describe('schedule dead-letter queues', () => {
  let s: TestStack;
  beforeAll(() => {
    s = synthMonitoring({ scheduleDlqs: ['IncrementalRunDlq', 'FinishRunsDlq'] });
  });

  it('alarms on a visible message in each, telling how to start the run by hand', () => {
    expect(s.scheduleDlqIds).toHaveLength(2);
    for (const dlqId of s.scheduleDlqIds) {
      const matching = alarmsOf(s.template).filter(
        (a) =>
          JSON.stringify(a.Properties.Dimensions) ===
          JSON.stringify([{ Name: 'QueueName', Value: { 'Fn::GetAtt': [dlqId, 'QueueName'] } }]),
      );
      expect(matching, dlqId).toHaveLength(1);
      const alarm = matching[0]!.Properties;
      expect(alarm).toMatchObject({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Statistic: 'Maximum',
        Period: 300,
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 0,
        EvaluationPeriods: 1,
        TreatMissingData: 'notBreaching',
        AlarmActions: [{ Ref: s.topicId }],
      });
      const description = JSON.stringify(alarm.AlarmDescription);
      expect(description).toContain('could not be delivered');
      expect(description).toContain('ERROR_MESSAGE');
      expect(description).toContain('StartRunFunctionName');
      // The description names the queue the message is in.
      expect(description).toContain(JSON.stringify({ 'Fn::GetAtt': [dlqId, 'QueueName'] }));
    }
  });

  it('shows them on the dashboard: in the queue graph and the alarm widget', () => {
    const body = JSON.stringify(Object.values(resourcesOf(s.template, 'AWS::CloudWatch::Dashboard'))[0]);
    for (const dlqId of s.scheduleDlqIds)
      expect(body).toContain(JSON.stringify({ 'Fn::GetAtt': [dlqId, 'QueueName'] }));
    for (const alarmId of Object.keys(resourcesOf(s.template, 'AWS::CloudWatch::Alarm')).filter((id) =>
      id.startsWith('MonitoringSchedule'),
    ))
      expect(body).toContain(JSON.stringify({ 'Fn::GetAtt': [alarmId, 'Arn'] }));
  });

  it('adds no alarm without schedule dead-letter queues', () => {
    const withDlqs = alarmsOf(s.template).length;
    expect(alarmsOf(synthMonitoring().template).length).toBe(withDlqs - 2);
  });
});

describe('service dimension', () => {
  /** Every `service` value the alarms' and the dashboard's exporter metrics carry. */
  function serviceValues(t: Template): { alarms: string[]; dashboard: string[] } {
    const alarms: string[] = [];
    for (const a of alarmsOf(t)) {
      const p = a.Properties as {
        Namespace?: string;
        Dimensions?: { Name: string; Value: string }[];
        Metrics?: {
          MetricStat?: { Metric: { Namespace: string; Dimensions?: { Name: string; Value: string }[] } };
        }[];
      };
      const metrics = [
        { Namespace: p.Namespace, Dimensions: p.Dimensions },
        ...(p.Metrics ?? []).flatMap((m) => (m.MetricStat ? [m.MetricStat.Metric] : [])),
      ];
      for (const m of metrics.filter((x) => x.Namespace === METRICS_NAMESPACE)) {
        expect(m.Dimensions?.map((d) => d.Name)).toEqual(['service']);
        alarms.push(m.Dimensions![0]!.Value);
      }
    }
    const body = JSON.stringify(Object.values(resourcesOf(t, 'AWS::CloudWatch::Dashboard'))[0]);
    // Inside the serialized body: ["CampaignReportExporter","RunsSucceeded","service","<name>",…]
    const dashboard = [...body.matchAll(/\\"service\\",\\"([^\\]+)\\"/g)].map((m) => m[1]!);
    return { alarms, dashboard };
  }

  it('follows the serviceName prop in every alarm and graph', () => {
    const staging = 'campaign-report-exporter-staging';
    const { alarms, dashboard } = serviceValues(synthMonitoring({ serviceName: staging }).template);
    // AuthFailures, RunsFailed, RunsUnfinished, SchemaDrift, NoFinishedRun, and the 429 share's two metrics.
    expect(alarms).toHaveLength(7);
    expect(new Set(alarms)).toEqual(new Set([staging]));
    expect(dashboard.length).toBeGreaterThan(10);
    expect(new Set(dashboard)).toEqual(new Set([staging]));
  });

  it("defaults to functions.ts's SERVICE_NAME", () => {
    const { alarms, dashboard } = serviceValues(synthMonitoring().template);
    expect(new Set([...alarms, ...dashboard])).toEqual(new Set([SERVICE_NAME]));
  });
});

describe('runbooks', () => {
  const root = fileURLToPath(new URL('../../', import.meta.url));

  it('every alarm links its own section of docs/operate.md, and the section exists', () => {
    const alarms = alarmsOf(synthMonitoring({ scheduleDlqs: ['IncrementalRunDlq'] }).template);
    const resolver = new TargetResolver(root);
    const links = alarms.map((alarm) => {
      const description = JSON.stringify(alarm.Properties.AlarmDescription);
      const link = /Runbook: (docs\/operate\.md#[a-z0-9-]+)/.exec(description)?.[1];
      expect(link, description).toBeDefined();
      expect(resolver.problem(link!, root), link).toBeUndefined();
      return link;
    });
    // Each kind of alarm has its section: the function errors share one, the two work DLQs another.
    expect(new Set(links).size).toBe(9);
  });
});
