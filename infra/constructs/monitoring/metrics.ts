import { Duration } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import { METRIC, METRICS_NAMESPACE, type MetricName } from '../../../shared/metrics.js';

/** Period of the alarms and graphs that react to single events (a dead letter, an error, a failed run). */
export const EVENT_PERIOD = Duration.minutes(5);

/** One of the exporter's own metrics, of one deployment (Sum over {@link EVENT_PERIOD} unless told). */
export type ExporterMetric = (name: MetricName, period?: Duration, statistic?: string) => cw.Metric;

/**
 * The exporter's metrics as the deployment whose Powertools service is `serviceName` puts them:
 * Powertools adds the `service` dimension to every metric, so two stages in one account and
 * region each watch their own.
 */
export function exporterMetrics(serviceName: string): ExporterMetric {
  return (name, period = EVENT_PERIOD, statistic = cw.Stats.SUM) =>
    new cw.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: name,
      dimensionsMap: { service: serviceName },
      statistic,
      period,
    });
}

/** The share of API requests that got 429, per period: what the rate limiter keeps low. */
export function throttleShare(metric: ExporterMetric): cw.MathExpression {
  return new cw.MathExpression({
    expression: 'FILL(throttled, 0) / requests',
    usingMetrics: { throttled: metric(METRIC.apiThrottled), requests: metric(METRIC.apiRequests) },
    period: EVENT_PERIOD,
    label: '429 share',
  });
}
