/**
 * Names of the CloudWatch metrics the exporter puts, shared by the handlers that emit them
 * and the alarms/dashboard in CDK that watch them. One source: never spell a name twice.
 */
import type { Manifest } from './export/state/manifest.js';

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
  /**
   * Evolve runs: the paths (with their kind) at which the run's reports differed from the spec
   * (the manifest's `schema_drift` entries): above 0 while the API differs from the spec.
   */
  schemaDriftPaths: 'SchemaDriftPaths',
  /**
   * Evolve runs: the reports of the most drifted path, a lower bound of the reports that
   * drifted (a report may drift at several paths, so the entries' reports do not add up).
   */
  schemaDriftReports: 'SchemaDriftReports',
  /**
   * Evolve runs closed by finish-run: their drift entries (kind and path) that no earlier run
   * closed by finish-run had (`state/heartbeat.json` remembers them). Above 0: the API changed
   * since; the SchemaDrift alarm.
   */
  schemaDriftNewPaths: 'SchemaDriftNewPaths',
} as const;
export type MetricName = (typeof METRIC)[keyof typeof METRIC];

/** One value of a metric, in counts. */
export interface MetricDatum {
  name: MetricName;
  value: number;
}

const RUN_STATUS_METRIC = {
  succeeded: METRIC.runsSucceeded,
  partial: METRIC.runsPartial,
  failed: METRIC.runsFailed,
} as const;

/**
 * A finished run's metrics (the alarms and the dashboard watch them): one for its status, its
 * report outcomes, its requests and, for an evolve run, its schema drift (0 included, so that
 * the graph shows the runs that did not drift; a freeze run puts none, as before the option).
 *
 * @example runMetrics(manifest).forEach(({ name, value }) => metrics.addMetric(name, 'Count', value))
 */
export function runMetrics(
  manifest: Pick<Manifest, 'status' | 'counts' | 'requests' | 'schema_contract' | 'schema_drift'>,
): MetricDatum[] {
  const c = manifest.counts;
  const drift = manifest.schema_drift ?? [];
  return [
    { name: RUN_STATUS_METRIC[manifest.status], value: 1 },
    { name: METRIC.reportsExported, value: c.reports_exported },
    { name: METRIC.reportsUnchanged, value: c.reports_unchanged },
    { name: METRIC.reportsNotReady, value: c.reports_not_ready },
    { name: METRIC.reportsNotFound, value: c.reports_not_found },
    { name: METRIC.reportsInvalid, value: c.reports_invalid },
    { name: METRIC.reportsFailed, value: c.reports_failed },
    { name: METRIC.apiRequests, value: manifest.requests.total },
    { name: METRIC.apiThrottled, value: manifest.requests.by_status['429'] ?? 0 },
    { name: METRIC.apiRetried, value: manifest.requests.retried },
    ...(manifest.schema_contract === 'evolve'
      ? [
          { name: METRIC.schemaDriftPaths, value: drift.length },
          { name: METRIC.schemaDriftReports, value: Math.max(0, ...drift.map((e) => e.reports)) },
        ]
      : []),
  ];
}
