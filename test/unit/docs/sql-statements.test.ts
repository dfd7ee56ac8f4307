import { describe, expect, it } from 'vitest';
import { sqlStatements } from '../../helpers/sql-statements.js';

describe('sqlStatements', () => {
  it('splits on the top-level semicolons, each statement with its first line', () => {
    const sql = 'SELECT 1;\n\nSELECT 2\nFROM t;\nSELECT 3';
    expect(sqlStatements(sql)).toEqual([
      { text: 'SELECT 1', line: 1 },
      { text: 'SELECT 2\nFROM t', line: 3 },
      { text: 'SELECT 3', line: 5 },
    ]);
  });

  it('keeps semicolons inside strings, quoted names, comments and $$ strings', () => {
    const sql = [
      "SELECT 'a;b', 'it''s;', \"odd;name\" -- c;d",
      'FROM t /* x; y */;',
      'SELECT $$ ; $$, $q$ ; $q$',
    ].join('\n');
    expect(sqlStatements(sql).map((s) => s.line)).toEqual([1, 3]);
    expect(sqlStatements(sql)[0]?.text).toContain('/* x; y */');
  });

  it('starts a statement at its first code, past comments and blank lines', () => {
    const sql = 'SELECT 1;\n-- the latest report per job\n\n/* two\nlines */ SELECT 2;';
    expect(sqlStatements(sql).map((s) => s.line)).toEqual([1, 5]);
  });

  it('leaves out statements of nothing but spaces and comments', () => {
    expect(sqlStatements(';\n -- only a comment;\n;  ')).toEqual([]);
  });

  it('runs an unterminated string to the end instead of splitting inside it', () => {
    expect(sqlStatements("SELECT 'open; SELECT 2;")).toEqual([{ text: "SELECT 'open; SELECT 2;", line: 1 }]);
  });
});
