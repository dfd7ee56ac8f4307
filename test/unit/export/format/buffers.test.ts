import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../../shared/errors.js';
import { appendReportRows } from '../../../../shared/export/format/flatten.js';
import { JsonLinesBuffer } from '../../../../shared/export/format/jsonl.js';
import { TableBuffer } from '../../../../shared/export/format/table-buffer.js';
import { REPORT_TABLES } from '../../../../shared/export/tables.js';
import { type DuckDb, openDuckDb, readParquet } from '../../../helpers/duckdb.js';
import { expectedRowCounts, measuredInput, report, section, textInput } from '../../../helpers/reports.js';

const ids = (jobId: number) => ({ campaignId: 7, jobId });
const ctx = { runId: '20261122T031500Z-a1b2c3', exportedAt: new Date('2026-11-22T03:15:00Z') };

/** `levels` nested arrays, built without recursion. */
function deepArray(levels: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

const lines = (buffer: JsonLinesBuffer): unknown[] =>
  gunzipSync(buffer.encodeGzip())
    .toString('utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));

let db: DuckDb;
beforeAll(async () => {
  db = await openDuckDb();
});
afterAll(async () => {
  await db.close();
});

/** A text input the schema lets through with a number as `measurement` (its objects are loose). */
const refusedInput = { ...textInput(), measurement: 5 } as unknown as ReturnType<typeof textInput>;

describe('TableBuffer.check', () => {
  it('refuses a cell its column would refuse when encoded, naming table, column and row', () => {
    const buffer = new TableBuffer();
    appendReportRows(
      buffer,
      report({ sections: [section({ inputs: [measuredInput(), refusedInput] })] }),
      ids(42),
      ctx,
    );
    expect(() => buffer.check()).toThrow(
      new ExporterError('parquet table inputs, column measurement, row 1: expected a string, got number'),
    );
    expect(() => buffer.encode('inputs')).toThrow(ExporterError);
  });

  it('looks only at the rows added since a mark', () => {
    const buffer = new TableBuffer();
    appendReportRows(buffer, report({ sections: [section({ inputs: [refusedInput] })] }), ids(42), ctx);
    const mark = buffer.mark();
    appendReportRows(
      buffer,
      report({ job: { id: 2 }, sections: [section({ inputs: [measuredInput(), textInput()] })] }),
      ids(2),
      ctx,
    );
    expect(() => buffer.check(mark)).not.toThrow();
    expect(() => buffer.check()).toThrow(/row 0/);
  });
});

describe('TableBuffer.truncate', () => {
  it('drops every row of every table added since a mark, and the rest still encodes', async () => {
    const first = report({ job: { id: 1 } });
    const second = report({
      job: { id: 2 },
      sections: [section(), section({ id: 's-2', inputs: [refusedInput] })],
    });
    const batch = new TableBuffer();
    appendReportRows(batch, first, ids(1), ctx);
    const mark = batch.mark();
    appendReportRows(batch, second, ids(2), ctx);
    expect(batch.rowCount('sections')).toBe(3);

    batch.truncate(mark);

    for (const table of REPORT_TABLES) expect(batch.rowCount(table)).toBe(expectedRowCounts(first)[table]);
    for (const columns of REPORT_TABLES.map((t) => batch.columns(t))) {
      for (const cells of columns) expect(cells).toHaveLength(columns[0]!.length);
    }
    const sections = await readParquet(db, batch.encode('sections'));
    expect(sections.map((r) => [r.job_id, r.section_id])).toEqual([[1n, 's-1']]);
  });
});

describe('JsonLinesBuffer.add', () => {
  it('leaves the buffer as it was when a line cannot be written, so the next lines go on', () => {
    const buffer = new JsonLinesBuffer();
    buffer.add({ job_id: 1 });
    expect(() => buffer.add({ job_id: 2, data: deepArray(20_000) })).toThrow(ExporterError);
    expect(() => buffer.add({ job_id: 3, data: 10n })).toThrow(ExporterError);
    buffer.add({ job_id: 4 });
    expect(buffer.length).toBe(2);
    expect(lines(buffer)).toEqual([{ job_id: 1 }, { job_id: 4 }]);
  });

  it('keeps every line whole across gzip members of about a MiB', () => {
    const buffer = new JsonLinesBuffer();
    const many = Array.from({ length: 30 }, (_, i) => ({ i, text: 'x'.repeat(100_000 + i) }));
    for (const line of many) buffer.add(line);
    expect(lines(buffer)).toEqual(many);
  });
});
