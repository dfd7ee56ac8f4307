import { Duration, Stack, TimeZone, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import { Construct } from 'constructs';

/** How often finish-run looks for drained runs. */
export const FINISH_RUN_RATE = Duration.minutes(5);
/**
 * Scheduler retries only a failed Invoke call (throttling, service errors): the invocation
 * never started, so a retry cannot start a second run.
 */
const INVOKE_RETRY_ATTEMPTS = 3;
/** A run that could not be started within an hour waits for the next schedule instead. */
const START_MAX_EVENT_AGE = Duration.hours(1);

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
    const timeZone = TimeZone.of(props.scheduleTimeZone);
    const startRunSchedule = (id: string, description: string, cron: string, mode: 'incremental' | 'full') =>
      new scheduler.Schedule(this, id, {
        description,
        schedule: scheduler.ScheduleExpression.expression(`cron(${cron})`, timeZone),
        target: new LambdaInvoke(props.startRun, {
          input: scheduler.ScheduleTargetInput.fromObject({ mode }),
          retryAttempts: INVOKE_RETRY_ATTEMPTS,
          maxEventAge: START_MAX_EVENT_AGE,
          role: this.role,
        }),
      });
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
        role: this.role,
      }),
    });
  }
}
