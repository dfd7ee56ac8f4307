/**
 * The API's windows kept between runs (state/api-windows.json): a CLI run (runExport on cliDeps)
 * gives its limiter what an earlier run into the same --out learnt, before its first request,
 * and keeps what it learnt at its end.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WindowFacts } from '../../../shared/api/window-facts.js';
import type { ExportDeps, LimiterWindows } from '../../../shared/export/run/context.js';
import { runExport } from '../../../shared/export/run/local-run.js';
import { type ApiWindowsRecord, readWindowFacts } from '../../../shared/export/state/api-windows.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const FACTS: WindowFacts = { limit: 10, turn: 'first-request', offsetMs: 1_004.5, source: 'headers' };

/** The deps' limiter windows, with what the limiter was given and when (the API's requests so far). */
function watched(deps: ExportDeps, simulator: Simulator, learnt?: () => WindowFacts | undefined) {
  const real = deps.windows!;
  const given: { facts: WindowFacts | undefined; requestsBefore: number }[] = [];
  const windows: LimiterWindows = {
    baseUrl: real.baseUrl,
    startFrom: (facts) => {
      given.push({ facts, requestsBefore: simulator.stats.total });
      real.startFrom(facts);
    },
    learnt: learnt ?? (() => real.learnt()),
  };
  return { deps: { ...deps, windows }, given };
}

const storedRecord = async (out: string): Promise<ApiWindowsRecord | undefined> => {
  const found = await new LocalStorage(out).get(STATE_KEYS.apiWindows);
  return found && (JSON.parse(Buffer.from(found.body).toString()) as ApiWindowsRecord);
};

describe('the API windows a CLI run keeps in --out', () => {
  const simulators: Simulator[] = [];
  afterEach(async () => {
    await Promise.all(simulators.splice(0).map((s) => s.close()));
  });
  const simulator = async (seed = 3): Promise<Simulator> => {
    const started = await startSimulator({ seed, campaigns: 1, jobsPerCampaign: 5, reportSize: 'tiny' });
    simulators.push(started);
    return started;
  };

  it('gives the limiter what the last run learnt, before the first request, and keeps what it learnt', async () => {
    const api = await simulator();
    const out = await tempDir('api-windows');
    let learnt: WindowFacts | undefined = FACTS;
    const first = watched(exporter(api, out).deps, api, () => learnt);
    await runExport(first.deps, { mode: 'full' });
    expect(first.given).toEqual([{ facts: undefined, requestsBefore: 0 }]);
    expect(await storedRecord(out)).toMatchObject({ base_url: api.url, facts: FACTS });

    const requestsBefore = api.stats.total;
    const second = watched(exporter(api, out).deps, api, () => learnt);
    const storage = new LocalStorage(out);
    const etag = (await storage.get(STATE_KEYS.apiWindows))!.etag;
    await runExport(second.deps, { mode: 'full' });
    expect(second.given).toEqual([{ facts: FACTS, requestsBefore }]);
    // Nothing new learnt: the record is not written again.
    expect((await storage.get(STATE_KEYS.apiWindows))!.etag).toBe(etag);

    // The API's answers changed and the limiter learnt afresh: the next run starts from that.
    learnt = { ...FACTS, limit: 5, offsetMs: 2_000 };
    const third = watched(exporter(api, out).deps, api, () => learnt);
    await runExport(third.deps, { mode: 'full' });
    expect(third.given[0]!.facts).toEqual(FACTS);
    expect(await readWindowFacts(storage, api.url, silentLog)).toEqual(learnt);
  });

  it('starts a run against another API from nothing, and keeps the facts of the API it learnt from', async () => {
    const [one, other] = [await simulator(3), await simulator(4)];
    const out = await tempDir('api-windows');
    const first = watched(exporter(one, out).deps, one, () => FACTS);
    await runExport(first.deps, { mode: 'full' });
    const second = watched(exporter(other, out).deps, other, () => undefined);
    await runExport(second.deps, { mode: 'full' });
    expect(second.given).toEqual([{ facts: undefined, requestsBefore: 0 }]);
    // It saw no window: the record is left as it was.
    expect(await storedRecord(out)).toMatchObject({ base_url: one.url, facts: FACTS });
  });

  it('writes nothing on a run that got no answer', async () => {
    const api = await simulator();
    const out = await tempDir('api-windows');
    const manifest = await exporter(api, out, { apiKey: api.keys.expired }).run({ mode: 'full' });
    expect(manifest.status).toBe('failed');
    expect(await storedRecord(out)).toBeUndefined();
  });

  it('starts the second run into --out from the windows the first learnt of a Laravel API', async () => {
    const api = await startSimulator({ seed: 5, campaigns: 1, jobsPerCampaign: 40, reportSize: 'tiny' });
    simulators.push(api);
    api.setRateLimit({ windowRequests: 10, windowMs: 1_000, headers: 'laravel', turn: 'exact' });
    const out = await tempDir('api-windows');
    const first = watched(exporter(api, out).deps, api);
    const one = await runExport(first.deps, { mode: 'full' });
    expect(one.status).toBe('succeeded');
    expect(first.given).toEqual([{ facts: undefined, requestsBefore: 0 }]);
    const record = await storedRecord(out);
    expect(record).toMatchObject({
      base_url: api.url,
      facts: { limit: 10, turn: 'first-request', source: 'headers' },
    });
    // A window counted from its first request: the offset is its length, give or take the
    // latency (a guess keeps half a round trip of room: wide on a loaded machine).
    expect(record!.facts.offsetMs).toBeGreaterThan(900);
    expect(record!.facts.offsetMs).toBeLessThan(2_000);
    const text = Buffer.from((await new LocalStorage(out).get(STATE_KEYS.apiWindows))!.body).toString();
    expect(text).not.toContain(api.keys.valid);

    const second = watched(exporter(api, out).deps, api);
    const two = await runExport(second.deps, { mode: 'full' });
    expect(two.status).toBe('succeeded');
    expect(second.given.map((g) => g.facts)).toEqual([record!.facts]);
    // The limiter started from them, and still holds them at the end (the API did not change).
    expect(second.deps.windows.learnt()).toMatchObject({ limit: 10, turn: 'first-request' });
    // No scan of the first turns: fewer 429s than the run that learnt (5 against 1 as measured).
    expect(two.requests.by_status['429'] ?? 0).toBeLessThan(one.requests.by_status['429'] ?? 0);
  });
});
