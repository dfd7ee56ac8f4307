/**
 * The example queries: printed by the demo (DuckDB) and registered as Athena named queries
 * (CDK). The same text runs on both engines: Trino functions that DuckDB shares (try_cast,
 * row_number, CROSS JOIN UNNEST), no engine-specific syntax.
 */
export interface NamedQuery {
  readonly name: string;
  readonly description: string;
  readonly sql: string;
}

/** Reports are written once per run that fetched them; take each job's latest. */
const LATEST_REPORTS = `latest AS (
  SELECT r.*, row_number() OVER (PARTITION BY job_id ORDER BY exported_at DESC) AS rn
  FROM reports r
)`;

export const QUERIES: readonly NamedQuery[] = [
  {
    name: 'average-score-by-campaign-and-survey',
    description: 'Average job score (percent) per campaign and survey, latest report per job.',
    sql: `WITH ${LATEST_REPORTS}
SELECT campaign_id, max(campaign_name) AS campaign_name, survey_name,
       count(*) AS reports,
       round(avg(try_cast(job_score_percentage AS double)), 2) AS avg_score_pct
FROM latest
WHERE rn = 1
GROUP BY campaign_id, survey_name
ORDER BY campaign_id, survey_name
LIMIT 20`,
  },
  {
    name: 'answer-distribution-of-top-question',
    description: 'How the most-asked question (by reference_code) was answered across reports.',
    sql: `WITH top_question AS (
  SELECT reference_code
  FROM questions
  WHERE reference_code IS NOT NULL AND logic_index IS NULL
  GROUP BY reference_code
  ORDER BY count(*) DESC, reference_code
  LIMIT 1
)
SELECT q.reference_code, t.answer, count(DISTINCT q.job_id) AS reports
FROM questions q
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
      'Jobs of the latest listing that have no exported report yet (not ready, not found or failed).',
    sql: `WITH last_run AS (SELECT max(run_id) AS run_id FROM jobs),
exported AS (SELECT DISTINCT job_id FROM reports)
SELECT j.campaign_id, j.job_id, j.job_status, j.job_score_percentage
FROM jobs j
JOIN last_run l ON j.run_id = l.run_id
LEFT JOIN exported e ON e.job_id = j.job_id
WHERE e.job_id IS NULL
ORDER BY j.campaign_id, j.job_id
LIMIT 20`,
  },
];
