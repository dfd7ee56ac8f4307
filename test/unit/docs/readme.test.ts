import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { tablesMarkdown } from '../../../shared/export/format/tables-doc.js';
import { TABLE_NAMES, TABLES } from '../../../shared/export/tables.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('holds the table reference generated from the table definitions (run npm run docs)', () => {
    expect(readme).toContain(tablesMarkdown());
  });

  it('names every column of every table', () => {
    for (const name of TABLE_NAMES) {
      for (const column of TABLES[name].columns) expect(readme).toContain(`| \`${column.name}\` |`);
    }
  });

  it('shows the two commands that do everything', () => {
    expect(readme).toContain('npm start');
    expect(readme).toContain('npm test');
  });
});
