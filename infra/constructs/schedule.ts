import { Annotations, Duration, Stack, TimeZone, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { scheduledStartInput } from '../../shared/aws/payloads.js';
import { daylightSavingHits } from '../daylight-saving.js';

/** How often finish-run looks for drained runs. */
export const FINISH_RUN_RATE = Duration.minutes(5);
/**
 * Scheduler retries only a failed Invoke call (throttling, service errors): the invocation
 * never started, so a retry cannot start a second run.
 */
const INVOKE_RETRY_ATTEMPTS = 3;
/** A run that could not be started within an hour waits for the next schedule instead. */
const START_MAX_EVENT_AGE = Duration.hours(1);
/** Undelivered invocations are kept as long as SQS allows, for a person to look at. */
const DLQ_RETENTION = Duration.days(14);
/** The id of the synth warning for a cron in a skipped or repeated hour (acknowledge it by this id). */
export const DST_WARNING_ID = 'campaign-report-exporter:scheduleDaylightSaving';

export interface ExporterSchedulesProps {
  readonly startRun: lambda.IFunction;
  readonly finishRun: lambda.IFunction;
  /** Six cron fields (Scheduler syntax) of the incremental run. */
  readonly scheduleCron: string;
  /** IANA time zone the cron expressions are read in. */
  readonly scheduleTimeZone: string;
  /** Six cron fields of an optional periodic full refresh. */
  readonly fullRefreshCron?: string | undefined;
}

/** EventBridge Scheduler schedules: the incremental run, an optional full refresh, and finish-run's poll. */
export class ExporterSchedules extends Construct {
  readonly incremental: scheduler.Schedule;
  readonly fullRefresh: scheduler.Schedule | undefined;
  readonly finish: scheduler.Schedule;
  readonly role: iam.Role;
  /** Where Scheduler puts an invocation it could not deliver (every schedule): alarm on it. */
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: ExporterSchedulesProps) {
    super(scope, id);
    // Lambda's own async retries would start a second run after a failure half-way through
    // a fan-out; a failed start raises the Errors alarm and a person starts the run again.
    props.startRun.configureAsyncInvoke({ retryAttempts: 0 });
    // finish-run runs again in five minutes anyway.
    props.finishRun.configureAsyncInvoke({ retryAttempts: 0 });

    // One role for every schedule, trusted by Scheduler on behalf of this account only.
    this.role = new iam.Role(this, 'InvokeRole', {
      description: 'EventBridge Scheduler invokes the exporter functions',
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
    });
    const stack = Stack.of(this);
    for (const fn of [props.startRun, props.finishRun]) {
      const fnId = stack.getLogicalId(fn.node.defaultChild as lambda.CfnFunction);
      Validations.of(this.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${fnId}.Arn>:*]`,
        reason:
          'LambdaInvoke grants lambda:InvokeFunction on the function and its versions/aliases (ARN:*); it is still this one function.',
      });
    }
    this.deadLetterQueue = addDeadLetterQueue(this);
    const timeZone = TimeZone.of(props.scheduleTimeZone);
    const startRunSchedule = (
      id: string,
      description: string,
      cron: string,
      mode: 'incremental' | 'full',
    ) => {
      const schedule = new scheduler.Schedule(this, id, {
        description,
        schedule: scheduler.ScheduleExpression.expression(`cron(${cron})`, timeZone),
        target: new LambdaInvoke(props.startRun, {
          // Scheduler fills in the scheduled time: start-run starts one run per scheduled time
          // however often Scheduler delivers it.
          input: scheduler.ScheduleTargetInput.fromObject(scheduledStartInput(mode)),
          retryAttempts: INVOKE_RETRY_ATTEMPTS,
          maxEventAge: START_MAX_EVENT_AGE,
          deadLetterQueue: this.deadLetterQueue,
          role: this.role,
        }),
      });
      warnOnDaylightSaving(schedule, cron, props.scheduleTimeZone);
      return schedule;
    };
    this.incremental = startRunSchedule(
      'IncrementalRun',
      'Starts an incremental export run',
      props.scheduleCron,
      'incremental',
    );
    this.fullRefresh =
      props.fullRefreshCron === undefined
        ? undefined
        : startRunSchedule(
            'FullRefreshRun',
            'Starts a full-refresh export run (every published report again)',
            props.fullRefreshCron,
            'full',
          );
    this.finish = new scheduler.Schedule(this, 'FinishRuns', {
      description: 'Closes drained export runs',
      schedule: scheduler.ScheduleExpression.rate(FINISH_RUN_RATE),
      target: new LambdaInvoke(props.finishRun, {
        retryAttempts: 0,
        // A poll older than its own period is superseded by the next one.
        maxEventAge: FINISH_RUN_RATE,
        deadLetterQueue: this.deadLetterQueue,
        role: this.role,
      }),
    });
  }
}

/** The schedules' dead-letter queue: kept as long as SQS allows, encrypted, TLS only. */
function addDeadLetterQueue(scope: Construct): sqs.Queue {
  const queue = new sqs.Queue(scope, 'DeadLetters', {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: DLQ_RETENTION,
  });
  Validations.of(queue).acknowledge({
    id: 'AwsSolutions-SQS3',
    reason:
      "This queue is the schedules' dead-letter queue (the Scheduler targets' deadLetterQueue, which cdk-nag does not see as an SQS redrive); nothing consumes it but a person.",
  });
  return queue;
}

/**
 * Warns at synth when a cron's wall-clock time falls in an hour a daylight-saving transition
 * of its zone skips (the run does not happen that day) or repeats (it may happen twice).
 */
function warnOnDaylightSaving(schedule: scheduler.Schedule, cron: string, timeZone: string): void {
  const hits = daylightSavingHits(cron, timeZone, new Date());
  if (hits.length === 0) return;
  const effects = { skipped: 'skips (no run that day)', repeated: 'repeats (a second run)' } as const;
  const what = (['skipped', 'repeated'] as const).flatMap((kind) => {
    const hit = hits.find((h) => h.transition.kind === kind);
    return hit === undefined
      ? []
      : [`${hit.time} on ${hit.transition.localDate}, an hour daylight saving ${effects[kind]}`];
  });
  Annotations.of(schedule).addWarningV2(
    DST_WARNING_ID,
    `${schedule.node.id}: cron(${cron}) in ${timeZone} fires at ${what.join(', and at ')}. ` +
      'Choose a time outside the transition hours, or the time zone UTC.',
  );
}
