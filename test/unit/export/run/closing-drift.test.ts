/**
 * Schema drift in the manifest: an evolve run's manifest merges the drift of every unit summary
 * (`schema_contract`, `schema_drift`); a freeze run's manifest has neither key, as before the
 * option. Closed by finishRun against a real folder, the manifest read back as stored.
 */
import { describe, expect, it } from 'vitest';
import type { ExportDeps } from '../../../../shared/export/run/context.js';
import { finishRun } from '../../../../shared/export/run/finish-run.js';
import { DRIFT_ENTRIES_MAX, type DriftEntry, OTHER_PATHS } from '../../../../shared/export/schema-drift.js';
import { type Manifest, ManifestSchema } from '../../../../shared/export/state/manifest.js';
import { encodeRecord, type RunRecord, type UnitSummary } from '../../../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import type { Storage } from '../../../../shared/storage/storage.js';
import { tempDir } from '../../../helpers/export.js';
import { planRecord, runRecord, TEST_RUN_ID } from '../../../helpers/records.js';

const RUN = TEST_RUN_ID;
const DT = '2026-11-22';

const unlisted = (reports: number, first: number, seen: string[]): DriftEntry => ({
  path: 'job.job_status',
  kind: 'unlisted_value',
  count: reports,
  reports,
  first_job_id: first,
  seen,
});

/**
 * Stores a run of campaigns 1 and 2, one unit each (two jobs exported), as its steps leave it;
 * `drift` gives each unit's summary its drift (none when undefined).
 */
async function storeRun(
  storage: Storage,
  record: Partial<RunRecord>,
  drift: Record<string, DriftEntry[] | undefined>,
): Promise<void> {
  await storage.put(STATE_KEYS.runRecord(RUN), encodeRecord(runRecord({ campaign_ids: [1, 2], ...record })));
  for (const campaign of [1, 2]) {
    const name = `c${campaign}-u0`;
    const jobs = [campaign * 100 + 1, campaign * 100 + 2];
    const summary: UnitSummary = {
      unit: name,
      campaign_id: campaign,
      attempt: 1,
      jobs: Object.fromEntries(jobs.map((j) => [j, { fp: `fp${j}`, outcome: 'exported' as const }])),
      staged: [],
      requests: { total: 2, retried: 0, by_status: { '200': 2 } },
      ...(drift[name] && { drift: drift[name] }),
    };
    await storage.put(STATE_KEYS.unit(RUN, name), encodeRecord(summary));
    await storage.put(
      STATE_KEYS.plan(RUN, campaign),
      encodeRecord(
        planRecord({
          campaign_id: campaign,
          jobs: 2,
          units: [name],
          fetch: jobs.map((j) => ({ job_id: j, fp: `fp${j}` })),
        }),
      ),
    );
  }
}

async function close(storage: Storage): Promise<{ manifest: Manifest; stored: string }> {
  const deps: ExportDeps = {
    api: () => {
      throw new Error('closing a run sends no API request');
    },
    storage,
    log: silentLog,
    now: () => new Date('2026-11-22T03:20:00Z'),
  };
  await finishRun(deps, RUN, { force: false, announce: async () => {} });
  const stored = Buffer.from((await storage.get(manifestKey(DT, RUN)))!.body).toString('utf8');
  return { manifest: ManifestSchema.parse(JSON.parse(stored)), stored };
}

const TWO_UNITS: Record<string, DriftEntry[]> = {
  'c1-u0': [
    unlisted(2, 101, ['archived']),
    { path: 'job.priority', kind: 'new_field', count: 1, reports: 1, first_job_id: 102 },
  ],
  'c2-u0': [
    unlisted(1, 202, ['archived', 'paused']),
    {
      path: 'sections[].questions[].answer_type',
      kind: 'unlisted_value',
      count: 3,
      reports: 2,
      first_job_id: 201,
      seen: ['slider'],
    },
  ],
};

describe('schema drift in the manifest', () => {
  it("merges the drift of an evolve run's units, path by path, and the run still succeeds", async () => {
    const storage = new LocalStorage(await tempDir('drift-evolve'));
    await storeRun(storage, { schema_contract: 'evolve' }, TWO_UNITS);
    const { manifest } = await close(storage);

    expect(manifest.status).toBe('succeeded');
    expect(manifest.schema_contract).toBe('evolve');
    // By kind (new_field first), then most reports first.
    expect(manifest.schema_drift).toEqual([
      { path: 'job.priority', kind: 'new_field', count: 1, reports: 1, first_job_id: 102 },
      {
        path: 'job.job_status',
        kind: 'unlisted_value',
        count: 3,
        reports: 3,
        first_job_id: 101,
        seen: ['archived', 'paused'],
      },
      {
        path: 'sections[].questions[].answer_type',
        kind: 'unlisted_value',
        count: 3,
        reports: 2,
        first_job_id: 201,
        seen: ['slider'],
      },
    ]);
  });

  it('gives an evolve run without drift an empty schema_drift', async () => {
    const storage = new LocalStorage(await tempDir('drift-none'));
    await storeRun(storage, { schema_contract: 'evolve' }, {});
    const { manifest } = await close(storage);
    expect(manifest.schema_contract).toBe('evolve');
    expect(manifest.schema_drift).toEqual([]);
  });

  it('keeps at most DRIFT_ENTRIES_MAX entries however many paths the units drifted at', async () => {
    const many = (campaign: number): DriftEntry[] =>
      Array.from({ length: DRIFT_ENTRIES_MAX }, (_, i) => ({
        path: `data.c${campaign}_${i}`,
        kind: 'new_field' as const,
        count: 1,
        reports: 1,
        first_job_id: campaign * 100 + 1,
      }));
    const storage = new LocalStorage(await tempDir('drift-many'));
    await storeRun(storage, { schema_contract: 'evolve' }, { 'c1-u0': many(1), 'c2-u0': many(2) });
    const { manifest } = await close(storage);
    expect(manifest.schema_drift).toHaveLength(DRIFT_ENTRIES_MAX + 1);
    expect(manifest.schema_drift?.find((e) => e.path === OTHER_PATHS)?.count).toBe(DRIFT_ENTRIES_MAX);
  });

  it("writes a freeze run's manifest without schema keys, as before the option", async () => {
    const storage = new LocalStorage(await tempDir('drift-freeze'));
    // A freeze run's units report no drift; were one to, the manifest would still not carry it.
    await storeRun(storage, {}, TWO_UNITS);
    const { stored } = await close(storage);
    expect(Object.keys(JSON.parse(stored))).toEqual([
      'run_id',
      'dt',
      'mode',
      'status',
      'started_at',
      'finished_at',
      'counts',
      'requests',
      'files',
    ]);
    expect(stored).not.toContain('schema_');
  });
});
