/**
 * A format switch (a full run in the other format) that dies, taken up by the next run of either
 * format: the next run closes it first (in its own format, which it records), and only then
 * checks its own format against the output's. Afterwards the recorded format, the files and the
 * incremental state agree: every job the state counts exported is in the recorded format's
 * tables, and a run in the recorded format brings the tables back to every report.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import { ConfigError } from '../../../shared/errors.js';
import { type LocalRunOptions, runExport } from '../../../shared/export/run/local-run.js';
import { startRunStep } from '../../../shared/export/run/start-run.js';
import { CampaignStateSchema } from '../../../shared/export/state/incremental.js';
import type { TableFormat } from '../../../shared/export/state/records.js';
import { ICEBERG_ROOT, runIdOfStateKey, STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { atNth, Crash, crashingStorage, type StorageCall } from '../../helpers/crash-storage.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { tempDir } from '../../helpers/export.js';
import { readIcebergTable } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

/** Small units, so that a run has several and can die between them. */
const UNIT_SIZE = 10;
/** The next run starts later than the lock of a run that died in this process lasts. */
const AFTER_LOCK_EXPIRY_MS = 5 * 60_000;

const readJson = async (storage: Storage, key: string): Promise<unknown> =>
  JSON.parse(Buffer.from((await storage.get(key))?.body ?? []).toString('utf8'));

async function keys(storage: Storage, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const key of storage.list(prefix)) found.push(key);
  return found;
}

const other = (format: TableFormat): TableFormat => (format === 'hive' ? 'iceberg' : 'hive');
const sorted = (ids: Iterable<number>): number[] => [...new Set(ids)].sort((a, b) => a - b);

/** Where a switch can die, by the storage call it dies at (what a killed process leaves). */
const crashPoints: [string, () => (call: StorageCall) => boolean][] = [
  [
    'after its campaign listing, before any plan',
    () => atNth(1, (c) => c.op === 'put' && c.key.includes('/plans/')),
  ],
  ['during fetches (third unit)', () => atNth(3, (c) => c.op === 'put' && c.key.includes('/units/'))],
  ['during publish (third file)', () => atNth(3, (c) => c.op === 'putStream')],
  [
    'after the publish, before its manifest (Iceberg: before the commit)',
    () =>
      atNth(1, (c) => c.op === 'put' && (c.key.startsWith(`${ICEBERG_ROOT}/`) || c.key.startsWith('runs/'))),
  ],
  [
    'after its manifest, before the format is recorded',
    () => atNth(1, (c) => c.op === 'put' && c.key === STATE_KEYS.tableFormat),
  ],
  [
    'while the state forgets the earlier runs, before the format is recorded',
    () => atNth(2, (c) => c.op === 'put' && c.key.startsWith('state/campaigns/')),
  ],
  ['after the format is recorded, before its outcomes are saved', afterRecorded],
];

/** Dies at the first state write after the format is recorded. */
function afterRecorded(): (call: StorageCall) => boolean {
  let recorded = false;
  return (c) => {
    if (c.op === 'put' && c.key === STATE_KEYS.tableFormat) recorded = true;
    return recorded && c.op === 'put' && c.key.startsWith('state/campaigns/');
  };
}

describe('a format switch that dies', () => {
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
  const run = (out: string, options: Parameters<typeof deps>[1], runOptions: Partial<LocalRunOptions>) =>
    runExport(deps(out, options), { mode: 'incremental', unitSize: UNIT_SIZE, ...runOptions });

  /** The jobs in the reports table of `format`. */
  async function jobsIn(out: string, format: TableFormat): Promise<number[]> {
    const storage = new LocalStorage(out);
    if (format === 'iceberg') {
      if ((await keys(storage, `${ICEBERG_ROOT}/reports/metadata/`)).length === 0) return [];
      return sorted(
        (await readIcebergTable(join(out, ICEBERG_ROOT, 'reports'))).map((r) => Number(r.job_id)),
      );
    }
    if ((await keys(storage, 'parquet/reports/')).length === 0) return [];
    const glob = join(out, 'parquet', 'reports', '*', '*.parquet').replaceAll("'", "''");
    const rows = await db.all(
      `SELECT DISTINCT CAST(job_id AS INTEGER) AS job_id FROM read_parquet('${glob}')`,
    );
    return sorted(rows.map((r) => Number(r.job_id)));
  }

  /** The recorded format, and the jobs the incremental state counts exported. */
  async function recorded(out: string): Promise<{ format: TableFormat; exported: number[] }> {
    const storage = new LocalStorage(out);
    const format = ((await readJson(storage, STATE_KEYS.tableFormat)) as { table_format: TableFormat })
      .table_format;
    const exported: number[] = [];
    for (const key of await keys(storage, 'state/campaigns/')) {
      const state = CampaignStateSchema.parse(await readJson(storage, key));
      for (const [id, job] of Object.entries(state.jobs))
        if (job.outcome === 'exported') exported.push(Number(id));
    }
    return { format, exported: sorted(exported) };
  }

  /** The state counts no job exported that the recorded format's tables lack. */
  async function expectConsistent(out: string): Promise<TableFormat> {
    const { format, exported } = await recorded(out);
    const held = new Set(await jobsIn(out, format));
    expect(
      exported.filter((id) => !held.has(id)),
      `jobs counted exported but missing from the ${format} tables`,
    ).toEqual([]);
    return format;
  }

  beforeAll(async () => {
    simulator = await startSimulator({
      seed: 23,
      campaigns: 2,
      jobsPerCampaign: 30,
      reportSize: 'tiny',
      unpublishedShare: 0.1,
    });
    db = await openDuckDb();
    const clean = await tempDir('switch-clean');
    await run(clean, {}, {});
    exportable = await jobsIn(clean, 'hive');
    expect(exportable.length).toBeGreaterThan(20);
  });

  afterAll(async () => {
    await db?.close();
    await simulator?.close();
  });

  /**
   * Each crash point in both directions; the next run alternates between the old format and the
   * new one from case to case, so that each direction meets each kind of next run at some points
   * (`SWITCH_CRASH_ALL=1` takes both at every point: twice the time).
   */
  const cases = (['hive', 'iceberg'] as const).flatMap((from) =>
    crashPoints.map(([where, crashWhen], i) => {
      const to = other(from);
      const alternate = (i + (from === 'hive' ? 0 : 1)) % 2 === 0 ? to : from;
      const nexts = process.env.SWITCH_CRASH_ALL ? [from, to] : [alternate];
      return { from, to, where, crashWhen, nexts, next: nexts.join(' and ') };
    }),
  );

  // Concurrently: a case mostly waits (its runs' requests and files), each in its own folder.
  it.concurrent.each(cases)(
    '$from → $to, killed $where: completed by the next run ($next)',
    async ({ from, to, crashWhen, nexts }) => {
      for (const next of nexts) {
        const out = await tempDir('switch-crash');
        expect((await run(out, {}, { tableFormat: from })).status).toBe('succeeded');
        const died = run(
          out,
          { storage: (s) => crashingStorage(s, crashWhen()) },
          { tableFormat: to, mode: 'full' },
        );
        await expect(died).rejects.toBeInstanceOf(Crash);

        // The next run, incremental, in the old format or the new one: it closes the switch first.
        const later = { clockMs: AFTER_LOCK_EXPIRY_MS };
        const taken = run(out, later, { tableFormat: next });
        if (next === from) {
          await expect(taken).rejects.toThrow(ConfigError);
          await expect(taken).rejects.toThrow(`holds ${to} tables`);
        } else {
          expect((await taken).status).not.toBe('failed');
        }
        expect(await expectConsistent(out), `recorded after ${next} took the output`).toBe(to);

        // A run in the switched-to format brings its tables to every report.
        await run(out, later, { tableFormat: to });
        expect(await expectConsistent(out)).toBe(to);
        expect(await jobsIn(out, to)).toEqual(exportable);
      }
    },
  );

  it('refuses a start while a run of another format is still open after its recovery', async () => {
    const out = await tempDir('switch-open');
    expect((await run(out, {}, { tableFormat: 'hive' })).status).toBe('succeeded');
    const crashWhen = atNth(3, (c) => c.op === 'put' && c.key.includes('/units/'));
    const died = run(
      out,
      { storage: (s) => crashingStorage(s, crashWhen) },
      { tableFormat: 'iceberg', mode: 'full' },
    );
    await expect(died).rejects.toBeInstanceOf(Crash);
    const storage = new LocalStorage(out);
    const before = await keys(storage, STATE_KEYS.runsPrefix);

    // A start whose recovery leaves the killed switch to another finisher (here: any output is too large).
    const later = deps(out, { clockMs: AFTER_LOCK_EXPIRY_MS });
    const start = (tableFormat: TableFormat) =>
      startRunStep(later, {
        mode: 'full',
        tableFormat,
        driver: 'local',
        lock: { ttlMs: 60_000 },
        recovery: { maxOutputBytes: 0 },
      });
    await expect(start('hive')).rejects.toThrow(/which writes iceberg tables, is still open/);
    // The refused start left nothing: no run record of its own, the lock free for the next one.
    const runsIn = async () => new Set((await keys(storage, STATE_KEYS.runsPrefix)).map(runIdOfStateKey));
    expect(await runsIn()).toEqual(new Set(before.map(runIdOfStateKey)));
    const same = await start('iceberg');
    expect(same.kind).toBe('recorded');
    await same.lock?.release();
  });
});
