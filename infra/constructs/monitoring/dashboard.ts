import { Duration } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { METRIC } from '../../../shared/metrics.js';
import { FUNCTION_NAMES, type FunctionName } from '../functions.js';
import { EVENT_PERIOD, type ExporterMetric } from './metrics.js';

/** Runs and reports are counted per hour: a run lasts minutes to hours. */
const RUN_PERIOD = Duration.hours(1);

export interface ExporterDashboardProps {
  readonly serviceName: string;
  readonly functions: { readonly byName: Readonly<Record<FunctionName, lambda.IFunction>> };
  /** Every queue to graph, dead-letter queues included. */
  readonly queues: readonly sqs.IQueue[];
  readonly metric: ExporterMetric;
  readonly throttleShare: cw.IMetric;
  readonly alarms: readonly cw.IAlarm[];
}

/** Adds the dashboard to `scope`: runs, reports, API load, queues, functions and the alarms. */
export function addDashboard(scope: Construct, props: ExporterDashboardProps): cw.Dashboard {
  const { metric } = props;
  const fnList = FUNCTION_NAMES.map((n) => props.functions.byName[n]);
  const dashboard = new cw.Dashboard(scope, 'Dashboard', { defaultInterval: Duration.days(7) });
  dashboard.addWidgets(
    new cw.TextWidget({
      markdown: `# ${props.serviceName}\nRuns, reports, API load, queues and functions.`,
      width: 24,
      height: 2,
    }),
    new cw.GraphWidget({
      title: 'Runs',
      left: [
        metric(METRIC.runsSucceeded, RUN_PERIOD),
        metric(METRIC.runsPartial, RUN_PERIOD),
        metric(METRIC.runsFailed, RUN_PERIOD),
        metric(METRIC.runsUnfinished, RUN_PERIOD),
      ],
      // What NoFinishedRun watches: it climbs until a run finishes, and stops if finish-run does.
      right: [metric(METRIC.hoursSinceFinishedRun, RUN_PERIOD, cw.Stats.MAXIMUM)],
      width: 12,
    }),
    new cw.GraphWidget({
      title: 'Reports',
      left: [
        metric(METRIC.reportsExported, RUN_PERIOD),
        metric(METRIC.reportsUnchanged, RUN_PERIOD),
        metric(METRIC.reportsNotReady, RUN_PERIOD),
        metric(METRIC.reportsNotFound, RUN_PERIOD),
        metric(METRIC.reportsInvalid, RUN_PERIOD),
        metric(METRIC.reportsFailed, RUN_PERIOD),
      ],
      // Paths at which an evolve run's reports differed from the spec, and those no earlier run
      // had (what SchemaDrift watches).
      right: [metric(METRIC.schemaDriftPaths, RUN_PERIOD), metric(METRIC.schemaDriftNewPaths, RUN_PERIOD)],
      width: 12,
    }),
    new cw.GraphWidget({
      title: 'API requests',
      left: [metric(METRIC.apiRequests), metric(METRIC.apiThrottled), metric(METRIC.apiRetried)],
      right: [props.throttleShare],
      width: 12,
    }),
    new cw.GraphWidget({
      title: 'Queues (visible messages)',
      left: props.queues.map((q) =>
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
    new cw.AlarmStatusWidget({ title: 'Alarms', alarms: [...props.alarms], width: 24 }),
  );
  return dashboard;
}
