/**
 * Closing a run in steps: the closing record in pieces, a publish that records each output and
 * resumes, a finisher that hands on when its time is up, the closing lease, and jobs deferred
 * when a run's deadline cuts it while its work is still queued.
 */
import { describe, expect, it } from 'vitest';
import { FUNCTION_SIZES } from '../../../../infra/function-sizes.js';
import { appendReportRows } from '../../../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../../../shared/export/format/table-buffer.js';
import { rawLine } from '../../../../shared/export/raw-lines.js';
import { closeRuns } from '../../../../shared/export/run/close-runs.js';
import { readClosing, startClosing, writeClosingPieces } from '../../../../shared/export/run/closing.js';
import type { ExportDeps } from '../../../../shared/export/run/context.js';
import { finishRun } from '../../../../shared/export/run/finish-run.js';
import { DEFAULT_MAX_FILE_BYTES, PUBLISH_CONCURRENCY } from '../../../../shared/export/run/publish.js';
import {
  finisherLimits,
  HandedOn,
  OUTPUT_WORST_MS,
  outputInFlightMs,
  PUBLISH_IN_FLIGHT_WORST_MS,
  RECOVERY_OUTPUT_BYTES,
  RECOVERY_STOP_MS,
  recoveryLimits,
} from '../../../../shared/export/run/publish-closing.js';
import { recordsInStorage } from '../../../../shared/export/run/run-records.js';
import { stageStep } from '../../../../shared/export/run/staging.js';
import { MAX_TIMEOUT_SHARE } from '../../../../shared/export/run/time-budget.js';
import { takeClosingLease } from '../../../../shared/export/state/closing-lease.js';
import { loadCampaignState, planJobs } from '../../../../shared/export/state/incremental.js';
import type { Manifest } from '../../../../shared/export/state/manifest.js';
import { encodeRecord, type FileEntry, type UnitSummary } from '../../../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import type { Storage } from '../../../../shared/storage/storage.js';
import { tempDir } from '../../../helpers/export.js';
import { realisticReports } from '../../../helpers/realistic-reports.js';
import { planRecord, runRecord, TEST_RUN_ID } from '../../../helpers/records.js';

const RUN = TEST_RUN_ID;
const DT = '2026-11-22';
const CAMPAIGNS = [1, 2, 3];
const UNITS_PER_CAMPAIGN = 3;
const JOBS_PER_UNIT = 4;
const EXPORTED_AT = new Date('2026-11-22T03:20:00Z');
/** Small enough that each table's staged files make several outputs. */
const MAX_FILE_BYTES = 20_000;
const NO_REQUESTS = { total: 0, retried: 0, by_status: {} };

const jobIdOf = (campaign: number, unit: number, i: number) => campaign * 1000 + unit * JOBS_PER_UNIT + i;

/**
 * Stores a run of CAMPAIGNS × UNITS_PER_CAMPAIGN units of realistic reports as its steps leave
 * it; `reported(campaign, unit)` false leaves a unit without its summary (never delivered).
 */
async function storeRun(
  storage: Storage,
  reported: (campaign: number, unit: number) => boolean = () => true,
): Promise<void> {
  const reports = realisticReports(11);
  await storage.put(
    STATE_KEYS.runRecord(RUN),
    encodeRecord(runRecord({ campaign_ids: CAMPAIGNS, mode: 'full' })),
  );
  for (const campaign of CAMPAIGNS) {
    const units: string[] = [];
    const fetch: { job_id: number; fp: string }[] = [];
    for (let u = 0; u < UNITS_PER_CAMPAIGN; u++) {
      const name = `c${campaign}-u${u}`;
      units.push(name);
      const rows = new TableBuffer();
      const lines = new JsonLinesBuffer();
      const jobs: UnitSummary['jobs'] = {};
      for (let i = 0; i < JOBS_PER_UNIT; i++) {
        const jobId = jobIdOf(campaign, u, i);
        fetch.push({ job_id: jobId, fp: `fp${jobId}` });
        jobs[jobId] = { fp: `fp${jobId}`, outcome: 'exported' };
        const report = reports.report(jobId, campaign);
        appendReportRows(
          rows,
          report,
          { campaignId: campaign, jobId },
          { runId: RUN, exportedAt: EXPORTED_AT },
        );
        lines.add(rawLine(RUN, EXPORTED_AT.toISOString(), report, { campaign_id: campaign, job_id: jobId }));
      }
      if (!reported(campaign, u)) continue;
      const staged = await stageStep(storage, RUN, 'reports', `${name}-a1`, rows, lines);
      const summary: UnitSummary = {
        unit: name,
        campaign_id: campaign,
        attempt: 1,
        jobs,
        staged,
        requests: { total: JOBS_PER_UNIT, retried: 0, by_status: { '200': JOBS_PER_UNIT } },
      };
      await storage.put(STATE_KEYS.unit(RUN, name), encodeRecord(summary));
    }
    const plan = planRecord({
      campaign_id: campaign,
      jobs: fetch.length,
      units,
      fetch,
      unit_size: JOBS_PER_UNIT,
      requests: { total: 1, retried: 0, by_status: { '200': 1 } },
    });
    await storage.put(STATE_KEYS.plan(RUN, campaign), encodeRecord(plan));
  }
}

/** A storage that counts the outputs it streams, by key. */
function countingStreams(storage: Storage): { storage: Storage; streamed: string[] } {
  const streamed: string[] = [];
  const counted: Storage = {
    location: storage.location,
    put: (key, body, options) => storage.put(key, body, options),
    get: (key) => storage.get(key),
    getStream: (key) => storage.getStream(key),
    list: (prefix) => storage.list(prefix),
    delete: (keys) => storage.delete(keys),
    stats: () => storage.stats(),
    putStream: (key, chunks, options) => {
      streamed.push(key);
      return storage.putStream(key, chunks, options);
    },
  };
  return { storage: counted, streamed };
}

/** Finisher dependencies on a clock that the test moves. */
function finisher(storage: Storage, clock: { now: number }): ExportDeps {
  return {
    api: () => {
      throw new Error('closing a run sends no API request');
    },
    storage,
    log: silentLog,
    now: () => new Date(clock.now),
  };
}

const announce = async () => {};
const publishOptions = { maxFileBytes: MAX_FILE_BYTES };

async function bytesOf(storage: Storage, files: readonly FileEntry[]): Promise<Map<string, string>> {
  const bytes = new Map<string, string>();
  for (const file of files)
    bytes.set(file.key, Buffer.from((await storage.get(file.key))!.body).toString('base64'));
  return bytes;
}

describe('closing a run in steps', () => {
  it('hands on after each output and ends with the very manifest and files of one uninterrupted close, each output written once', async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const whole = new LocalStorage(await tempDir('closing-whole'));
    await storeRun(whole);
    const once = await finishRun(finisher(whole, clock), RUN, {
      force: false,
      announce,
      publish: publishOptions,
    });

    const stepped = new LocalStorage(await tempDir('closing-stepped'));
    await storeRun(stepped);
    const { storage, streamed } = countingStreams(stepped);
    let looks = 0;
    let manifest: Manifest | undefined;
    for (; looks < 100 && !manifest; looks++) {
      // Each look's time is up at once: it writes the one output a look always writes, then hands on.
      try {
        manifest = await finishRun(finisher(storage, clock), RUN, {
          force: false,
          announce,
          publish: publishOptions,
          handOnAt: clock.now,
          leaseMs: 60_000,
        });
      } catch (error) {
        if (!(error instanceof HandedOn)) throw error;
      }
    }

    expect(once?.files.length).toBeGreaterThan(10);
    expect(manifest).toEqual(once);
    // A look per output, and one for what follows the publish: the look that wrote the last
    // output had no time left for it.
    expect(looks).toBe(once!.files.length + 1);
    expect(streamed.sort()).toEqual(once!.files.map((f) => f.key).sort());
    expect(await bytesOf(stepped, manifest!.files)).toEqual(await bytesOf(whole, once!.files));
  });

  it("starts an output only if it can end within half finish-run's timeout", async () => {
    const timeoutMs = FUNCTION_SIZES['finish-run'].timeoutSeconds * 1000;
    /** Each output takes this much of the look's time. */
    const outputMs = 40_000;
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const stored: Storage = new LocalStorage(await tempDir('closing-timed'));
    await storeRun(stored);
    const startedAt = clock.now;
    const starts: number[] = [];
    const timed: Storage = {
      ...countingStreams(stored).storage,
      putStream: (key, chunks, options) => {
        starts.push(clock.now - startedAt);
        clock.now += outputMs;
        return stored.putStream(key, chunks, options);
      },
    };
    const limits = finisherLimits(startedAt, timeoutMs);

    const look = finishRun(finisher(timed, clock), RUN, {
      force: false,
      announce,
      publish: publishOptions,
      ...limits,
    });

    await expect(look).rejects.toBeInstanceOf(HandedOn);
    // finish-run's 900 s: it must end by 440 s (half, less its wrap-up); an output starts only if
    // it can end by then with another beside it. These are small: they start until near the end.
    const endBy = limits.endBy! - startedAt;
    expect(endBy).toBe(440_000);
    for (const at of starts) expect(at + outputInFlightMs(MAX_FILE_BYTES)).toBeLessThanOrEqual(endBy);
    // And it did not stop early: the next would have started at the clock that ended the last.
    expect(Math.max(...starts) + outputMs + outputInFlightMs(MAX_FILE_BYTES)).toBeGreaterThan(endBy);
    // A full output, 256 MB of staged input, may take 340 s beside another: none starts after 100 s.
    expect(endBy - outputInFlightMs(DEFAULT_MAX_FILE_BYTES)).toBe(100_000);
    expect(100_000 + PUBLISH_IN_FLIGHT_WORST_MS).toBeLessThanOrEqual(MAX_TIMEOUT_SHARE * timeoutMs);
  });

  it("leaves outputs too large for start-run's recovery to the next finisher, which ends with the manifest of one close", async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const whole = new LocalStorage(await tempDir('closing-recovery-whole'));
    await storeRun(whole);
    const once = await finishRun(finisher(whole, clock), RUN, {
      force: false,
      announce,
      publish: publishOptions,
    });
    const stepped = new LocalStorage(await tempDir('closing-recovery'));
    await storeRun(stepped);
    const { storage, streamed } = countingStreams(stepped);
    const limits = recoveryLimits(clock.now, 300_000);

    // Every output here is over 1 KB of staged input: none is started, the closing is frozen.
    const recovery = finishRun(finisher(storage, clock), RUN, {
      force: true,
      announce,
      publish: publishOptions,
      ...limits,
      maxOutputBytes: 1_000,
    });
    await expect(recovery).rejects.toBeInstanceOf(HandedOn);
    expect(streamed).toEqual([]);
    expect(await readClosing(finisher(stepped, clock), RUN)).toBeDefined();
    // With start-run's own cap (16 MB) they all fit, and the next finisher closes the run.
    const next = await finishRun(finisher(storage, clock), RUN, {
      force: true,
      announce,
      publish: publishOptions,
      ...limits,
    });
    expect(next).toEqual(once);

    // start-run's 300 s: its recovery starts no output after 30 s, and the two it may still be
    // writing (16 MB each, at half finish-run's CPU) end within a quarter of its timeout, which
    // leaves its own run's start the rest of its half.
    expect(limits.handOnAt - clock.now).toBe(RECOVERY_STOP_MS);
    const outputMsAtHalfTheCpu = (2 * OUTPUT_WORST_MS * RECOVERY_OUTPUT_BYTES) / DEFAULT_MAX_FILE_BYTES;
    expect(RECOVERY_STOP_MS + PUBLISH_CONCURRENCY * outputMsAtHalfTheCpu).toBeLessThanOrEqual(0.25 * 300_000);
  });

  it("gives up freezing a closing that outlasts start-run's recovery, and finish-run then closes the run as one close does", async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const whole = new LocalStorage(await tempDir('closing-freeze-whole'));
    await storeRun(whole);
    const once = await finishRun(finisher(whole, clock), RUN, {
      force: false,
      announce,
      publish: publishOptions,
    });
    const stepped = new LocalStorage(await tempDir('closing-freeze'));
    await storeRun(stepped);
    // A slow store: each unit record takes a fifth of the recovery's time to read, so a
    // campaign's three take 60% of it (a run of ~1M reports takes 60-80 s at start-run's CPU
    // and S3's latency: BENCHMARKS.md, freeze).
    const unitReadMs = RECOVERY_STOP_MS / 5;
    const unitReads: number[] = [];
    const startedAt = clock.now;
    const slow: Storage = {
      ...countingStreams(stepped).storage,
      get: (key) => {
        if (key.includes('/units/')) {
          unitReads.push(clock.now - startedAt);
          clock.now += unitReadMs;
        }
        return stepped.get(key);
      },
    };
    const recovery = finishRun(finisher(slow, clock), RUN, {
      force: true,
      announce,
      publish: publishOptions,
      ...recoveryLimits(startedAt, 300_000),
    });

    await expect(recovery).rejects.toBeInstanceOf(HandedOn);
    // No closing record: the run is left whole to finish-run, which freezes it itself.
    expect(await readClosing(finisher(stepped, clock), RUN)).toBeUndefined();
    // It read no further campaign once RECOVERY_STOP_MS had passed: the two campaigns it read
    // (the second one begun before the stop), not the third.
    expect(unitReads).toHaveLength(2 * UNITS_PER_CAMPAIGN);
    expect(unitReads.filter((at) => at >= RECOVERY_STOP_MS).length).toBeLessThan(UNITS_PER_CAMPAIGN);
    const next = await finishRun(finisher(stepped, clock), RUN, {
      force: true,
      announce,
      publish: publishOptions,
      ...finisherLimits(clock.now, 900_000),
    });
    // The same manifest and files, frozen later (the slow reads moved the clock).
    expect(next && { ...next, finished_at: once?.finished_at }).toEqual(once);
  });

  it('freezes the closing in pieces: a small record, and a finisher that loses the race drops its own pieces', async () => {
    const storage = new LocalStorage(await tempDir('closing-pieces'));
    await storeRun(storage);
    const deps = { storage, random: Math.random };
    const source = (await recordsInStorage(deps, RUN))!;
    const first = await writeClosingPieces(deps, source, EXPORTED_AT);
    const second = await writeClosingPieces(deps, source, EXPORTED_AT);
    const piecesOf = async (token: string) => {
      const keys: string[] = [];
      for await (const key of storage.list(STATE_KEYS.closingPieces(RUN, token))) keys.push(key);
      return keys;
    };
    expect(await piecesOf(second.pieces.token)).not.toEqual([]);

    expect(await startClosing(deps, first)).toEqual(first);
    expect(await startClosing(deps, second)).toEqual(first);

    expect(await piecesOf(second.pieces.token)).toEqual([]);
    expect(await piecesOf(first.pieces.token)).not.toEqual([]);
    const record = (await storage.get(STATE_KEYS.closing(RUN)))!.body;
    expect(record.byteLength).toBeLessThan(4_000);
    expect(first.manifest.counts.reports_exported).toBe(
      CAMPAIGNS.length * UNITS_PER_CAMPAIGN * JOBS_PER_UNIT,
    );
  });

  it('lets one finisher at a time work on a closing, and another take it over once the lease has expired', async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const staged = new LocalStorage(await tempDir('closing-lease'));
    await storeRun(staged);
    const { storage, streamed } = countingStreams(staged);
    // Another finisher froze the closing and holds the lease for 15 minutes.
    const source = (await recordsInStorage({ storage }, RUN))!;
    await startClosing({ storage }, await writeClosingPieces({ storage }, source, EXPORTED_AT));
    const held = await takeClosingLease(storage, RUN, 'another', new Date(clock.now), 15 * 60_000);
    expect(held).toBeDefined();

    const blocked = await finishRun(finisher(storage, clock), RUN, {
      force: true,
      announce,
      leaseMs: 60_000,
    });
    expect(blocked).toBeUndefined();
    expect(streamed).toEqual([]);

    clock.now += 17 * 60_000; // The lease and the clock allowance have passed: its holder is gone.
    const closed = await finishRun(finisher(storage, clock), RUN, { force: true, announce, leaseMs: 60_000 });
    expect(closed?.status).toBe('succeeded');
    expect(streamed.length).toBe(closed!.files.length);
  });

  it('closes a closing record written before 0.5 (files and outcomes inline) as it stands', async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const storage = new LocalStorage(await tempDir('closing-inline'));
    await storeRun(storage);
    const source = (await recordsInStorage({ storage }, RUN))!;
    const pieced = await writeClosingPieces({ storage }, source, EXPORTED_AT);
    // The same closing as an older release wrote it.
    const staged: FileEntry[] = [];
    for await (const key of storage.list(STATE_KEYS.unitsPrefix(RUN))) {
      staged.push(...JSON.parse(Buffer.from((await storage.get(key))!.body).toString()).staged);
    }
    const outcomes = CAMPAIGNS.map((campaign_id) => ({
      campaign_id,
      jobs: Array.from({ length: UNITS_PER_CAMPAIGN * JOBS_PER_UNIT }, (_, k) => {
        const job_id = jobIdOf(campaign_id, Math.floor(k / JOBS_PER_UNIT), k % JOBS_PER_UNIT);
        return { job_id, fp: `fp${job_id}`, outcome: 'exported' as const };
      }),
    }));
    await storage.put(
      STATE_KEYS.closing(RUN),
      encodeRecord({ manifest: pieced.manifest, staged, outcomes, driver: 'queues' }),
    );
    expect(await readClosing({ storage }, RUN)).toMatchObject({ staged, outcomes });

    const manifest = await finishRun(finisher(storage, clock), RUN, { force: true, announce });

    expect(manifest?.counts.reports_exported).toBe(36);
    expect(
      manifest?.files.reduce(
        (n, f) => n + (f.table_or_entity === 'reports' && f.format === 'parquet' ? f.rows : 0),
        0,
      ),
    ).toBe(36);
    expect((await loadCampaignState(storage, 2)).state.jobs[jobIdOf(2, 1, 1)]?.outcome).toBe('exported');
  });
});

describe('a finish-run look past its hand-on time', () => {
  it('takes up no further run, and leaves it to the next look', async () => {
    const clock = { now: Date.parse('2026-11-22T03:20:00Z') };
    const storage = new LocalStorage(await tempDir('closing-two-runs'));
    // Two runs whose start failed: complete, each closed in one go (nothing to publish).
    const runs = ['20261122T031500Z-aaaaaa', '20261122T031600Z-bbbbbb'];
    const fatal = { message: 'API key expired (API_KEY_EXPIRED)' };
    for (const run_id of runs)
      await storage.put(
        STATE_KEYS.runRecord(run_id),
        encodeRecord(runRecord({ run_id, campaign_ids: [], fatal })),
      );
    const look = (announce: () => Promise<void>) =>
      closeRuns(finisher(storage, clock), {
        now: clock.now,
        deadlineMs: 6 * 3600_000,
        queuesDrained: async () => true,
        announce,
        ...finisherLimits(clock.now, 900_000),
      });

    // Closing the first run takes the look past its hand-on time.
    const first = await look(async () => {
      clock.now += 200_000;
    });
    const second = await look(async () => {});

    expect(first.closed.map((c) => c.manifest.run_id)).toEqual([runs[0]]);
    expect(first.handedOn).toEqual([runs[1]]);
    expect(second.closed.map((c) => c.manifest.run_id)).toEqual([runs[1]]);
  });
});

describe('a run cut by its deadline', () => {
  const deadlineMs = 6 * 3_600_000;
  const overdue = Date.parse('2026-11-22T03:15:00Z') + deadlineMs + 60_000;
  /** Units c1-u2 and c3-u0 never reported. */
  const reported = (campaign: number, unit: number) =>
    !(campaign === 1 && unit === 2) && !(campaign === 3 && unit === 0);

  it('defers the jobs it never reached while its work is still queued, and the next run asks for them', async () => {
    const storage = new LocalStorage(await tempDir('deadline-queued'));
    await storeRun(storage, reported);
    const result = await closeRuns(finisher(storage, { now: overdue }), {
      now: overdue,
      deadlineMs,
      queuesDrained: async () => false,
      announce,
    });

    const manifest = result.closed[0]?.manifest;
    expect(result.closed[0]?.unfinished).toBe(true);
    expect(manifest?.counts).toMatchObject({ reports_exported: 28, reports_deferred: 8, reports_failed: 0 });
    expect(manifest?.status).toBe('succeeded');
    const { state } = await loadCampaignState(storage, 1);
    expect(state.jobs[jobIdOf(1, 2, 0)]?.outcome).toBe('deferred');
    const listed = [0, 1, 2].flatMap((u) =>
      [0, 1, 2, 3].map((i) => ({ job_id: jobIdOf(1, u, i), fp: `fp${jobIdOf(1, u, i)}` })),
    );
    const next = planJobs(state, listed, 'incremental');
    expect(next.fetch.map((j) => j.job_id)).toEqual([0, 1, 2, 3].map((i) => jobIdOf(1, 2, i)));
  });

  it('counts them failed when its queues are drained (its messages were lost)', async () => {
    const storage = new LocalStorage(await tempDir('deadline-drained'));
    await storeRun(storage, reported);
    const result = await closeRuns(finisher(storage, { now: overdue }), {
      now: overdue,
      deadlineMs,
      queuesDrained: async () => true,
      announce,
    });

    const manifest = result.closed[0]?.manifest;
    expect(manifest?.counts).toMatchObject({ reports_exported: 28, reports_failed: 8 });
    expect(manifest?.counts.reports_deferred).toBeUndefined();
    expect(manifest?.status).toBe('partial');
    expect(await storage.get(manifestKey(DT, RUN))).toBeDefined();
  });
});

// Requests are counted as before: the plan's and every unit's, once.
it('counts the requests of every plan and unit once in a closing built from pieces', async () => {
  const storage = new LocalStorage(await tempDir('closing-requests'));
  await storeRun(storage);
  const source = (await recordsInStorage({ storage }, RUN))!;
  const closing = await writeClosingPieces({ storage }, { ...source, unrecorded: NO_REQUESTS }, EXPORTED_AT);
  expect(closing.manifest.requests.total).toBe(CAMPAIGNS.length * (1 + UNITS_PER_CAMPAIGN * JOBS_PER_UNIT));
});
