import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../../shared/errors.js';
import { encodeJsonLinesGzip, JsonLinesBuffer } from '../../../../shared/export/format/jsonl.js';
import { type DuckDb, openDuckDb, readJsonLines } from '../../../helpers/duckdb.js';
import { report } from '../../../helpers/reports.js';

const lines = [
  {
    run_id: 'run-1',
    fetched_at: '2026-11-22T03:00:00.000Z',
    campaign_id: 7,
    job_id: 3_000_000_001,
    data: report({ job: { id: 3_000_000_001 } }),
  },
  {
    run_id: 'run-1',
    fetched_at: '2026-11-22T03:00:01.000Z',
    campaign_id: 7,
    job_id: 5,
    data: {
      unknown_field: { nested: [1, null, 'x'] },
      text: 'emoji 😀 CJK 漢字\nnew line "quotes" \u2028 \\',
    },
  },
];

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

describe('encodeJsonLinesGzip', () => {
  it('gzips one JSON document per line that parses back to the input', () => {
    const text = gunzipSync(encodeJsonLinesGzip(lines)).toString('utf8');
    expect(text.endsWith('\n')).toBe(true);
    const parsed = text
      .slice(0, -1)
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(parsed).toEqual(lines);
  });

  it('is read by DuckDB read_json as newline-delimited gzip', async () => {
    const rows = await readJsonLines(db, encodeJsonLinesGzip(lines));
    expect(rows.map((r) => [r.run_id, r.job_id])).toEqual([
      ['run-1', 3_000_000_001n],
      ['run-1', 5n],
    ]);
  });

  it('writes an empty file for no lines', () => {
    expect(gunzipSync(encodeJsonLinesGzip([])).length).toBe(0);
  });

  it.each([[undefined], [10n], [() => 1]])('refuses a line JSON cannot hold: %s', (line) => {
    expect(() => encodeJsonLinesGzip([{ ok: 1 }, line])).toThrow(ExporterError);
  });
});

describe('JsonLinesBuffer', () => {
  it('compresses a large file as several gzip members that gunzip and DuckDB read whole', async () => {
    const many = Array.from({ length: 600 }, (_, i) => ({ job_id: i, text: `${i} ${'x'.repeat(4_000)} 😀` }));
    const buffer = new JsonLinesBuffer();
    for (const line of many) buffer.add(line);
    const bytes = buffer.encodeGzip();
    const members = Buffer.from(bytes).toString('latin1').split('\x1f\x8b\x08').length - 1;
    expect(members).toBeGreaterThan(1);
    const text = gunzipSync(bytes).toString('utf8');
    expect(
      text
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual(many);
    const rows = await readJsonLines(db, bytes);
    expect(rows).toHaveLength(many.length);
    expect(buffer.length).toBe(many.length);
  });
});
