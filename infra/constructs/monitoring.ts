import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { METRIC, METRICS_NAMESPACE, type MetricName } from '../../shared/metrics.js';
import { type ExporterFunctions, FUNCTION_NAMES, FUNCTION_SETTINGS, SERVICE_NAME } from './functions.js';
import type { ExporterQueues } from './queues.js';

/** Period of the alarms that react to single events (a dead letter, an error, a failed run). */
const EVENT_PERIOD = Duration.minutes(5);
/**
 * finish-run puts ApiRequests and ApiRequestsThrottled once per finished run, so one datapoint
 * is one run's 429 share; the limiter keeps it near 1%, so one high run is worth a look.
 */
const THROTTLE_PERIODS = 1;

export interface ExporterMonitoringProps {
  readonly functions: ExporterFunctions;
  readonly queues: ExporterQueues;
  readonly alarmEmail?: string | undefined;
  /** Alarm when throttled / all API requests exceeds this share (0..1). */
  readonly throttleShareThreshold: number;
  /** Alarm when no run succeeded or ended partial within this many hours. */
  readonly missedRunAlarmHours: number;
}

/** The alarm topic (encrypted, TLS only, optional e-mail), the alarms and a dashboard. */
export class ExporterMonitoring extends Construct {
  readonly topic: sns.Topic;
  readonly alarms: cw.Alarm[] = [];
  readonly dashboard: cw.Dashboard;

  constructor(scope: Construct, id: string, props: ExporterMonitoringProps) {
    super(scope, id);
    const { functions, queues } = props;

    // CloudWatch can publish to an encrypted topic only with a customer managed key it may use.
    const key = new kms.Key(this, 'TopicKey', {
      description: 'Encrypts the campaign-report-exporter alarm topic',
      enableKeyRotation: true,
      // It protects alarm notifications in transit only: nothing stays encrypted under it.
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
      }),
    );
    this.topic = new sns.Topic(this, 'AlarmTopic', {
      displayName: 'campaign-report-exporter alarms',
      masterKey: key,
      enforceSSL: true,
    });
    if (props.alarmEmail !== undefined) {
      this.topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
    }
    const action = new cwActions.SnsAction(this.topic);
    const add = (alarm: cw.Alarm): cw.Alarm => {
      alarm.addAlarmAction(action);
      this.alarms.push(alarm);
      return alarm;
    };
    const metric = (name: MetricName, period: Duration = EVENT_PERIOD): cw.Metric =>
      new cw.Metric({
        namespace: METRICS_NAMESPACE,
        metricName: name,
        // Powertools Metrics adds the service dimension to every metric it puts.
        dimensionsMap: { service: SERVICE_NAME },
        statistic: cw.Stats.SUM,
        period,
      });
    const atLeastOne = (id: string, m: cw.IMetric, description: string): cw.Alarm =>
      add(
        new cw.Alarm(this, id, {
          alarmDescription: description,
          metric: m,
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        }),
      );

    for (const [label, work] of [
      ['Plan', queues.plan],
      ['Report', queues.report],
    ] as const) {
      add(
        new cw.Alarm(this, `${label}DlqNotEmpty`, {
          alarmDescription: `Messages in the ${label.toLowerCase()} dead-letter queue: inspect them, fix the cause, redrive them to the source queue.`,
          metric: work.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
            period: EVENT_PERIOD,
            statistic: cw.Stats.MAXIMUM,
          }),
          threshold: 0,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        }),
      );
    }
    for (const name of FUNCTION_NAMES) {
      atLeastOne(
        `${FUNCTION_SETTINGS[name].id}Errors`,
        functions.byName[name].metricErrors({ period: EVENT_PERIOD, statistic: cw.Stats.SUM }),
        `${name} failed (an invocation error, not a partial batch failure): read its log group.`,
      );
    }
    atLeastOne(
      'AuthFailures',
      metric(METRIC.authFailures),
      'The API answered 401/403 to the key: put a valid key into the secret, or allow the egress IP for the key.',
    );
    atLeastOne(
      'RunsFailed',
      metric(METRIC.runsFailed),
      'An export run failed: read its manifest and start-run logs.',
    );
    atLeastOne(
      'RunsUnfinished',
      metric(METRIC.runsUnfinished),
      'An export run did not finish within its deadline: look at the queues and the dead-letter queues.',
    );

    const hours = props.missedRunAlarmHours;
    add(
      new cw.Alarm(this, 'NoFinishedRun', {
        alarmDescription: `No export run succeeded or ended partial within ${hours} h: check the schedule, start-run and the other alarms.`,
        metric: new cw.MathExpression({
          expression: 'FILL(succeeded, 0) + FILL(partial, 0)',
          usingMetrics: {
            succeeded: metric(METRIC.runsSucceeded, Duration.hours(1)),
            partial: metric(METRIC.runsPartial, Duration.hours(1)),
          },
          period: Duration.hours(1),
          label: 'finished runs',
        }),
        threshold: 1,
        comparisonOperator: cw.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: hours,
        datapointsToAlarm: hours,
        // No data at all means no run finished: that is the condition, not an unknown.
        treatMissingData: cw.TreatMissingData.BREACHING,
      }),
    );
    const throttleShare = new cw.MathExpression({
      expression: 'FILL(throttled, 0) / requests',
      usingMetrics: { throttled: metric(METRIC.apiThrottled), requests: metric(METRIC.apiRequests) },
      period: EVENT_PERIOD,
      label: '429 share',
    });
    add(
      new cw.Alarm(this, 'HighThrottleShare', {
        alarmDescription: `More than ${props.throttleShareThreshold * 100}% of API requests got 429 in a run: lower reportMaxConcurrency or rateCeiling.`,
        metric: throttleShare,
        threshold: props.throttleShareThreshold,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: THROTTLE_PERIODS,
        datapointsToAlarm: THROTTLE_PERIODS,
        treatMissingData: cw.TreatMissingData.NOT_BREACHING,
      }),
    );

    this.dashboard = new cw.Dashboard(this, 'Dashboard', {
      defaultInterval: Duration.days(7),
    });
    const fnList = FUNCTION_NAMES.map((n) => functions.byName[n]);
    this.dashboard.addWidgets(
      new cw.TextWidget({
        markdown: '# campaign-report-exporter\nRuns, reports, API load, queues and functions.',
        width: 24,
        height: 2,
      }),
      new cw.GraphWidget({
        title: 'Runs',
        left: [
          metric(METRIC.runsSucceeded, Duration.hours(1)),
          metric(METRIC.runsPartial, Duration.hours(1)),
          metric(METRIC.runsFailed, Duration.hours(1)),
          metric(METRIC.runsUnfinished, Duration.hours(1)),
        ],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Reports',
        left: [
          metric(METRIC.reportsExported, Duration.hours(1)),
          metric(METRIC.reportsUnchanged, Duration.hours(1)),
          metric(METRIC.reportsNotReady, Duration.hours(1)),
          metric(METRIC.reportsNotFound, Duration.hours(1)),
          metric(METRIC.reportsInvalid, Duration.hours(1)),
          metric(METRIC.reportsFailed, Duration.hours(1)),
        ],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'API requests',
        left: [metric(METRIC.apiRequests), metric(METRIC.apiThrottled), metric(METRIC.apiRetried)],
        right: [throttleShare],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Queues (visible messages)',
        left: queues.all.map((q) =>
          q.metricApproximateNumberOfMessagesVisible({ period: EVENT_PERIOD, statistic: cw.Stats.MAXIMUM }),
        ),
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Function errors',
        left: fnList.map((f) => f.metricErrors({ period: EVENT_PERIOD, statistic: cw.Stats.SUM })),
        width: 8,
      }),
      new cw.GraphWidget({
        title: 'Function duration (p95)',
        left: fnList.map((f) => f.metricDuration({ period: EVENT_PERIOD, statistic: cw.Stats.p(95) })),
        width: 8,
      }),
      new cw.GraphWidget({
        title: 'Concurrent executions',
        left: fnList.map((f) => f.metric('ConcurrentExecutions', { statistic: cw.Stats.MAXIMUM })),
        width: 8,
      }),
      new cw.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24 }),
    );
    new CfnOutput(this, 'AlarmTopicArn', {
      description: 'SNS topic of the alarms (subscribe more endpoints here)',
      value: this.topic.topicArn,
    }).overrideLogicalId('AlarmTopicArn'); // A plain name: the README points people to it.
  }
}
