/**
 * The CLI flag table (docs/cli.md) and the CDK context table (docs/deploy.md) show each run
 * default's value and range as shared/run-defaults.ts has them, so the documentation cannot
 * drift from the code.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../../shared/run-defaults.js';

const page = (name: string): string =>
  readFileSync(new URL(`../../../docs/${name}`, import.meta.url), 'utf8');

/** The cells of a Markdown table row (`\|` inside a cell is text, not a border). */
const cellsOf = (line: string): string[] =>
  line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim());

/** The rows of the table of `markdown` whose header row is `header`, as cells; the rule row skipped. */
function tableAfter(markdown: string, header: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.trim() === header);
  expect(start, `table "${header}"`).toBeGreaterThan(-1);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.trim().startsWith('|')) break;
    rows.push(cellsOf(line));
  }
  return rows;
}

/** The row whose first cell names `name` in backticks (a cell may name several). */
function rowOf(rows: string[][], name: string): string[] {
  const found = rows.filter((cells) => cells[0]!.split(/[,/]/).some((part) => part.trim() === `\`${name}\``));
  expect(found, `one row for ${name}`).toHaveLength(1);
  return found[0]!;
}

const ENTRIES = Object.entries(RUN_DEFAULTS as Readonly<Record<string, RunDefault>>);
const FLAG_ROWS = tableAfter(page('cli.md'), '| flag / variable | default | meaning |');
const CONTEXT_ROWS = tableAfter(page('deploy.md'), '| key | default | meaning |');

describe('documented run defaults', () => {
  it.each(ENTRIES.filter(([, e]) => e.flag !== undefined))('docs/cli.md flag table: %s', (_name, entry) => {
    const [, def, meaning] = rowOf(FLAG_ROWS, entry.flag!);
    expect(def).toBe(String(entry.value));
    expect(meaning).toContain(describeRange(entry));
  });

  it.each(ENTRIES.filter(([, e]) => e.context !== undefined))(
    'docs/deploy.md context table: %s',
    (_name, entry) => {
      const [, def, meaning] = rowOf(CONTEXT_ROWS, entry.context!);
      expect(def).toBe(String(entry.value));
      expect(meaning).toContain(describeRange(entry));
    },
  );

  it('explains that --concurrency is a ceiling and the in-flight count follows rate x latency', () => {
    expect(rowOf(FLAG_ROWS, '--concurrency')[2]).toContain('the number used follows rate x latency');
    expect(rowOf(CONTEXT_ROWS, 'reportConcurrency')[2]).toContain('the number used follows rate x latency');
  });
});
