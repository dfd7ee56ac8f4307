/**
 * SQL text split into statements on the `;` outside strings, quoted names and comments, so a
 * docs block of several queries runs one statement at a time and an error names its line.
 */

export interface SqlStatement {
  text: string;
  /** Line of the statement's first character that is not a space or a comment, from 1. */
  line: number;
}

/** Index just past the next `token` from `from`, or the end of the text (unterminated). */
function pastNext(sql: string, token: string, from: number): number {
  const at = sql.indexOf(token, from);
  return at < 0 ? sql.length : at + token.length;
}

/** Index just past a quoted string or name opening at `start` (a doubled quote stays inside). */
function pastQuoted(sql: string, start: number): number {
  const quote = sql[start]!;
  let i = start + 1;
  for (;;) {
    i = pastNext(sql, quote, i);
    if (i >= sql.length || sql[i] !== quote) return i;
    i++;
  }
}

const DOLLAR_QUOTE = /^\$(?:[A-Za-z_]\w*)?\$/;

/**
 * Where the comment, string, quoted name or `$tag$` string opening at `i` ends; undefined when
 * none opens there.
 */
function pastLiteral(sql: string, i: number): number | undefined {
  const c = sql[i];
  if (c === "'" || c === '"') return pastQuoted(sql, i);
  if (sql.startsWith('--', i)) return pastNext(sql, '\n', i + 2);
  if (sql.startsWith('/*', i)) return pastNext(sql, '*/', i + 2);
  const tag = c === '$' ? DOLLAR_QUOTE.exec(sql.slice(i))?.[0] : undefined;
  return tag === undefined ? undefined : pastNext(sql, tag, i + tag.length);
}

const isComment = (sql: string, i: number): boolean => sql.startsWith('--', i) || sql.startsWith('/*', i);

const lineAt = (sql: string, index: number): number => sql.slice(0, index).split('\n').length;

/** The statements of `sql`, in order; those with nothing but spaces and comments are left out. */
export function sqlStatements(sql: string): SqlStatement[] {
  const statements: SqlStatement[] = [];
  let start = 0;
  /** Index of the current statement's first code character, once seen. */
  let code: number | undefined;
  const close = (end: number) => {
    if (code !== undefined) statements.push({ text: sql.slice(start, end).trim(), line: lineAt(sql, code) });
    start = end + 1;
    code = undefined;
  };
  for (let i = 0; i < sql.length; ) {
    if (sql[i] === ';') {
      close(i);
      i++;
      continue;
    }
    if (code === undefined && !isComment(sql, i) && !/\s/.test(sql[i]!)) code = i;
    i = pastLiteral(sql, i) ?? i + 1;
  }
  close(sql.length);
  return statements;
}
