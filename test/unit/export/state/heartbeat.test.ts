import { describe, expect, it } from 'vitest';
import type { DriftEntry } from '../../../../shared/export/schema-drift.js';
import { DRIFT_KEYS_REMEMBERED, lookBack } from '../../../../shared/export/state/heartbeat.js';
import { emptyCounts, type Manifest, type RunStatus } from '../../../../shared/export/state/manifest.js';
import { STATE_KEYS } from '../../../../shared/layout.js';

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

const hoursSinceFinishedRun = async (storage: LocalStorage, now: Date, closed: Manifest[]) =>
  (await lookBack(storage, now, closed)).hours;

describe('lookBack: hours since a run finished', () => {
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

describe('lookBack: drift no earlier run had', () => {
  let n = 0;
  const evolve = (drift: DriftEntry[]): Manifest => ({
    ...manifest('succeeded', at(1)),
    run_id: `20261123T0200${String(n++).padStart(2, '0')}Z-abcdef`,
    schema_contract: 'evolve',
    schema_drift: drift,
  });
  const entry = (path: string, kind: DriftEntry['kind'] = 'new_field', seen?: string[]): DriftEntry => ({
    path,
    kind,
    count: 1,
    reports: 1,
    first_job_id: 7,
    ...(seen && { seen }),
  });
  const fresh = async (storage: LocalStorage, ...runs: Manifest[]) => [
    ...(await lookBack(storage, at(2), runs)).newDrift.values(),
  ];

  it('counts an entry once, the first run that has it, and a new value of an enumeration again', async () => {
    const storage = new LocalStorage(await tempDir('heartbeat'));
    expect(
      await fresh(storage, evolve([entry('meta'), entry('job.job_status', 'unlisted_value', ['3'])])),
    ).toEqual([2]);
    // The same drift on the next runs: nothing new, the alarm stays quiet.
    expect(
      await fresh(storage, evolve([entry('meta'), entry('job.job_status', 'unlisted_value', ['3'])])),
    ).toEqual([0]);
    // A second unlisted value at the same path, and a new path, in two runs closed by one look.
    expect(
      await fresh(
        storage,
        evolve([entry('job.job_status', 'unlisted_value', ['3', '4'])]),
        evolve([entry('meta'), entry('scorecard')]),
      ),
    ).toEqual([1, 1]);
    // A freeze run has no drift to count; a run with none counts 0.
    expect(await fresh(storage, manifest('succeeded', at(2)), evolve([]))).toEqual([0]);
  });

  it(`remembers the newest ${DRIFT_KEYS_REMEMBERED} keys`, async () => {
    const storage = new LocalStorage(await tempDir('heartbeat'));
    const many = Array.from({ length: DRIFT_KEYS_REMEMBERED + 10 }, (_, i) => entry(`f${i}`));
    expect(await fresh(storage, evolve(many))).toEqual([DRIFT_KEYS_REMEMBERED + 10]);
    const kept = JSON.parse(Buffer.from((await storage.get(STATE_KEYS.heartbeat))?.body ?? []).toString());
    expect(kept.drift_seen).toHaveLength(DRIFT_KEYS_REMEMBERED);
    // The oldest were dropped: seen again, they count as new.
    expect(await fresh(storage, evolve([entry('f0'), entry(`f${DRIFT_KEYS_REMEMBERED + 9}`)]))).toEqual([1]);
  });
});
