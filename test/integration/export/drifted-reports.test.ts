/**
 * Issue 27: when the API changes, no report leaves the lake. Whole local runs under `evolve`
 * against a scripted API on 127.0.0.1 whose reports were changed at random (the changes of
 * test/helpers/report-drift.ts): every job ends in exactly one counted outcome, every report
 * whose `data` is an object lands with one `reports` row, and the run's drift is in its manifest.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Report } from '../../../shared/api/schemas.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { mutate, reportChanges } from '../../helpers/report-drift.js';
import { reportArb } from '../../helpers/reports.js';
import { onePage, runAgainst, scriptedRoute } from '../../helpers/scripted-api.js';
import { startServer, type TestServer } from '../api/server.js';

const FIRST_JOB = 11;

const counted = (m: Manifest) =>
  m.counts.reports_exported +
  m.counts.reports_unchanged +
  m.counts.reports_not_ready +
  m.counts.reports_not_found +
  m.counts.reports_invalid +
  m.counts.reports_failed;

async function filesUnder(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { recursive: true })).filter((f) => f.endsWith('.json'));
  } catch {
    return [];
  }
}

describe('runs of reports the API changed (evolve)', () => {
  let server: TestServer;
  let db: DuckDb;
  /** The `data` of each job's report in the current case. */
  let reports = new Map<number, unknown>();

  beforeAll(async () => {
    db = await openDuckDb();
    const route = scriptedRoute({
      jobIds: [],
      jobs: () => onePage([...reports.keys()].map((id) => ({ id, job_status: 2 }))),
      report: (_campaign, jobId) => ({ body: { data: reports.get(jobId) } }),
    });
    server = await startServer(route);
  });

  afterAll(async () => {
    await server?.close();
    await db?.close();
  });

  it('counts every job once, lands every report with one reports row, and reports the drift', async () => {
    const cases = fc.array(fc.tuple(reportArb, fc.option(reportChanges, { nil: undefined })), {
      minLength: 1,
      maxLength: 5,
    });
    await fc.assert(
      fc.asyncProperty(cases, async (drawn) => {
        reports = new Map(
          drawn.map(([report, changes], i) => {
            const data = JSON.parse(
              JSON.stringify({ ...report, job: { ...report.job, id: FIRST_JOB + i } }),
            ) as Record<string, unknown>;
            if (changes) mutate(data, changes);
            return [FIRST_JOB + i, data] as const;
          }),
        );
        const { manifest, out } = await runAgainst(server, {
          run: { mode: 'full', schemaContract: 'evolve' },
        });

        expect(counted(manifest)).toBe(drawn.length);
        expect(manifest.counts.reports_exported + manifest.counts.reports_invalid).toBe(drawn.length);
        // Quarantined only what cannot land: here, a report whose `job.id` a change made another job's.
        const quarantined = await filesUnder(join(out, 'quarantine'));
        expect(quarantined).toHaveLength(manifest.counts.reports_invalid);
        let others = 0;
        for (const [jobId, data] of reports) {
          const job = (data as Partial<Report>).job as unknown as Record<string, unknown> | undefined;
          const named = typeof job === 'object' && job !== null && !Array.isArray(job) ? job.id : undefined;
          // An integer, or a string holding one, names a job (shared/export/format/evolve-rows.ts namedJobId).
          const integer =
            (typeof named === 'number' || (typeof named === 'string' && /^-?(0|[1-9][0-9]*)$/.test(named))) &&
            Number.isSafeInteger(Number(named));
          const other = integer && Number(named) !== jobId;
          if (!other) continue;
          others++;
          expect(quarantined.some((f) => f.includes(`job-${jobId}`))).toBe(true);
        }
        expect(manifest.counts.reports_invalid).toBe(others);
        if (manifest.counts.reports_exported > 0) {
          const rows = await db.all(
            `SELECT job_id, count(*)::INT AS n FROM read_parquet('${out}/parquet/reports/*/*.parquet') GROUP BY job_id`,
          );
          expect(rows.every((r) => Number(r.n) === 1)).toBe(true);
          expect(rows).toHaveLength(manifest.counts.reports_exported);
        }
        expect(manifest.schema_contract).toBe('evolve');
        expect(Array.isArray(manifest.schema_drift)).toBe(true);
        // Drift alone never makes a run partial.
        expect(manifest.status).toBe(manifest.counts.reports_invalid > 0 ? 'partial' : 'succeeded');
      }),
      { numRuns: 12 },
    );
  });
});
