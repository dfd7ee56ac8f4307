/**
 * The run lifecycle's guards, one defect of issue 16 each, on a real folder with the API
 * simulator: a run is closed at most once and only from its stored closing record; one
 * announcement per run; a start interrupted by a takeover is closed as failed and cannot come
 * back; concurrent deliveries of one plan or one unit yield one result; finish-run leaves a CLI
 * run alone while its CLI holds the output, and closes a start that died once start-run cannot
 * be alive. The seeded simulation (test/sim) checks the same invariants over interleavings.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import { OutputLockedError } from '../../../shared/errors.js';
import { closeRuns } from '../../../shared/export/run/close-runs.js';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { exportUnit } from '../../../shared/export/run/export-unit.js';
import { finishRun } from '../../../shared/export/run/finish-run.js';
import { planCampaign } from '../../../shared/export/run/plan-campaign.js';
import { readRunRecords } from '../../../shared/export/run/run-records.js';
import { RUN_START_GRACE_MS, startRun } from '../../../shared/export/run/start-run.js';
import { loadCampaignState } from '../../../shared/export/state/incremental.js';
import { MAX_CLOCK_SKEW_MS, OutputLock } from '../../../shared/export/state/lock.js';
import { type Manifest, ManifestSchema } from '../../../shared/export/state/manifest.js';
import { encodeRecord, PlanRecordSchema, parseRecord } from '../../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { listAll } from '../../../shared/storage/storage.js';
import { tempDir } from '../../helpers/export.js';
import { runRecord, storeRecordedRun, TEST_RUN_ID } from '../../helpers/records.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const T0 = Date.parse('2026-11-22T03:15:00Z');
const MINUTE = 60_000;

let simulator: Simulator;
beforeAll(async () => {
  simulator = await startSimulator({ seed: 5, campaigns: 2, jobsPerCampaign: 8, reportSize: 'tiny' });
});
afterAll(async () => {
  await simulator?.close();
});

/** Deps on a folder and the simulator, with a clock the test sets. */
function depsOn(out: string, clock: { at: number }): ExportDeps {
  const base = cliDeps({
    baseUrl: simulator.url,
    apiKey: simulator.keys.valid,
    out,
    concurrency: 4,
    maxRate: 10_000,
    log: silentLog,
  });
  return { ...base, now: () => new Date(clock.at) };
}

const finisherDeps = (storage: LocalStorage, at = T0 + 5 * MINUTE): ExportDeps => ({
  api: () => {
    throw new Error('closing a run sends no API request');
  },
  storage,
  log: silentLog,
  now: () => new Date(at),
});

describe('closing a run', () => {
  it('never closes a finished run again from records read before it closed', async () => {
    const storage = new LocalStorage(await tempDir('guards'));
    await storeRecordedRun(storage);
    const stale = await readRunRecords(finisherDeps(storage), TEST_RUN_ID);
    if (!stale) throw new Error('no records');
    await finishRun(finisherDeps(storage), TEST_RUN_ID, { force: true, announce: async () => {} });
    const manifest = await storage.get(manifestKey('2026-11-22', TEST_RUN_ID));
    // What a stalled closer holds: job 12 exported in its view, and no rows of it anywhere.
    stale.units.set('c1-u0', {
      ...stale.units.get('c1-u0')!,
      jobs: { 11: { fp: 'a', outcome: 'exported' }, 12: { fp: 'b', outcome: 'exported' } },
    });

    const again = await finishRun(finisherDeps(storage), TEST_RUN_ID, { force: true, records: stale });

    expect(again).toBeUndefined();
    expect((await loadCampaignState(storage, 1)).state.jobs[12]?.outcome).toBe('not_ready');
    expect((await storage.get(manifestKey('2026-11-22', TEST_RUN_ID)))?.body).toEqual(manifest?.body);
    // The run keeps its tombstone and its closing marker only: no second closing record.
    expect((await listAll(storage, STATE_KEYS.runPrefix(TEST_RUN_ID))).sort()).toEqual(
      [STATE_KEYS.closed(TEST_RUN_ID), STATE_KEYS.closing(TEST_RUN_ID)].sort(),
    );
    const marker = await storage.get(STATE_KEYS.closing(TEST_RUN_ID));
    expect(JSON.parse(Buffer.from(marker!.body).toString())).toEqual({ closed: true, run_id: TEST_RUN_ID });
  });

  it('announces a run once, and counts it once, when two finishers close it at once', async () => {
    const storage = new LocalStorage(await tempDir('guards'));
    await storeRecordedRun(storage);
    const announced: string[] = [];
    const announce = async (m: Manifest) => {
      announced.push(m.run_id);
    };

    const results = await Promise.all(
      [0, 1, 2].map(() => finishRun(finisherDeps(storage), TEST_RUN_ID, { force: true, announce })),
    );

    expect(announced).toEqual([TEST_RUN_ID]);
    expect(results.filter((m) => m !== undefined)).toHaveLength(1);
  });

  it('announces again after a failed announcement, once', async () => {
    const storage = new LocalStorage(await tempDir('guards'));
    await storeRecordedRun(storage);
    let tries = 0;
    const announce = async () => {
      if (++tries === 1) throw new Error('EventBridge is down');
    };

    await expect(finishRun(finisherDeps(storage), TEST_RUN_ID, { force: true, announce })).rejects.toThrow(
      'EventBridge is down',
    );
    const closed = await finishRun(finisherDeps(storage), TEST_RUN_ID, { force: true, announce });

    expect(closed?.run_id).toBe(TEST_RUN_ID);
    expect(tries).toBe(2);
  });
});

/**
 * A CLI start that stalls in verify (a long Retry-After) without renewing its lock, until
 * `resume`; the clock is then past its lock's expiry and the allowance.
 */
async function stalledStart(out: string, clock: { at: number }) {
  let resume: (() => void) | undefined;
  const stalled = depsOn(out, clock);
  const slowApi = () => {
    const api = stalled.api();
    const slow = Object.create(api) as typeof api;
    slow.verify = async () => {
      await new Promise<void>((r) => {
        resume = r;
      });
      return api.verify();
    };
    return slow;
  };
  const first = startRun(
    { ...stalled, api: slowApi },
    { mode: 'incremental', driver: 'local', lock: { ttlMs: MINUTE } },
  );
  await expect.poll(() => resume).toBeDefined();
  clock.at += MINUTE + MAX_CLOCK_SKEW_MS + 1;
  return { first, resume: () => resume?.() };
}

describe('starting a run', () => {
  it('closes a start that lost the output as failed, and that start cannot come back to life', async () => {
    const out = await tempDir('guards');
    const clock = { at: T0 };
    const { first, resume } = await stalledStart(out, clock);

    // The next run takes the expired lock and closes the stalled one (its first record says it was starting).
    const next = await startRun(depsOn(out, clock), {
      mode: 'incremental',
      driver: 'local',
      lock: { ttlMs: MINUTE },
    });
    resume();

    await expect(first).rejects.toBeInstanceOf(OutputLockedError);
    const storage = new LocalStorage(out);
    const manifests = (await listAll(storage, 'runs/')).filter((k) => !k.includes(next.run.run_id));
    expect(manifests).toHaveLength(1);
    const closed = ManifestSchema.parse(
      JSON.parse(Buffer.from((await storage.get(manifests[0]!))!.body).toString()),
    );
    expect(closed).toMatchObject({ status: 'failed', recovered_by: next.run.run_id });
    expect(closed.error?.message).toMatch(/interrupted while it started/);
    await next.lock?.release();
  });
  it('a start cannot come back to life when the closer that closed it died right after the tombstone', async () => {
    const out = await tempDir('guards');
    const clock = { at: T0 };
    const { first, resume } = await stalledStart(out, clock);

    // The next run's recovery closes the stalled start and dies right after its tombstone: its
    // next write (the closing record shrunk to a marker) fails, the run's records are left.
    class DiesAfterTombstone extends LocalStorage {
      override async put(...args: Parameters<LocalStorage['put']>) {
        const [key] = args;
        const runId = /^state\/runs\/([^/]+)\/closing\.json$/.exec(key)?.[1];
        if (runId && (await this.get(STATE_KEYS.closed(runId)))) throw new Error('the closer died');
        return super.put(...args);
      }
    }
    const next = await startRun(
      { ...depsOn(out, clock), storage: new DiesAfterTombstone(out) },
      { mode: 'incremental', driver: 'local', lock: { ttlMs: MINUTE } },
    );
    const storage = new LocalStorage(out);
    const [stalledRun] = (await listAll(storage, 'state/runs/'))
      .map((k) => k.split('/')[2]!)
      .filter((id) => id !== next.run.run_id);
    expect(await storage.get(STATE_KEYS.closed(stalledRun!))).toBeDefined();
    resume();

    // Its whole record over the `starting` one is refused: the run stays closed, failed. (What
    // it staged while it listed stays in its closed folder, which the next sweep empties.)
    await expect(first).rejects.toBeInstanceOf(OutputLockedError);
    expect(await storage.get(STATE_KEYS.runRecord(stalledRun!))).toBeUndefined();
    const manifests = (await listAll(storage, 'runs/')).filter((k) => k.includes(stalledRun!));
    expect(manifests).toHaveLength(1);
    expect(JSON.parse(Buffer.from((await storage.get(manifests[0]!))!.body).toString())).toMatchObject({
      status: 'failed',
    });
    await next.lock?.release();
  });
});

describe('concurrent deliveries of one message', () => {
  it('plan one campaign once: both deliveries send the units of the plan that is stored', async () => {
    const out = await tempDir('guards');
    const deps = depsOn(out, { at: T0 });
    const { run } = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
    const message = { ...run, campaign_id: simulator.dataset.campaigns[0]!.id };

    const [a, b] = await Promise.all([planCampaign(deps, message, 3), planCampaign(deps, message, 3)]);

    const storage = new LocalStorage(out);
    const key = STATE_KEYS.plan(run.run_id, message.campaign_id);
    const stored = parseRecord(PlanRecordSchema, (await storage.get(key))!.body, key);
    expect(a.record).toEqual(stored);
    expect(b.record).toEqual(stored);
    expect(a.units).toEqual(b.units);
    // Each delivery staged its own jobs file; only the stored plan's is ever published.
    const staged = await listAll(storage, STATE_KEYS.staged(run.run_id, 'steps/jobs/'));
    expect(staged).toHaveLength(2);
    expect(stored.staged.filter((f) => f.format === 'parquet' && f.table_or_entity === 'jobs')).toHaveLength(
      1,
    );
  });

  it("export one unit once: both deliveries return the summary that is stored, and it lists one delivery's files", async () => {
    const out = await tempDir('guards');
    const deps = depsOn(out, { at: T0 });
    const { run } = await startRun(deps, { mode: 'full', driver: 'queues', lock: 'unlocked' });
    const campaign = simulator.dataset.campaigns[0]!.id;
    const { units } = await planCampaign(deps, { ...run, campaign_id: campaign }, 3);
    const unit = units[0]!;

    const [a, b] = await Promise.all([
      exportUnit(deps, unit, { resume: true }),
      exportUnit(deps, unit, { resume: true }),
    ]);

    expect(a).toEqual(b);
    const stems = new Set(a.staged.map((f) => f.key.replace(/^.*\//, '').replace(/\..*$/, '')));
    expect(stems.size).toBe(1);
    expect(a.attempt).toBe(1);
  });
});

describe('finish-run and runs it does not carry', () => {
  const options = (now: number) => ({
    now,
    deadlineMs: 30 * MINUTE,
    queuesDrained: async () => true,
    announce: async () => {},
  });

  it('leaves an overdue CLI run alone while its CLI holds the output, and closes it once it does not', async () => {
    const storage = new LocalStorage(await tempDir('guards'));
    const clock = { at: T0 };
    const lock = await OutputLock.acquire(storage, {
      newRunId: () => TEST_RUN_ID,
      ttlMs: MINUTE,
      now: () => new Date(clock.at),
      owner: 'backfill@laptop',
    });
    await storage.put(
      STATE_KEYS.runRecord(TEST_RUN_ID),
      encodeRecord(runRecord({ driver: 'local', campaign_ids: [] })),
    );
    clock.at += 40 * MINUTE;
    await lock.renew(); // The CLI is alive, 40 minutes into a long backfill.

    expect((await closeRuns(finisherDeps(storage, clock.at), options(clock.at))).closed).toEqual([]);
    await expect(lock.check()).resolves.toBeUndefined();

    clock.at += MINUTE + MAX_CLOCK_SKEW_MS + 1; // It stopped renewing: gone.
    const { closed } = await closeRuns(finisherDeps(storage, clock.at), options(clock.at));
    expect(closed.map((c) => c.manifest.run_id)).toEqual([TEST_RUN_ID]);
    await expect(lock.check()).rejects.toBeInstanceOf(OutputLockedError);
  });

  it('closes a start that died after its first record as failed once start-run cannot be alive', async () => {
    const storage = new LocalStorage(await tempDir('guards'));
    const starting = runRecord({
      campaign_ids: [],
      starting: true,
      fatal: { message: 'the run was interrupted while it started, before it listed the campaigns' },
    });
    await storage.put(STATE_KEYS.runRecord(TEST_RUN_ID), encodeRecord(starting));
    const within = T0 + RUN_START_GRACE_MS;
    const after = T0 + RUN_START_GRACE_MS + MAX_CLOCK_SKEW_MS + 1;

    expect((await closeRuns(finisherDeps(storage, within), options(within))).closed).toEqual([]);
    const { closed } = await closeRuns(finisherDeps(storage, after), options(after));

    expect(closed.map((c) => [c.manifest.run_id, c.manifest.status])).toEqual([[TEST_RUN_ID, 'failed']]);
  });
});

describe('the incremental state', () => {
  it('is not written again by a run that changed nothing', async () => {
    const out = await tempDir('guards');
    const clock = { at: T0 };
    const { runExport } = await import('../../../shared/export/run/local-run.js');
    await runExport(depsOn(out, clock), { mode: 'incremental' });
    clock.at += 5 * MINUTE;
    const deps = depsOn(out, clock);
    const written: string[] = [];
    const put = deps.storage.put.bind(deps.storage);
    deps.storage.put = (key, body, options) => {
      written.push(key);
      return put(key, body, options);
    };

    const second = await runExport(deps, { mode: 'incremental' });

    expect(second.counts.reports_unchanged).toBeGreaterThan(0);
    expect(second.counts.reports_exported).toBe(0);
    expect(written.filter((key) => key.startsWith('state/campaigns/'))).toEqual([]);
    expect(written.some((key) => key.startsWith('runs/'))).toBe(true);
  });
});
