/**
 * The schedules (a stack of their own with two inline functions: nothing else is needed) and
 * the daylight-saving check behind their synth warning.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import {
  DST_WARNING_ID,
  ExporterSchedules,
  type ExporterSchedulesProps,
} from '../../infra/constructs/schedule.js';
import { cronFieldValues, daylightSavingHits, offsetTransitions } from '../../infra/daylight-saving.js';
import { SCHEDULED_TIME, StartRunEventSchema } from '../../shared/aws/payloads.js';
import { resourcesOf } from './helpers.js';

function synthSchedules(props: Partial<ExporterSchedulesProps>) {
  const stack = new Stack(new App(), 'Schedules');
  const fn = (id: string) =>
    new lambda.Function(stack, id, {
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('export const handler = async () => {};'),
    });
  const schedules = new ExporterSchedules(stack, 'Schedules', {
    startRun: fn('StartRun'),
    finishRun: fn('FinishRun'),
    scheduleCron: '0 2 * * ? *',
    scheduleTimeZone: 'UTC',
    ...props,
  });
  return { stack, schedules, template: Template.fromStack(stack) };
}

const dstWarnings = (stack: Stack) =>
  Annotations.fromStack(stack)
    .findWarning('*', Match.stringLikeRegexp(DST_WARNING_ID))
    .map((w) => String(w.entry.data));

describe('schedules', () => {
  const { stack, schedules, template } = synthSchedules({ fullRefreshCron: '0 3 ? * SUN *' });
  const all = Object.values(resourcesOf(template, 'AWS::Scheduler::Schedule'));
  const dlqId = stack.getLogicalId(schedules.deadLetterQueue.node.defaultChild as never);

  it('send start-run the mode and the scheduled-time placeholder Scheduler fills in', () => {
    const inputs = all
      .map((s) => (s.Properties.Target as { Input?: string }).Input)
      .filter((i): i is string => i !== undefined)
      .map((i) => JSON.parse(i) as unknown);
    expect(inputs).toEqual(
      expect.arrayContaining([
        { mode: 'incremental', scheduled_time: SCHEDULED_TIME },
        { mode: 'full', scheduled_time: SCHEDULED_TIME },
      ]),
    );
    expect(inputs).toHaveLength(2);
    // What start-run parses, once Scheduler has put a time in place of the placeholder.
    for (const input of inputs) {
      const delivered = JSON.parse(JSON.stringify(input).replace(SCHEDULED_TIME, '2026-11-23T02:00:00Z'));
      expect(StartRunEventSchema.parse(delivered).scheduled_time).toBe('2026-11-23T02:00:00Z');
    }
  });

  it('give every schedule the dead-letter queue, which the invoke role may send to', () => {
    expect(all).toHaveLength(3);
    for (const s of all) {
      expect(s.Properties.Target).toMatchObject({
        DeadLetterConfig: { Arn: { 'Fn::GetAtt': [dlqId, 'Arn'] } },
      });
    }
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Action: 'sqs:SendMessage', Resource: { 'Fn::GetAtt': [dlqId, 'Arn'] } }),
        ]),
      },
    });
  });

  it('keep dead letters 14 days, encrypted, TLS only', () => {
    template.hasResourceProperties('AWS::SQS::Queue', {
      MessageRetentionPeriod: 14 * 24 * 3600,
      SqsManagedSseEnabled: true,
    });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: dlqId }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });

  it('do not warn in UTC', () => {
    expect(dstWarnings(stack)).toEqual([]);
  });
});

describe('daylight-saving warning', () => {
  it('warns for 0 2 in Europe/Berlin: 02:00 is skipped in March and repeated in October', () => {
    const { stack } = synthSchedules({ scheduleTimeZone: 'Europe/Berlin' });
    const [warning, ...rest] = dstWarnings(stack);
    expect(rest).toEqual([]);
    expect(warning).toMatch(
      /IncrementalRun: cron\(0 2 \* \* \? \*\) in Europe\/Berlin fires at 02:00 on \d{4}-03-\d\d, an hour daylight saving skips/,
    );
    expect(warning).toMatch(/02:00 on \d{4}-10-\d\d, an hour daylight saving repeats/);
  });

  it('does not warn for 0 4 in Europe/Berlin', () => {
    expect(
      dstWarnings(synthSchedules({ scheduleTimeZone: 'Europe/Berlin', scheduleCron: '0 4 * * ? *' }).stack),
    ).toEqual([]);
  });

  it('warns for the full refresh too, on its own schedule', () => {
    const { stack } = synthSchedules({
      scheduleTimeZone: 'America/New_York',
      scheduleCron: '0 5 * * ? *',
      fullRefreshCron: '30 1 ? * SUN *',
    });
    expect(dstWarnings(stack)).toEqual([
      expect.stringMatching(/^FullRefreshRun: .* 01:30 on \d{4}-11-\d\d, an hour daylight saving repeats/),
    ]);
  });

  it('finds the 2027 transitions of Europe/Berlin: 02:00-02:59 skipped on 28 March, repeated on 31 October', () => {
    const transitions = offsetTransitions('Europe/Berlin', new Date('2027-01-01T00:00:00Z'), 1);
    expect(
      transitions.map((t) => [t.at.toISOString(), t.kind, t.localDate, t.minutes[0], t.minutes.at(-1)]),
    ).toEqual([
      ['2027-03-28T01:00:00.000Z', 'skipped', '2027-03-28', 120, 179],
      ['2027-10-31T01:00:00.000Z', 'repeated', '2027-10-31', 120, 179],
    ]);
  });

  it('finds no transition in UTC nor in a zone without daylight saving', () => {
    expect(offsetTransitions('UTC', new Date('2027-01-01T00:00:00Z'))).toEqual([]);
    expect(offsetTransitions('Asia/Tokyo', new Date('2027-01-01T00:00:00Z'))).toEqual([]);
  });

  it('reads only the minutes and hours a cron fixes: a * hour always meets the transition', () => {
    const from = new Date('2027-01-01T00:00:00Z');
    expect(daylightSavingHits('15 * * * ? *', 'Europe/Berlin', from, 1).map((h) => h.time)).toEqual([
      '02:15',
      '02:15',
    ]);
    expect(daylightSavingHits('0 2 * * ? *', 'UTC', from, 1)).toEqual([]);
    // Lord Howe moves by 30 minutes: 02:00-02:29 is skipped, 02:45 is not.
    expect(daylightSavingHits('45 2 * * ? *', 'Australia/Lord_Howe', from, 1)).toEqual([]);
    expect(daylightSavingHits('0/20 2 * * ? *', 'Australia/Lord_Howe', from, 1).map((h) => h.time)).toEqual(
      expect.arrayContaining(['02:00', '02:20']),
    );
  });

  it('parses the cron field forms Scheduler takes', () => {
    expect([...cronFieldValues('*/15', 0, 59)!]).toEqual([0, 15, 30, 45]);
    expect([...cronFieldValues('1-3,7', 0, 23)!]).toEqual([1, 2, 3, 7]);
    expect([...cronFieldValues('5/20', 0, 59)!]).toEqual([5, 25, 45]);
    expect(cronFieldValues('L', 0, 59)).toBeUndefined();
    expect(cronFieldValues('61', 0, 59)).toBeUndefined();
  });
});
