import { describe, expect, it } from 'vitest';
import { stringifyIterative } from '../../../../shared/export/format/json-text.js';
import { quarantine } from '../../../../shared/export/state/quarantine.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';

const run = { run_id: '20261122T031500Z-a1b2c3', dt: '2026-11-22', mode: 'incremental' } as const;
const issues = [{ path: '', code: 'too_deep', message: 'nested more than 512 levels deep' }];

async function readBack(storage: LocalStorage, key: string): Promise<Record<string, unknown>> {
  const found = await storage.get(key);
  return JSON.parse(Buffer.from(found!.body).toString('utf8')) as Record<string, unknown>;
}

describe('quarantine', () => {
  it('keeps a parsed body as JSON, and a text body as text', async () => {
    const storage = new LocalStorage(await tempDir('quarantine'));
    const item = { id: 'x', extra: [1, null] };
    const parsedKey = await quarantine(storage, run, { name: 'item', body: item, issues, fetched_at: 'now' });
    const textKey = await quarantine(storage, run, {
      name: 'text',
      body: '{"data":',
      issues,
      fetched_at: 'now',
    });
    expect(parsedKey).toBe(`quarantine/dt=2026-11-22/${run.run_id}/item.json`);
    expect(await readBack(storage, parsedKey)).toEqual({
      run_id: run.run_id,
      name: 'item',
      body: item,
      issues,
      fetched_at: 'now',
    });
    expect((await readBack(storage, textKey)).body).toBe('{"data":');
  });

  it('keeps a parsed body too deep for JSON.stringify as its JSON text, and says so', async () => {
    const storage = new LocalStorage(await tempDir('quarantine-deep'));
    const text = `${'{"a":['.repeat(6_000)}"bottom"${']}'.repeat(6_000)}`;
    const body: unknown = JSON.parse(text);
    expect(() => JSON.stringify(body)).toThrow(RangeError);

    const key = await quarantine(storage, run, { name: 'deep', body, issues, fetched_at: 'now' });

    const record = await readBack(storage, key);
    expect(record.body_format).toBe('json_text');
    expect(record.body).toBe(text);
    expect(stringifyIterative(JSON.parse(record.body as string))).toBe(text);
    expect(record.issues).toEqual(issues);
  });
});
