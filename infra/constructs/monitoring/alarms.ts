import { Duration } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { METRIC } from '../../../shared/metrics.js';
import { FUNCTION_NAMES, FUNCTION_SETTINGS, type FunctionName } from '../functions.js';
import type { ExporterQueues } from '../queues.js';
import { FINISH_RUN_RATE } from '../schedule.js';
import { EVENT_PERIOD, type ExporterMetric } from './metrics.js';

/**
 * finish-run puts ApiRequests and ApiRequestsThrottled once per finished run, so one datapoint
 * is one run's 429 share; the limiter keeps it near 1%, so one high run is worth a look.
 */
const THROTTLE_PERIODS = 1;
/** NoFinishedRun looks at the largest HoursSinceFinishedRun of each hour. */
const HEARTBEAT_PERIOD = Duration.hours(1);
/**
 * HoursSinceFinishedRun already counts the hours without a finished run, so one hourly maximum
 * at the threshold is the condition itself: more periods would only delay the alarm by hours.
 */
const NO_FINISHED_RUN_PERIODS = 1;

/** Where an alarm's runbook is: its section of docs/operate.md (the docs test resolves each link). */
const runbook = (section: string): string => ` Runbook: docs/operate.md#${section}`;

export interface ExporterAlarmsProps {
  readonly functions: { readonly byName: Readonly<Record<FunctionName, lambda.IFunction>> };
  readonly queues: ExporterQueues;
  /** The dead-letter queues of the EventBridge Scheduler schedules. */
  readonly scheduleDeadLetterQueues: readonly sqs.IQueue[];
  readonly topic: sns.ITopic;
  readonly metric: ExporterMetric;
  readonly throttleShare: cw.IMetric;
  /** Alarm when throttled / all API requests exceeds this share (0..1). */
  readonly throttleShareThreshold: number;
  /** Alarm when no run succeeded or ended partial within this many hours. */
  readonly missedRunAlarmHours: number;
}

/** Adds the alarms to `scope`, each notifying the topic when it goes to ALARM; returns them in order. */
export function addAlarms(scope: Construct, props: ExporterAlarmsProps): cw.Alarm[] {
  const { functions, queues, metric } = props;
  const action = new cwActions.SnsAction(props.topic);
  const alarms: cw.Alarm[] = [];
  const add = (id: string, alarmProps: cw.AlarmProps): cw.Alarm => {
    const alarm = new cw.Alarm(scope, id, alarmProps);
    alarm.addAlarmAction(action);
    alarms.push(alarm);
    return alarm;
  };
  const atLeastOne = (id: string, m: cw.IMetric, description: string): cw.Alarm =>
    add(id, {
      alarmDescription: description,
      metric: m,
      threshold: 1,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cw.TreatMissingData.NOT_BREACHING,
    });
  const notEmpty = (id: string, queue: sqs.IQueue, description: string): cw.Alarm =>
    add(id, {
      alarmDescription: description,
      metric: queue.metricApproximateNumberOfMessagesVisible({
        period: EVENT_PERIOD,
        statistic: cw.Stats.MAXIMUM,
      }),
      threshold: 0,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cw.TreatMissingData.NOT_BREACHING,
    });

  for (const [label, work] of [
    ['Plan', queues.plan],
    ['Report', queues.report],
  ] as const) {
    notEmpty(
      `${label}DlqNotEmpty`,
      work.deadLetterQueue,
      `Messages in the ${label.toLowerCase()} dead-letter queue: their run closes without them, their jobs counted failed. Read them and the function's log, fix the cause, then purge the queue (do not redrive: a message of a closed run is dropped); the next run fetches those jobs again.${runbook('plandlqnotempty-reportdlqnotempty')}`,
    );
  }
  for (const queue of props.scheduleDeadLetterQueues) {
    notEmpty(
      `Schedule${queue.node.id}NotEmpty`,
      queue,
      `A scheduled start-run or finish-run could not be delivered (a message in ${queue.queueName}): read the message's attributes: which schedule and time (SCHEDULE_ARN, SCHEDULED_TIME) and why (ERROR_CODE, ERROR_MESSAGE). A missed start-run: start it by hand, invoking the function of the StartRunFunctionName output with {"mode":"incremental","scheduled_time":"<SCHEDULED_TIME>"} (it still starts at most once); a missed finish-run needs nothing, the next one runs within ${FINISH_RUN_RATE.toMinutes()} minutes. Then delete the message.${runbook('scheduledeadlettersnotempty')}`,
    );
  }
  for (const name of FUNCTION_NAMES) {
    atLeastOne(
      `${FUNCTION_SETTINGS[name].id}Errors`,
      functions.byName[name].metricErrors({ period: EVENT_PERIOD, statistic: cw.Stats.SUM }),
      `${name} failed (an invocation error, not a partial batch failure): read its log group.${runbook('functionerrors')}`,
    );
  }
  atLeastOne(
    'AuthFailures',
    metric(METRIC.authFailures),
    `The API answered 401/403 to the key, or the secret holds no key: put a valid key into the secret, or allow the egress IP for the key.${runbook('authfailures')}`,
  );
  atLeastOne(
    'RunsFailed',
    metric(METRIC.runsFailed),
    `An export run failed: read its manifest's error and start-run's log.${runbook('runsfailed')}`,
  );
  atLeastOne(
    'RunsUnfinished',
    metric(METRIC.runsUnfinished),
    `An export run did not finish within its deadline and was closed with what it had: look at the queues, the dead-letter queues and the function errors.${runbook('runsunfinished')}`,
  );
  atLeastOne(
    'SchemaDrift',
    metric(METRIC.schemaDriftNewPaths),
    `The Integration API changed: reports of an evolve run differ from the spec in a way no earlier run saw (new fields, values of another type, unlisted enumeration values or variants). They still land, and every value that does not fit its column is kept in the row's _rescued column (JSON). Look at the run's schema_drift (aws runs, its manifest or the runs table), query _rescued, and upgrade the exporter once a release covers the change; to quarantine such reports instead, deploy with schemaContract freeze.${runbook('schemadrift')}`,
  );

  const hours = props.missedRunAlarmHours;
  const noFinishedRun = add('NoFinishedRun', {
    alarmDescription: `ALARM: no export run succeeded or ended partial within ${hours} h: check the schedule, start-run and the other alarms. INSUFFICIENT_DATA: finish-run stopped putting ${METRIC.hoursSinceFinishedRun} (every ${FINISH_RUN_RATE.toMinutes()} minutes): check the FinishRuns schedule, its dead-letter queue and finish-run's log group.${runbook('nofinishedrun')}`,
    metric: metric(METRIC.hoursSinceFinishedRun, HEARTBEAT_PERIOD, cw.Stats.MAXIMUM),
    threshold: hours,
    comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: NO_FINISHED_RUN_PERIODS,
    datapointsToAlarm: NO_FINISHED_RUN_PERIODS,
    // A new alarm starts in INSUFFICIENT_DATA, which runs no action (actions run on a transition
    // from another state), and goes OK at finish-run's first heartbeat. Later, no heartbeat at
    // all means finish-run stopped: the move to INSUFFICIENT_DATA notifies.
    treatMissingData: cw.TreatMissingData.MISSING,
  });
  noFinishedRun.addInsufficientDataAction(action);

  add('HighThrottleShare', {
    alarmDescription: `More than ${props.throttleShareThreshold * 100}% of API requests got 429 in a run: the shared budget learns the limit from 429s, so the limit changes or another client uses the key; lower rateCeiling.${runbook('highthrottleshare')}`,
    metric: props.throttleShare,
    threshold: props.throttleShareThreshold,
    comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: THROTTLE_PERIODS,
    datapointsToAlarm: THROTTLE_PERIODS,
    treatMissingData: cw.TreatMissingData.NOT_BREACHING,
  });
  return alarms;
}
