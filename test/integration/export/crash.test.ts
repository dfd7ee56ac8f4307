/**
 * Runs that die: stopped at precise steps (a storage that dies at a chosen call, so what is
 * left is exactly what a killed process leaves), and a CLI process killed with SIGKILL. After
 * the next run, the lake must hold every fetched report in a run with a manifest, no row of a
 * run without one, no job twice in one run, nothing in staging, and no job counted unchanged
 * without published rows.
 */
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import { OutputLockedError } from '../../../shared/errors.js';
import { type LocalRunOptions, runExport } from '../../../shared/export/run/local-run.js';
import { CampaignStateSchema } from '../../../shared/export/state/incremental.js';
import { type Manifest, ManifestSchema } from '../../../shared/export/state/manifest.js';
import { RESCUED_COLUMN, type SchemaContract } from '../../../shared/export/tables.js';
import { RUNS_ROOT, STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { atNth, Crash, crashingStorage, type StorageCall } from '../../helpers/crash-storage.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { tempDir } from '../../helpers/export.js';
import { openRunKeys } from '../../helpers/records.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../simulator/index.js';

const DATASET: SimulatorOptions = {
  seed: 23,
  campaigns: 2,
  jobsPerCampaign: 30,
  reportSize: 'tiny',
  unpublishedShare: 0.1,
};
/** Small units, so that a run has several and can die between them. */
const UNIT_SIZE = 10;
/** The next run starts later than the lock of a run that died in this process lasts. */
const AFTER_LOCK_EXPIRY_MS = 5 * 60_000;

const processExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const readJson = async (storage: Storage, key: string): Promise<unknown> =>
  JSON.parse(Buffer.from((await storage.get(key))?.body ?? []).toString('utf8'));

async function keys(storage: Storage, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const key of storage.list(prefix)) found.push(key);
  return found;
}

describe('a run that dies', () => {
  let simulator: Simulator;
  let db: DuckDb;
  /** The jobs a run that nothing stopped exports. */
  let exportable: number[];

  const deps = (out: string, options: { storage?: (s: Storage) => Storage; clockMs?: number } = {}) => {
    const base = cliDeps({
      baseUrl: simulator.url,
      apiKey: simulator.keys.valid,
      out,
      concurrency: 4,
      maxRate: 10_000,
      log: silentLog,
    });
    return {
      ...base,
      storage: options.storage ? options.storage(base.storage) : base.storage,
      now: () => new Date(Date.now() + (options.clockMs ?? 0)),
    };
  };
  const run = (
    out: string,
    options: Parameters<typeof deps>[1] = {},
    runOptions: Partial<LocalRunOptions> = {},
  ) => runExport(deps(out, options), { mode: 'incremental', unitSize: UNIT_SIZE, ...runOptions });

  /** What the lake holds: manifests, report rows (run_id, job_id), what is staged, the state. */
  async function lake(out: string) {
    const storage = new LocalStorage(out);
    const manifests: Manifest[] = [];
    for (const key of await keys(storage, `${RUNS_ROOT}/`)) {
      manifests.push(ManifestSchema.parse(await readJson(storage, key)));
    }
    const glob = join(out, 'parquet', 'reports', '*', '*.parquet').replaceAll("'", "''");
    const rows = (await keys(storage, 'parquet/reports/')).length
      ? await db.all(`SELECT run_id, CAST(job_id AS INTEGER) AS job_id FROM read_parquet('${glob}')`)
      : [];
    const exportedInState: number[] = [];
    for (const key of await keys(storage, 'state/campaigns/')) {
      const state = CampaignStateSchema.parse(await readJson(storage, key));
      for (const [id, job] of Object.entries(state.jobs))
        if (job.outcome === 'exported') exportedInState.push(Number(id));
    }
    return {
      manifests,
      rows: rows.map((r) => ({ run_id: String(r.run_id), job_id: Number(r.job_id) })),
      staged: await keys(storage, STATE_KEYS.runsPrefix),
      exportedInState,
    };
  }

  /** The invariants a lake must hold after the run that follows a crash. */
  async function expectWhole(out: string) {
    const { manifests, rows, staged, exportedInState } = await lake(out);
    const published = new Set(manifests.filter((m) => m.status !== 'failed').map((m) => m.run_id));
    // No row belongs to a run without a manifest.
    expect(rows.filter((r) => !published.has(r.run_id))).toEqual([]);
    // No job has two rows in one run.
    const pairs = rows.map((r) => `${r.run_id}/${r.job_id}`);
    expect(pairs.length).toBe(new Set(pairs).size);
    // Every report a run fetched is in the lake, in a run with a manifest.
    expect([...new Set(rows.map((r) => r.job_id))].sort((a, b) => a - b)).toEqual(exportable);
    // Nothing is left in staging: closed runs keep only their tombstone.
    expect(openRunKeys(staged)).toEqual([]);
    // No job is "unchanged" next time unless its rows are published.
    const withRows = new Set(rows.map((r) => r.job_id));
    expect(exportedInState.filter((id) => !withRows.has(id))).toEqual([]);
    // Each manifest lists files that exist with the size it says.
    const storage = new LocalStorage(out);
    for (const m of manifests) {
      for (const f of m.files) expect((await storage.get(f.key))?.body.byteLength).toBe(f.bytes);
    }
    return { manifests, rows };
  }

  beforeAll(async () => {
    simulator = await startSimulator(DATASET);
    db = await openDuckDb();
    const clean = await tempDir('clean');
    await run(clean);
    exportable = [...new Set((await lake(clean)).rows.map((r) => r.job_id))].sort((a, b) => a - b);
    expect(exportable.length).toBeGreaterThan(20);
  });

  afterAll(async () => {
    await db?.close();
    await simulator?.close();
  });

  const crashPoints: [string, (call: StorageCall) => boolean, boolean][] = [
    ['during fetches (third unit)', atNth(3, (c) => c.op === 'put' && c.key.includes('/units/')), true],
    [
      'while writing the closing record',
      atNth(1, (c) => c.op === 'put' && c.key.endsWith('/closing.json')),
      true,
    ],
    ['during publish (third file)', atNth(3, (c) => c.op === 'putStream'), true],
    [
      'between the manifest and the state',
      atNth(1, (c) => c.op === 'put' && c.key.startsWith('state/campaigns/')),
      false,
    ],
    [
      'while clearing the staging area',
      atNth(1, (c) => c.op === 'delete' && c.key.startsWith('state/runs/')),
      false,
    ],
  ];

  /**
   * Runs of the core default (freeze) above; here an evolve run that dies, closed by an evolve
   * run, or by a freeze run (an output switched back): the dead run's files are published in
   * its own contract's tables, the next run's in its own. Its own predicates: they count calls.
   */
  const contractCases: [string, (call: StorageCall) => boolean, boolean, SchemaContract, SchemaContract][] = [
    [
      'during fetches (third unit)',
      atNth(3, (c) => c.op === 'put' && c.key.includes('/units/')),
      true,
      'evolve',
      'evolve',
    ],
    ['during publish (third file)', atNth(3, (c) => c.op === 'putStream'), true, 'evolve', 'freeze'],
  ];
  const cases = [
    ...crashPoints.map(([where, when, recovered]) => [where, when, recovered, 'freeze', 'freeze'] as const),
    ...contractCases,
  ].map(([where, crashWhen, recovered, diedUnder, nextUnder]) => ({
    where,
    crashWhen,
    recovered,
    diedUnder,
    nextUnder,
  }));

  it.each(cases)(
    'loses and doubles nothing when it dies $where (died under $diedUnder, closed under $nextUnder)',
    async ({ crashWhen, recovered, diedUnder, nextUnder }) => {
      const out = await tempDir('crash');
      const died = run(out, { storage: (s) => crashingStorage(s, crashWhen) }, { schemaContract: diedUnder });
      await expect(died).rejects.toBeInstanceOf(Crash);

      const next = await run(out, { clockMs: AFTER_LOCK_EXPIRY_MS }, { schemaContract: nextUnder });

      const { manifests } = await expectWhole(out);
      expect(next.status).not.toBe('failed');
      const closed = manifests.find((m) => m.run_id !== next.run_id);
      expect(closed).toBeDefined();
      // Closed by the next run when it died before its manifest; it had closed itself otherwise.
      expect(closed?.recovered_by).toBe(recovered ? next.run_id : undefined);
      // The killed run's work is kept: the next run fetched only what the killed one had not exported.
      expect((closed?.counts.reports_exported ?? 0) + next.counts.reports_exported).toBe(exportable.length);
      // Each run's report files are of its own contract's table: `_rescued` only in an evolve run's.
      for (const [manifest, contract] of [
        [closed!, diedUnder],
        [next, nextUnder],
      ] as const) {
        const file = manifest.files.find((f) => f.table_or_entity === 'reports' && f.format === 'parquet');
        if (manifest.counts.reports_exported === 0) continue;
        const path = join(out, file!.key).replaceAll("'", "''");
        const columns = await db.all(`SELECT name FROM parquet_schema('${path}')`);
        expect(
          columns.some((c) => c.name === RESCUED_COLUMN),
          `${manifest.run_id} (${contract})`,
        ).toBe(contract === 'evolve');
      }
    },
  );

  it('refuses a second run into the same output at once, before any request, and lets it wait', async () => {
    const out = await tempDir('two-runs');
    simulator.setRateLimit({ ratePerSecond: 40, burst: 1 });
    try {
      const first = run(out, {}, { mode: 'full' });
      // Wait until the first run holds the lock.
      while (!(await new LocalStorage(out).get(STATE_KEYS.lock))) await sleep(10);
      const requestsBefore = simulator.stats.total;

      await expect(run(out, {}, { mode: 'full' })).rejects.toBeInstanceOf(OutputLockedError);
      expect(simulator.stats.total - requestsBefore).toBeLessThanOrEqual(5); // the first run's, not the second's
      const waited = run(out, {}, { mode: 'full', waitForLockMs: 60_000 });

      const [a, b] = await Promise.all([first, waited]);
      expect(b.started_at >= a.finished_at).toBe(true); // one after the other, not interleaved
      const { rows } = await expectWhole(out);
      expect(rows.length).toBe(2 * exportable.length);
    } finally {
      simulator.setRateLimit(null);
    }
  });

  it('takes over after a CLI process killed with SIGKILL in the middle of its fetches', async () => {
    const out = await tempDir('sigkill');
    const env = {
      ...process.env,
      INTEGRATION_API_BASE_URL: simulator.url,
      INTEGRATION_API_KEY: simulator.keys.valid,
    };
    const args = [
      'tsx',
      'functions/cli/export.ts',
      '--out',
      out,
      '--unit-size',
      String(UNIT_SIZE),
      '--max-rate',
      '30',
    ];
    const child = spawn('npx', args, { env, detached: true, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    // Kill it once it has finished some units and before it closes (it needs ~2 s at 30 req/s,
    // after tsx's start, which a loaded machine can stretch past 15 s: look for up to a minute).
    const units = join(out, 'state', 'runs');
    for (let i = 0; i < 2_400; i++) {
      const runs = await readdir(units).catch(() => [] as string[]);
      const done = runs[0] ? await readdir(join(units, runs[0], 'units')).catch(() => [] as string[]) : [];
      if (done.length >= 2) break;
      await sleep(25);
    }
    process.kill(-child.pid!, 'SIGKILL'); // the whole group: npx and the node process under it
    await exited;
    expect(await readdir(join(out, 'runs')).catch(() => [])).toEqual([]); // it died before closing

    // Same host, holder gone: the lock is free as soon as the process is (no waiting for its
    // expiry). A killed process lingers a moment until it is reaped: wait for that, not more.
    const lock = (await readJson(new LocalStorage(out), STATE_KEYS.lock)) as { owner: string };
    const pid = Number(lock.owner.split('@')[0]);
    for (let i = 0; i < 200 && processExists(pid); i++) await sleep(25);
    const next = await run(out);

    const { manifests } = await expectWhole(out);
    const killed = manifests.find((m) => m.run_id !== next.run_id);
    expect(killed).toMatchObject({ recovered_by: next.run_id, status: 'partial' });
    expect(killed?.counts.reports_exported).toBeGreaterThan(0);
  });
});
