import { describe, expect, it } from 'vitest';
import { STATE_KEYS } from '../../../../shared/export/layout.js';
import { hoursSinceFinishedRun } from '../../../../shared/export/state/heartbeat.js';
import { emptyCounts, type Manifest, type RunStatus } from '../../../../shared/export/state/manifest.js';

import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const T0 = Date.parse('2026-11-23T10:00:00Z');
const at = (hours: number) => new Date(T0 + hours * 3_600_000);

function manifest(status: RunStatus, finishedAt: Date): Manifest {
  return {
    run_id: '20261123T020000Z-abcdef',
    dt: '2026-11-23',
    mode: 'incremental',
    status,
    started_at: finishedAt.toISOString(),
    finished_at: finishedAt.toISOString(),
    counts: emptyCounts(),
    requests: { total: 0, retried: 0, by_status: {} },
    files: [],
  };
}

describe('hoursSinceFinishedRun', () => {
  it('counts from the first look while no run has finished, and from the last good run after', async () => {
    const storage = new LocalStorage(await tempDir('heartbeat'));
    expect(await hoursSinceFinishedRun(storage, at(0), [])).toBe(0);
    expect(await hoursSinceFinishedRun(storage, at(5), [])).toBe(5);
    // A failed run is no finished run: the clock keeps counting from the first look.
    expect(await hoursSinceFinishedRun(storage, at(6), [manifest('failed', at(6))])).toBe(6);
    expect(await hoursSinceFinishedRun(storage, at(7), [manifest('partial', at(6.5))])).toBe(0.5);
    expect(await hoursSinceFinishedRun(storage, at(9), [])).toBe(2.5);
    expect(
      await hoursSinceFinishedRun(storage, at(10), [
        manifest('succeeded', at(9.75)),
        manifest('succeeded', at(9.5)),
      ]),
    ).toBe(0.25);
  });

  it('never goes back to an older run, and writes only when something changed', async () => {
    const storage = new LocalStorage(await tempDir('heartbeat'));
    await hoursSinceFinishedRun(storage, at(1), [manifest('succeeded', at(1))]);
    const written = await storage.get(STATE_KEYS.heartbeat);
    // A run closed late (recovered) that finished before the last one does not move the clock back.
    expect(await hoursSinceFinishedRun(storage, at(2), [manifest('succeeded', at(0.5))])).toBe(1);
    expect((await storage.get(STATE_KEYS.heartbeat))?.etag).toBe(written?.etag);
    expect(JSON.parse(Buffer.from(written?.body ?? []).toString())).toEqual({
      first_seen_at: at(1).toISOString(),
      last_finished_at: at(1).toISOString(),
    });
  });
});
