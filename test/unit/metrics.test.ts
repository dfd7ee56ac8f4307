/** The metrics of a finished run, from its manifest (shared/metrics.ts). */
import { describe, expect, it } from 'vitest';
import { METRIC, runMetrics } from '../../shared/metrics.js';

const counts = {
  campaigns: 2,
  jobs: 21,
  reports_exported: 10,
  reports_unchanged: 5,
  reports_not_ready: 3,
  reports_not_found: 1,
  reports_invalid: 1,
  reports_failed: 1,
  campaigns_invalid: 0,
  duplicates: 0,
};
const requests = { total: 40, retried: 6, by_status: { '200': 34, '429': 5, '503': 1 } };

describe('runMetrics', () => {
  it('counts the run under its status, and puts its outcomes and requests', () => {
    expect(runMetrics({ status: 'partial', counts, requests })).toEqual([
      { name: METRIC.runsPartial, value: 1 },
      { name: METRIC.reportsExported, value: 10 },
      { name: METRIC.reportsUnchanged, value: 5 },
      { name: METRIC.reportsNotReady, value: 3 },
      { name: METRIC.reportsNotFound, value: 1 },
      { name: METRIC.reportsInvalid, value: 1 },
      { name: METRIC.reportsFailed, value: 1 },
      { name: METRIC.apiRequests, value: 40 },
      { name: METRIC.apiThrottled, value: 5 },
      { name: METRIC.apiRetried, value: 6 },
    ]);
  });

  it.each([
    ['succeeded', METRIC.runsSucceeded],
    ['failed', METRIC.runsFailed],
  ] as const)('counts a %s run as %s', (status, metric) => {
    const names = runMetrics({ status, counts, requests }).map((m) => m.name);
    expect(names[0]).toBe(metric);
    expect(names.filter((n) => n.startsWith('Runs'))).toEqual([metric]);
  });

  it('puts zero throttled requests when no answer was a 429', () => {
    const data = runMetrics({
      status: 'succeeded',
      counts,
      requests: { ...requests, by_status: { '200': 40 } },
    });
    expect(data.find((m) => m.name === METRIC.apiThrottled)?.value).toBe(0);
  });

  it("puts an evolve run's drifted paths and the reports of its most drifted path, a freeze run's none", () => {
    const schema_drift = [
      { path: 'job.priority', kind: 'new_field' as const, count: 4, reports: 3, first_job_id: 1 },
      { path: 'job.job_status', kind: 'unlisted_value' as const, count: 9, reports: 9, first_job_id: 2 },
    ];
    const drift = (m: ReturnType<typeof runMetrics>) =>
      m.filter((d) => d.name.startsWith('SchemaDrift')).map((d) => [d.name, d.value]);
    expect(
      drift(runMetrics({ status: 'succeeded', counts, requests, schema_contract: 'evolve', schema_drift })),
    ).toEqual([
      [METRIC.schemaDriftPaths, 2],
      [METRIC.schemaDriftReports, 9],
    ]);
    expect(
      drift(
        runMetrics({ status: 'succeeded', counts, requests, schema_contract: 'evolve', schema_drift: [] }),
      ),
    ).toEqual([
      [METRIC.schemaDriftPaths, 0],
      [METRIC.schemaDriftReports, 0],
    ]);
    expect(drift(runMetrics({ status: 'succeeded', counts, requests }))).toEqual([]);
  });
});
