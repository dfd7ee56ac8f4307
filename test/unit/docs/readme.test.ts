import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tablesMarkdown } from '../../../shared/export/format/tables-doc.js';
import { TABLE_NAMES, TABLES } from '../../../shared/export/tables.js';
import { docsFiles } from '../../helpers/markdown.js';

const read = (path: string): string => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
const query = read('docs/query.md');

/** What a README of one screen holds (issue: "about one screen"). */
const README_MAX_LINES = 150;

describe('README', () => {
  it('fits on one screen and shows the two commands that do everything', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
    expect(readme).toContain('`npm start`');
    expect(readme).toContain('`npm test`');
  });

  it('links every page of docs/', () => {
    const pages = docsFiles(fileURLToPath(new URL('../../../', import.meta.url))).filter(
      (f) => f !== 'README.md',
    );
    expect(pages.length).toBeGreaterThan(0);
    for (const page of pages) expect(readme, page).toContain(`](${page})`);
  });
});

describe('docs/query.md', () => {
  it('holds the column reference generated from the table definitions (run npm run docs)', () => {
    expect(query).toContain(tablesMarkdown());
  });

  it('names every column of every table', () => {
    for (const name of TABLE_NAMES) {
      for (const column of TABLES[name].columns) expect(query).toContain(`| \`${column.name}\` |`);
    }
  });
});
