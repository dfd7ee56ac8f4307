import type * as cw from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { type FunctionName, SERVICE_NAME } from './functions.js';
import { addAlarmTopic } from './monitoring/alarm-topic.js';
import { addAlarms } from './monitoring/alarms.js';
import { addDashboard } from './monitoring/dashboard.js';
import { exporterMetrics, throttleShare } from './monitoring/metrics.js';
import type { ExporterQueues } from './queues.js';

export interface ExporterMonitoringProps {
  /** The four functions (`ExporterFunctions` fits): their errors, durations and concurrency. */
  readonly functions: { readonly byName: Readonly<Record<FunctionName, lambda.IFunction>> };
  readonly queues: ExporterQueues;
  /** The dead-letter queues of the EventBridge Scheduler schedules: one alarm each. */
  readonly scheduleDeadLetterQueues?: readonly sqs.IQueue[] | undefined;
  /** Powertools' service name of the deployment: the `service` dimension of its metrics. */
  readonly serviceName?: string | undefined;
  readonly alarmEmail?: string | undefined;
  /** Alarm when throttled / all API requests exceeds this share (0..1). */
  readonly throttleShareThreshold: number;
  /** Alarm when no run succeeded or ended partial within this many hours. */
  readonly missedRunAlarmHours: number;
}

/** The alarm topic (encrypted, TLS only, optional e-mail), the alarms and a dashboard. */
export class ExporterMonitoring extends Construct {
  readonly topic: sns.Topic;
  readonly alarms: cw.Alarm[];
  readonly dashboard: cw.Dashboard;

  constructor(scope: Construct, id: string, props: ExporterMonitoringProps) {
    super(scope, id);
    const serviceName = props.serviceName ?? SERVICE_NAME;
    const scheduleDeadLetterQueues = props.scheduleDeadLetterQueues ?? [];
    const metric = exporterMetrics(serviceName);
    const share = throttleShare(metric);

    // The parts add their resources to this construct, not to children of their own, so that
    // every logical id stays what it was before the split (a new topic would drop subscriptions).
    this.topic = addAlarmTopic(this, { serviceName, alarmEmail: props.alarmEmail });
    this.alarms = addAlarms(this, {
      functions: props.functions,
      queues: props.queues,
      scheduleDeadLetterQueues,
      topic: this.topic,
      metric,
      throttleShare: share,
      throttleShareThreshold: props.throttleShareThreshold,
      missedRunAlarmHours: props.missedRunAlarmHours,
    });
    this.dashboard = addDashboard(this, {
      serviceName,
      functions: props.functions,
      queues: [...props.queues.all, ...scheduleDeadLetterQueues],
      metric,
      throttleShare: share,
      alarms: this.alarms,
    });
  }
}
