/**
 * Names of the CloudWatch metrics the exporter puts, shared by the handlers that emit them
 * and the alarms/dashboard in CDK that watch them. One source: never spell a name twice.
 */
export const METRICS_NAMESPACE = 'CampaignReportExporter';

export const METRIC = {
  runsSucceeded: 'RunsSucceeded',
  runsPartial: 'RunsPartial',
  runsFailed: 'RunsFailed',
  /** A run closed by finish-run because it did not finish within its deadline. */
  runsUnfinished: 'RunsUnfinished',
  reportsExported: 'ReportsExported',
  reportsUnchanged: 'ReportsUnchanged',
  reportsNotReady: 'ReportsNotReady',
  reportsNotFound: 'ReportsNotFound',
  reportsInvalid: 'ReportsInvalid',
  reportsFailed: 'ReportsFailed',
  apiRequests: 'ApiRequests',
  apiThrottled: 'ApiRequestsThrottled',
  apiRetried: 'ApiRequestsRetried',
  /** 401/403 answers that stopped a step: the key or its restrictions need a person. */
  authFailures: 'AuthFailures',
  /**
   * Put by finish-run on every look (every 5 minutes): hours since a run last ended succeeded or
   * partial, or since the deployment's first look when none has yet. The heartbeat of the
   * NoFinishedRun alarm: no datapoint means finish-run itself is not running.
   */
  hoursSinceFinishedRun: 'HoursSinceFinishedRun',
} as const;
export type MetricName = (typeof METRIC)[keyof typeof METRIC];
