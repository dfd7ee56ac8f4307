import { describe, expect, it } from 'vitest';
import type { WindowFacts } from '../../../../shared/api/window-facts.js';
import {
  readWindowFacts,
  sameWindowFacts,
  WindowFactsKeeper,
  writeWindowFacts,
} from '../../../../shared/export/state/api-windows.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import type { Log } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const API = 'https://api.acme.example';
const FACTS: WindowFacts = { limit: 60, turn: 'first-request', offsetMs: 60_412.5, source: 'headers' };
const NOW = new Date('2026-11-27T10:00:00Z');

/** A log that keeps its lines, to see what a run is told. */
function keptLog(): Log & { lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (message: string) => {
    lines.push({ level, message });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

describe('state/api-windows.json', () => {
  it('reads back the facts written for the same API', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    await writeWindowFacts(storage, API, FACTS, NOW);
    expect(await readWindowFacts(storage, API, keptLog())).toEqual(FACTS);
    const record = JSON.parse(Buffer.from((await storage.get(STATE_KEYS.apiWindows))!.body).toString());
    expect(record).toEqual({ base_url: API, facts: FACTS, learnt_at: NOW.toISOString() });
  });

  it('starts a run without facts, and says so once, when the record is missing', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    const log = keptLog();
    expect(await readWindowFacts(storage, API, log)).toBeUndefined();
    expect(log.lines).toEqual([
      { level: 'debug', message: 'no API windows learnt before: this run learns them' },
    ]);
  });

  it.each([
    ['not JSON', '{"base_url": "https://api.acme.example", "facts": '],
    ['another shape', JSON.stringify({ base_url: API, facts: { ...FACTS, limit: 0 }, learnt_at: '' })],
    ['an unknown turn', JSON.stringify({ base_url: API, facts: { ...FACTS, turn: 'ceil' }, learnt_at: '' })],
  ])('starts a run without facts, never failing it, when the record is %s', async (_, body) => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    await storage.put(STATE_KEYS.apiWindows, body);
    const log = keptLog();
    expect(await readWindowFacts(storage, API, log)).toBeUndefined();
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]).toMatchObject({ level: 'info' });
    expect(log.lines[0]!.message).toContain('not a valid record');
  });

  it('never gives the facts of one API to a run against another', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    await writeWindowFacts(storage, API, FACTS, NOW);
    const log = keptLog();
    expect(await readWindowFacts(storage, 'https://staging.acme.example', log)).toBeUndefined();
    expect(log.lines[0]!.message).toContain('of another API');
    // The same host under another path is another API as well (a gateway's tenants).
    expect(await readWindowFacts(storage, `${API}/tenant-2`, keptLog())).toBeUndefined();
  });

  it('tells facts apart by what a limiter does with them, not by a sub-millisecond offset', () => {
    expect(sameWindowFacts(FACTS, { ...FACTS, offsetMs: FACTS.offsetMs + 0.4 })).toBe(true);
    expect(sameWindowFacts(FACTS, { ...FACTS, offsetMs: FACTS.offsetMs + 12.5 })).toBe(false);
    expect(sameWindowFacts(FACTS, { ...FACTS, limit: 59 })).toBe(false);
    expect(sameWindowFacts(FACTS, { ...FACTS, turn: 'named' })).toBe(false);
    expect(sameWindowFacts(FACTS, { ...FACTS, source: 'retry-after' })).toBe(false);
    expect(sameWindowFacts(FACTS, undefined)).toBe(false);
    expect(sameWindowFacts(undefined, undefined)).toBe(true);
  });
});

describe('WindowFactsKeeper', () => {
  it('writes what a limiter learnt only when it differs from what was read or last written', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    const keeper = new WindowFactsKeeper({ storage, baseUrl: API, log: keptLog(), now: () => NOW });
    expect(await keeper.read()).toBeUndefined();
    // A limiter that saw no window says nothing: the record stays as it is (here: none).
    expect(await keeper.keep(undefined)).toBe(false);
    expect(await storage.get(STATE_KEYS.apiWindows)).toBeUndefined();
    expect(await keeper.keep(FACTS)).toBe(true);
    const first = await storage.get(STATE_KEYS.apiWindows);
    expect(await keeper.keep({ ...FACTS })).toBe(false);
    expect((await storage.get(STATE_KEYS.apiWindows))!.etag).toBe(first!.etag);
    const relearnt: WindowFacts = { ...FACTS, limit: 30 };
    expect(await keeper.keep(relearnt)).toBe(true);
    expect(await readWindowFacts(storage, API, keptLog())).toEqual(relearnt);
  });

  it('costs a run that learnt nothing new one read and no write', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    await writeWindowFacts(storage, API, FACTS, NOW);
    const keeper = new WindowFactsKeeper({ storage, baseUrl: API, log: keptLog(), now: () => NOW });
    const before = storage.stats();
    expect(await keeper.read()).toEqual(FACTS);
    expect(await keeper.read()).toEqual(FACTS);
    expect(await keeper.keep({ ...FACTS })).toBe(false);
    expect(storage.stats().reads - before.reads).toBe(1);
    expect(storage.stats().writes - before.writes).toBe(0);
  });

  it('replaces the facts of another API with its own once it learnt them', async () => {
    const storage = new LocalStorage(await tempDir('api-windows'));
    await writeWindowFacts(storage, 'https://staging.acme.example', FACTS, NOW);
    const keeper = new WindowFactsKeeper({ storage, baseUrl: API, log: keptLog(), now: () => NOW });
    expect(await keeper.read()).toBeUndefined();
    expect(await keeper.keep(FACTS)).toBe(true);
    expect(await readWindowFacts(storage, API, keptLog())).toEqual(FACTS);
  });
});
