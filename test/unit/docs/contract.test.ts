/**
 * The outside contract as the docs state it (docs/contract.md and the pages it links), against
 * the code that writes it: the manifest's fields and the raw lines' fields in docs/ingest.md,
 * and no page pointing at a document the repository does not hold. The tables' columns are
 * checked in readme.test.ts (docs/query.md, generated from shared/export/tables.ts).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Heading, Nodes, Root, Table } from 'mdast';
import { describe, expect, it } from 'vitest';
import { RAW_LINE_COLUMNS } from '../../../shared/export/raw-lines.js';
import { ManifestCountsSchema, ManifestSchema } from '../../../shared/export/state/manifest.js';
import { FileEntrySchema, RequestCountsSchema } from '../../../shared/export/state/records.js';
import { docsFiles, parseMarkdown } from '../../helpers/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string): string => readFileSync(`${root}${path}`, 'utf8');

/** The rows (cells as plain text) of the first table after the heading `title`. */
function tableAfter(tree: Root, title: string): string[][] {
  const at = tree.children.findIndex(
    (node) => node.type === 'heading' && cellText(node as Heading) === title,
  );
  expect(at, `no heading "${title}"`).toBeGreaterThanOrEqual(0);
  const table = tree.children.slice(at + 1).find((node): node is Table => node.type === 'table');
  expect(table, `no table after "${title}"`).toBeDefined();
  return (table as Table).children.slice(1).map((row) => row.children.map((cell) => cellText(cell)));
}

/** A cell's text with its inline code spans marked, so that names can be told from prose. */
function cellText(node: Nodes): string {
  if (node.type === 'inlineCode') return `\`${node.value}\``;
  if ('children' in node) return node.children.map((child) => cellText(child as Nodes)).join('');
  return 'value' in node ? String(node.value) : '';
}

/** The names a cell lists in its code spans: `a`, `b, c` and `{a, b}` give a, b, c. */
const namesIn = (cell: string): string[] =>
  [...cell.matchAll(/`([^`]*)`/g)].flatMap((m) =>
    (m[1] ?? '')
      .replace(/^\[?\{|\}\]?$/g, '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => /^[a-z_]+$/.test(name)),
  );

const sorted = (names: Iterable<string>): string[] => [...names].sort();

describe('docs/ingest.md states the manifest the code writes', () => {
  const rows = tableAfter(parseMarkdown(read('docs/ingest.md')), 'The run manifest');
  const row = (field: string): string => {
    const found = rows.find(([first]) => namesIn(first ?? '').includes(field));
    expect(found, `no row for ${field}`).toBeDefined();
    return found?.[1] ?? '';
  };

  it('one row for every field of ManifestSchema, and none other', () => {
    expect(sorted(rows.flatMap(([first]) => namesIn(first ?? '')))).toEqual(
      sorted(Object.keys(ManifestSchema.shape)),
    );
  });

  it('every count, the requests and the fields of a published file', () => {
    expect(sorted(namesIn(row('counts')))).toEqual(sorted(Object.keys(ManifestCountsSchema.shape)));
    expect(sorted(namesIn(row('requests')))).toEqual(sorted(Object.keys(RequestCountsSchema.shape)));
    expect(sorted(namesIn(row('files')).slice(0, Object.keys(FileEntrySchema.shape).length))).toEqual(
      sorted(Object.keys(FileEntrySchema.shape)),
    );
  });
});

describe('docs/ingest.md states the raw lines the code writes', () => {
  it('each entity with its fields, in the order written', () => {
    const rows = tableAfter(parseMarkdown(read('docs/ingest.md')), 'Output layout');
    const documented = Object.fromEntries(rows.map(([entity, , fields]) => [entity, namesIn(fields ?? '')]));
    expect(documented).toEqual(
      Object.fromEntries(
        Object.entries(RAW_LINE_COLUMNS).map(([entity, columns]) => [
          `\`raw/${entity}\``,
          columns.map((c) => c.name),
        ]),
      ),
    );
  });
});

describe('the docs are the one place of the contract', () => {
  it('no page points at a design document outside the repository', () => {
    const outside = /\b(?:CONTRACT|ARCHITECTURE|STYLE)\.md\b|integration-api\.md|of the design\b/;
    for (const page of docsFiles(root)) {
      read(page)
        .split('\n')
        .forEach((line, i) => {
          expect(outside.test(line), `${page}:${i + 1}: ${line}`).toBe(false);
        });
    }
  });

  it('contract.md links every page that states a part of it', () => {
    const contract = read('docs/contract.md');
    for (const page of ['cli.md', 'ingest.md', 'query.md', 'iceberg.md', 'api.md', 'deploy.md'])
      expect(contract).toContain(`](${page}#`);
  });
});
