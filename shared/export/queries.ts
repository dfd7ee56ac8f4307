/**
 * The example queries: printed by the demo (DuckDB) and registered as Athena named queries
 * (CDK). The same text runs on both engines: plain SQL and functions Trino and DuckDB share
 * (try_cast, CROSS JOIN UNNEST, struct field access), no engine-specific syntax. Report
 * questions go through the `*_latest` views (views.ts), so a job exported by several runs
 * counts once; queries over a snapshot bound their scan with `dt`.
 */
import type { TableFormat } from '../layout.js';

export interface NamedQuery {
  readonly name: string;
  readonly description: string;
  readonly sql: string;
}

/** The newest run that published data; its `dt` lets the engines prune the other partitions. */
const LAST_PUBLISHED_RUN = `last_run AS (
  SELECT run_id, dt
  FROM runs
  WHERE status IN ('succeeded', 'partial')
  ORDER BY run_id DESC
  LIMIT 1
)`;

/** Days of runs `recent-runs` looks at: a month of daily runs, a bounded scan. */
const RECENT_RUN_DAYS = 31;

export const QUERIES: readonly NamedQuery[] = [
  {
    name: 'average-score-by-campaign-and-survey',
    description: 'Average job score (percent) per campaign and survey, latest report per job.',
    sql: `SELECT campaign_id, max(campaign_name) AS campaign_name, survey_name,
       count(*) AS reports,
       round(avg(try_cast(job_score_percentage AS double)), 2) AS avg_score_pct
FROM reports_latest
GROUP BY campaign_id, survey_name
ORDER BY campaign_id, survey_name
LIMIT 20`,
  },
  {
    name: 'answer-distribution-of-top-question',
    description: 'How the most-asked question (by reference_code) was answered, latest report per job.',
    sql: `WITH top_question AS (
  SELECT reference_code
  FROM questions_latest
  WHERE reference_code IS NOT NULL AND logic_index IS NULL
  GROUP BY reference_code
  ORDER BY count(*) DESC, reference_code
  LIMIT 1
)
SELECT q.reference_code, t.answer, count(DISTINCT q.job_id) AS reports
FROM questions_latest q
JOIN top_question tq ON q.reference_code = tq.reference_code
CROSS JOIN UNNEST(q.response) AS t (answer)
WHERE q.logic_index IS NULL
GROUP BY q.reference_code, t.answer
ORDER BY reports DESC, t.answer
LIMIT 20`,
  },
  {
    name: 'jobs-without-report',
    description:
      'Jobs of the latest published listing that have no exported report yet (not ready, not found or failed).',
    sql: `WITH ${LAST_PUBLISHED_RUN}
SELECT j.campaign_id, j.job_id, j.job_status, j.job_score_percentage
FROM jobs j
JOIN last_run l ON j.dt = l.dt AND j.run_id = l.run_id
LEFT JOIN reports_latest r ON r.job_id = j.job_id
WHERE r.job_id IS NULL
ORDER BY j.campaign_id, j.job_id
LIMIT 20`,
  },
  {
    name: 'recent-runs',
    description: `The runs of the last ${RECENT_RUN_DAYS} days, newest first: status, outcome counts and requests.`,
    sql: `SELECT run_id, dt, mode, status,
       counts.jobs AS jobs, counts.reports_exported AS exported,
       counts.reports_unchanged AS unchanged, counts.reports_not_ready AS not_ready,
       counts.reports_failed + counts.reports_invalid AS failed_or_invalid,
       requests.total AS requests, requests.retried AS retried,
       error.message AS error
FROM runs
WHERE dt >= CAST(CAST(current_date - INTERVAL '${RECENT_RUN_DAYS}' DAY AS date) AS varchar)
ORDER BY run_id DESC
LIMIT 20`,
  },
];

/**
 * The example queries for a table format: over Iceberg tables, the `*_current` tables hold what
 * the `*_latest` views compute (the newest report per job), so the queries read those instead.
 */
export function queriesFor(format: TableFormat): readonly NamedQuery[] {
  if (format === 'hive') return QUERIES;
  return QUERIES.map((q) => ({ ...q, sql: q.sql.replace(/\b(\w+)_latest\b/g, '$1_current') }));
}
