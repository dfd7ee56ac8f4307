/**
 * The README's CLI flag table and CDK context table show each run default's value and range as
 * shared/run-defaults.ts has them, so the documentation cannot drift from the code.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../../shared/run-defaults.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The cells of a Markdown table row (`\|` inside a cell is text, not a border). */
const cellsOf = (line: string): string[] =>
  line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim());

/** The rows of the README table whose header row is `header`, as cells; the rule row skipped. */
function tableAfter(header: string): string[][] {
  const lines = readme.split('\n');
  const start = lines.findIndex((line) => line.trim() === header);
  expect(start, `README table "${header}"`).toBeGreaterThan(-1);
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
  expect(found, `one README row for ${name}`).toHaveLength(1);
  return found[0]!;
}

const ENTRIES = Object.entries(RUN_DEFAULTS as Readonly<Record<string, RunDefault>>);
const FLAG_ROWS = tableAfter('| flag / variable | default | meaning |');
const CONTEXT_ROWS = tableAfter('| key | default | meaning |');

describe('README run defaults', () => {
  it.each(ENTRIES.filter(([, e]) => e.flag !== undefined))('CLI flag table: %s', (_name, entry) => {
    const [, def, meaning] = rowOf(FLAG_ROWS, entry.flag!);
    expect(def).toBe(String(entry.value));
    expect(meaning).toContain(describeRange(entry));
  });

  it.each(ENTRIES.filter(([, e]) => e.context !== undefined))('CDK context table: %s', (_name, entry) => {
    const [, def, meaning] = rowOf(CONTEXT_ROWS, entry.context!);
    expect(def).toBe(String(entry.value));
    expect(meaning).toContain(describeRange(entry));
  });

  it('explains that --concurrency is a ceiling and the in-flight count follows rate x latency', () => {
    expect(rowOf(FLAG_ROWS, '--concurrency')[2]).toContain('the number used follows rate x latency');
    expect(rowOf(CONTEXT_ROWS, 'reportConcurrency')[2]).toContain('the number used follows rate x latency');
  });
});
