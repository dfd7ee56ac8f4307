import { describe, expect, it } from 'vitest';
import { finishRun } from '../../../../shared/export/run/finish-run.js';
import { loadCampaignState } from '../../../../shared/export/state/incremental.js';
import { manifestKey, STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';
import { storeRecordedRun, TEST_RUN_ID } from '../../../helpers/records.js';

const RUN = TEST_RUN_ID;
const none = { total: 1, retried: 0, by_status: { '200': 1 } };

async function storageWithRun(): Promise<LocalStorage> {
  const storage = new LocalStorage(await tempDir('finish'));
  await storeRecordedRun(storage, none);
  return storage;
}

const depsOf = (storage: LocalStorage) => ({
  api: () => {
    throw new Error('finishing a run sends no API request');
  },
  storage,
  log: silentLog,
  now: () => new Date('2026-11-22T03:20:00Z'),
});

describe('finishRun', () => {
  it('leaves a queue-carried run to finish-run when it cannot announce it (a CLI recovering it)', async () => {
    const storage = await storageWithRun();

    const closed = await finishRun(depsOf(storage), RUN, { force: true });

    expect(closed).toBeUndefined();
    // Published and recorded, but not closed: finish-run takes it up from its closing record.
    expect(await storage.get(manifestKey('2026-11-22', RUN))).toBeDefined();
    expect((await loadCampaignState(storage, 1)).state.jobs[11]?.outcome).toBe('exported');
    expect(await storage.get(STATE_KEYS.closing(RUN))).toBeDefined();
    expect(await storage.get(STATE_KEYS.closed(RUN))).toBeUndefined();
    const announced: string[] = [];
    const again = await finishRun(depsOf(storage), RUN, {
      force: true,
      announce: async (m) => void announced.push(m.run_id),
    });
    expect(again?.run_id).toBe(RUN);
    expect(announced).toEqual([RUN]);
  });

  it('records the outcomes, writes the manifest and clears the run but for its tombstone and closing marker', async () => {
    const storage = await storageWithRun();
    const announced: string[] = [];
    const announce = async (m: { run_id: string }) => void announced.push(m.run_id);
    const manifest = await finishRun(depsOf(storage), RUN, { force: false, announce });
    expect(manifest?.status).toBe('succeeded');
    expect(announced).toEqual([RUN]);
    expect(await storage.get(manifestKey('2026-11-22', RUN))).toBeDefined();
    const { state } = await loadCampaignState(storage, 1);
    expect(state.jobs[11]).toEqual({ fp: 'a', outcome: 'exported', run_id: RUN });
    expect(state.jobs[12]?.outcome).toBe('not_ready');
    const left: string[] = [];
    for await (const key of storage.list(STATE_KEYS.runPrefix(RUN))) left.push(key);
    expect(left.sort()).toEqual([STATE_KEYS.closed(RUN), STATE_KEYS.closing(RUN)].sort());
  });

  it('keeps the run open when the announcement fails, so the next finisher announces it', async () => {
    const storage = await storageWithRun();
    const refused = finishRun(depsOf(storage), RUN, {
      force: false,
      announce: async () => {
        throw new Error('EventBridge refused the event');
      },
    });
    await expect(refused).rejects.toThrow('EventBridge refused');
    expect(await storage.get(STATE_KEYS.runRecord(RUN))).toBeDefined();

    const announced: string[] = [];
    const manifest = await finishRun(depsOf(storage), RUN, {
      force: false,
      announce: async (m) => {
        announced.push(m.run_id);
      },
    });
    expect(announced).toEqual([RUN]);
    expect(manifest?.counts.reports_exported).toBe(1);
    expect(await storage.get(STATE_KEYS.runRecord(RUN))).toBeUndefined();
  });
});
