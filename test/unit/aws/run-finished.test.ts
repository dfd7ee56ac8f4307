/** The ExportRunFinished event's detail, built from a manifest the finisher builds, read back with its schema. */
import { describe, expect, it } from 'vitest';
import {
  MAX_DETAIL_BYTES,
  RunFinishedDetailSchema,
  runFinishedDetail,
} from '../../../shared/aws/run-finished.js';
import { buildManifest } from '../../../shared/export/run/closing-tally.js';
import {
  DRIFT_ENTRIES_MAX,
  DRIFT_KINDS,
  DRIFT_SEEN_MAX,
  type DriftEntry,
} from '../../../shared/export/schema-drift.js';
import { DRIFT_PATH_CHARS, DRIFT_TOP_PATHS } from '../../../shared/export/state/drift-summary.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { emptyRequestCounts } from '../../../shared/export/state/records.js';
import { planRecord, runRecord, TEST_RUN_ID } from '../../helpers/records.js';

const WHERE = { stage: 'staging', bucket: 'data-lake', prefix: 'lake/' };

/** A closed run of one campaign, one job exported, with `files` published files. */
function manifestWith(files: number): Manifest {
  const plan = planRecord({ jobs: 1, fetch: [{ job_id: 7, fp: 'f' }] });
  const unit = {
    unit: 'c1-u0',
    campaign_id: 1,
    attempt: 1,
    staged: [],
    jobs: { 7: { fp: 'f', outcome: 'exported' as const } },
    requests: { total: 3, retried: 1, by_status: { '200': 2, '429': 1 } },
  };
  const manifest = buildManifest(
    {
      record: runRecord(),
      plans: new Map([[1, plan]]),
      units: new Map([['c1-u0', unit]]),
      unrecorded: emptyRequestCounts(),
    },
    new Date('2026-11-22T03:40:00Z'),
  );
  const published = Array.from({ length: files }, (_, i) => ({
    key: `parquet/reports/dt=2026-11-22/${TEST_RUN_ID}-${i}.parquet`,
    table_or_entity: 'reports',
    format: 'parquet' as const,
    rows: 1,
    bytes: 100,
  }));
  return { ...manifest, files: published };
}

describe('runFinishedDetail', () => {
  it("names an Iceberg run's snapshots, even when the file list is left to the manifest", () => {
    const iceberg = {
      catalog: 'glue' as const,
      tables: {
        reports: {
          snapshot_id: 123,
          metadata_location: 's3://data-lake/lake/iceberg/reports/metadata/00001-a.metadata.json',
        },
      },
    };
    for (const files of [1, 3000]) {
      const manifest = { ...manifestWith(files), table_format: 'iceberg' as const, iceberg };
      const detail = RunFinishedDetailSchema.parse(JSON.parse(runFinishedDetail(manifest, WHERE)));
      expect(detail.iceberg).toEqual(iceberg);
    }
    expect(
      RunFinishedDetailSchema.parse(JSON.parse(runFinishedDetail(manifestWith(1), WHERE))).iceberg,
    ).toBeUndefined();
  });

  it('builds a detail its schema reads back, with the keys under the data prefix', () => {
    const manifest = manifestWith(2);

    const detail = RunFinishedDetailSchema.parse(JSON.parse(runFinishedDetail(manifest, WHERE)));

    expect(detail).toEqual({
      stage: 'staging',
      run_id: TEST_RUN_ID,
      dt: '2026-11-22',
      mode: 'incremental',
      status: 'succeeded',
      bucket: 'data-lake',
      manifest_key: `lake/runs/dt=2026-11-22/${TEST_RUN_ID}.json`,
      counts: manifest.counts,
      files: manifest.files.map((f) => ({ ...f, key: `lake/${f.key}` })),
    });
    expect(detail.counts.reports_exported).toBe(1);
  });

  it('names only the manifest when the file list would not fit in an event', () => {
    const manifest = manifestWith(2_000);

    const text = runFinishedDetail(manifest, WHERE);
    const detail = RunFinishedDetailSchema.parse(JSON.parse(text));

    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_DETAIL_BYTES);
    expect(detail).toMatchObject({ files_in_manifest: true, run_id: TEST_RUN_ID });
    expect(detail).not.toHaveProperty('files');
  });

  it('refuses a detail that carries neither the files nor the flag', () => {
    const detail = JSON.parse(runFinishedDetail(manifestWith(1), WHERE));
    delete detail.files;

    expect(RunFinishedDetailSchema.safeParse(detail).success).toBe(false);
  });

  it("carries an evolve run's drift per kind with its top paths, a freeze run's not at all", () => {
    const schema_drift: DriftEntry[] = [
      { path: 'job.priority', kind: 'new_field', count: 4, reports: 2, first_job_id: 8 },
      {
        path: 'job.job_status',
        kind: 'unlisted_value',
        count: 31,
        reports: 31,
        first_job_id: 7,
        seen: ['9'],
      },
      {
        path: 'sections[].questions[].answer_type',
        kind: 'unlisted_value',
        count: 6,
        reports: 4,
        first_job_id: 9,
        seen: ['slider'],
      },
    ];
    const manifest: Manifest = { ...manifestWith(1), schema_contract: 'evolve', schema_drift };

    const detail = RunFinishedDetailSchema.parse(JSON.parse(runFinishedDetail(manifest, WHERE)));

    expect(detail.schema_contract).toBe('evolve');
    expect(detail.schema_drift).toEqual([
      {
        kind: 'new_field',
        paths: 1,
        count: 4,
        top: [{ path: 'job.priority', reports: 2, count: 4, first_job_id: 8 }],
      },
      {
        kind: 'unlisted_value',
        paths: 2,
        count: 37,
        top: [
          { path: 'job.job_status', reports: 31, count: 31, first_job_id: 7 },
          { path: 'sections[].questions[].answer_type', reports: 4, count: 6, first_job_id: 9 },
        ],
      },
    ]);
    const clean = { ...manifestWith(1), schema_contract: 'evolve' as const, schema_drift: [] };
    expect(RunFinishedDetailSchema.parse(JSON.parse(runFinishedDetail(clean, WHERE))).schema_drift).toEqual(
      [],
    );
    const freeze = JSON.parse(runFinishedDetail(manifestWith(1), WHERE));
    expect(freeze).not.toHaveProperty('schema_contract');
    expect(freeze).not.toHaveProperty('schema_drift');
  });

  it("keeps the drift a few KB and the detail within its bound however much the run's reports drifted", () => {
    // The most a manifest holds: DRIFT_ENTRIES_MAX entries with long paths and every example.
    const schema_drift: DriftEntry[] = Array.from({ length: DRIFT_ENTRIES_MAX }, (_, i) => ({
      path: `${'x'.repeat(2_000)}.${i}`,
      kind: DRIFT_KINDS[i % DRIFT_KINDS.length]!,
      count: 1_000_000 + i,
      reports: 1_000_000 + i,
      first_job_id: 1_000_000_000 + i,
      seen: Array.from({ length: DRIFT_SEEN_MAX }, (_, j) => `${'v'.repeat(78)}${j}`),
    }));
    for (const files of [1, 1_000, 2_000]) {
      const manifest: Manifest = { ...manifestWith(files), schema_contract: 'evolve', schema_drift };
      const text = runFinishedDetail(manifest, WHERE);
      const detail = RunFinishedDetailSchema.parse(JSON.parse(text));
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_DETAIL_BYTES);
      expect(Buffer.byteLength(JSON.stringify(detail.schema_drift))).toBeLessThan(8 * 1024);
      expect(detail.schema_drift).toHaveLength(DRIFT_KINDS.length);
      for (const kind of detail.schema_drift ?? []) {
        expect(kind.paths).toBe(DRIFT_ENTRIES_MAX / DRIFT_KINDS.length);
        expect(kind.top).toHaveLength(DRIFT_TOP_PATHS);
        for (const p of kind.top) expect(p.path.length).toBeLessThanOrEqual(DRIFT_PATH_CHARS);
      }
    }
  });
});
