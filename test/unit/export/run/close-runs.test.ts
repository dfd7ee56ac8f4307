import { describe, expect, it } from 'vitest';
import { LISTING_HANDED_ON_GRACE_MS } from '../../../../shared/export/run/campaign-listing.js';
import { closeRuns } from '../../../../shared/export/run/close-runs.js';
import { RUN_START_GRACE_MS } from '../../../../shared/export/run/start-run.js';
import type { Manifest } from '../../../../shared/export/state/manifest.js';
import { encodeRecord, type RunRecord } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';
import { planRecord, runRecord } from '../../../helpers/records.js';

const STARTED = Date.parse('2026-11-22T03:15:00Z');
const MINUTE = 60_000;
const none = { total: 0, retried: 0, by_status: {} };

/** A run of one campaign with one unit of one job; `unitDone` says whether the unit reported. */
async function storageWith(runs: { id: string; unitDone: boolean; driver?: RunRecord['driver'] }[]) {
  const storage = new LocalStorage(await tempDir('close-runs'));
  for (const { id, unitDone, driver = 'queues' } of runs) {
    await storage.put(STATE_KEYS.runRecord(id), encodeRecord(runRecord({ run_id: id, driver })));
    const plan = planRecord({ jobs: 1, fetch: [{ job_id: 7, fp: 'f' }], requests: none });
    await storage.put(STATE_KEYS.plan(id, 1), encodeRecord(plan));
    if (unitDone) {
      const summary = {
        unit: 'c1-u0',
        campaign_id: 1,
        attempt: 1,
        staged: [],
        jobs: { 7: { fp: 'f', outcome: 'exported' } },
        requests: none,
      };
      await storage.put(STATE_KEYS.unit(id, 'c1-u0'), encodeRecord(summary));
    }
  }
  return storage;
}

/** The output's lock, held by `runId` since `since` for 300 minutes. */
function holdOutput(storage: LocalStorage, runId: string, owner: string, since: number) {
  return storage.put(
    STATE_KEYS.lock,
    `${JSON.stringify({
      run_id: runId,
      owner,
      acquired_at: new Date(since).toISOString(),
      expires_at: new Date(since + 300 * MINUTE).toISOString(),
    })}\n`,
  );
}

function closer(storage: LocalStorage, now: number, drained: boolean) {
  const announced: Manifest[] = [];
  const deps = {
    api: () => {
      throw new Error('no API calls');
    },
    storage,
    log: silentLog,
    now: () => new Date(now),
  };
  const run = () =>
    closeRuns(deps, {
      now,
      deadlineMs: 60 * MINUTE,
      queuesDrained: async () => drained,
      announce: async (m) => {
        announced.push(m);
      },
    });
  return { run, announced };
}

const A = '20261122T031500Z-aaaaaa';
const B = '20261122T031500Z-bbbbbb';

describe('closeRuns', () => {
  it('closes a complete run at once and leaves an incomplete one while work is queued', async () => {
    const storage = await storageWith([
      { id: A, unitDone: true },
      { id: B, unitDone: false },
    ]);
    const { run, announced } = closer(storage, STARTED + 5 * MINUTE, false);
    const result = await run();
    expect(result.closed.map((c) => c.manifest.run_id)).toEqual([A]);
    expect(announced.map((m) => m.status)).toEqual(['succeeded']);
    expect(await storage.get(STATE_KEYS.runRecord(B))).toBeDefined();
  });

  it('closes an incomplete run only on the second empty look, counting its missing jobs failed', async () => {
    const storage = await storageWith([{ id: B, unitDone: false }]);
    const first = await closer(storage, STARTED + 5 * MINUTE, true).run();
    expect(first.closed).toEqual([]);
    const second = await closer(storage, STARTED + 10 * MINUTE, true).run();
    expect(second.closed.map((c) => [c.manifest.counts.reports_failed, c.unfinished])).toEqual([[1, false]]);
  });

  it('leaves a CLI run alone until its deadline, then closes it as unfinished', async () => {
    const storage = await storageWith([{ id: A, unitDone: false, driver: 'local' }]);
    expect((await closer(storage, STARTED + 5 * MINUTE, true).run()).closed).toEqual([]);
    expect((await closer(storage, STARTED + 10 * MINUTE, true).run()).closed).toEqual([]);
    const late = await closer(storage, STARTED + 61 * MINUTE, false).run();
    expect(late.closed.map((c) => c.unfinished)).toEqual([true]);
  });

  it('closes a CLI run within its deadline once another run holds the output (its start left the closing here)', async () => {
    const storage = await storageWith([{ id: A, unitDone: false, driver: 'local' }]);
    const lock = (runId: string) => holdOutput(storage, runId, 'aws-lambda', STARTED + 4 * MINUTE);
    // Its CLI holds the output: the CLI's to finish.
    await lock(A);
    expect((await closer(storage, STARTED + 5 * MINUTE, true).run()).closed).toEqual([]);
    // The output taken by B (A's lock lapsed): B's start closes A, or hands A's closing on to here.
    await lock(B);
    const taken = await closer(storage, STARTED + 6 * MINUTE, false).run();
    expect(taken.closed.map((c) => [c.manifest.run_id, c.manifest.counts.reports_failed])).toEqual([[A, 1]]);
  });
});

describe('closeRuns and a start whose campaign listing was handed on', () => {
  async function starting(handedOnAt?: number, driver: RunRecord['driver'] = 'queues') {
    const storage = new LocalStorage(await tempDir('close-starting'));
    const record = runRecord({
      run_id: A,
      driver,
      campaign_ids: [],
      starting: true,
      fatal: { message: 'the run was interrupted while it started, before it listed the campaigns' },
    });
    await storage.put(STATE_KEYS.runRecord(A), encodeRecord(record));
    if (handedOnAt !== undefined)
      await storage.put(
        STATE_KEYS.listingHandedOn(A),
        encodeRecord({ handed_on_at: new Date(handedOnAt).toISOString() }),
      );
    return storage;
  }

  it('leaves it while a delivery may still be listing, and closes it failed once the listing is silent past the grace', async () => {
    // Handed on 20 minutes in: start-run's own grace has long passed, the listing's has not.
    const storage = await starting(STARTED + 20 * MINUTE);
    expect(20 * MINUTE).toBeGreaterThan(RUN_START_GRACE_MS);
    expect((await closer(storage, STARTED + 30 * MINUTE, true).run()).closed).toEqual([]);
    const silent = STARTED + 20 * MINUTE + LISTING_HANDED_ON_GRACE_MS + 2 * MINUTE;
    const late = await closer(storage, silent, true).run();
    expect(late.closed.map((c) => [c.manifest.status, c.unfinished])).toEqual([['failed', true]]);
  });

  it("leaves a CLI's start alone past start-run's grace while its CLI holds the output (a long listing)", async () => {
    const storage = await starting(undefined, 'local');
    const lock = (runId: string) => holdOutput(storage, runId, '4242@runner', STARTED);
    await lock(A);
    expect((await closer(storage, STARTED + 20 * MINUTE, true).run()).closed).toEqual([]);
    // Once another run holds the output, the CLI lost it: its start is closed failed.
    await lock(B);
    const late = await closer(storage, STARTED + 21 * MINUTE, true).run();
    expect(late.closed.map((c) => c.manifest.status)).toEqual(['failed']);
  });

  it('closes a start that never handed on once start-run cannot be alive, as before', async () => {
    const storage = await starting();
    expect((await closer(storage, STARTED + 4 * MINUTE, true).run()).closed).toEqual([]);
    const late = await closer(storage, STARTED + 7 * MINUTE, true).run();
    expect(late.closed.map((c) => c.manifest.status)).toEqual(['failed']);
  });
});
