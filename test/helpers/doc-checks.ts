/**
 * The static rules of the docs (see test/integration/docs/examples.test.ts for the list): code
 * blocks fenced with a known language and marker, relative links and `#anchors` that resolve,
 * repository paths in inline code that exist, and `docs/….md#anchor` references in the source
 * that resolve. Each rule returns the problems it finds, each naming a file and a line.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import {
  type CodeBlock,
  codeBlocks,
  headingAnchors,
  inlineCodeSpans,
  linkTargets,
  type MarkdownFile,
  parseMarkdown,
} from './markdown.js';

export interface Problem {
  /** Relative to the repository root. */
  file: string;
  line: number;
  message: string;
}

export const formatProblem = (p: Problem): string => `${p.file}:${p.line}: ${p.message}`;

/** The languages a code block may name, each with the markers its info string may add. */
export const BLOCK_LANGUAGES: Readonly<Record<string, readonly string[]>> = {
  /** `aws`: needs an AWS account; only `bash -n` checks it. */
  sh: ['aws'],
  /**
   * `athena`: Athena-only syntax; `internet`: needs a DuckDB extension fetched from the internet
   * (`INSTALL iceberg`), which these machines cannot reach. Neither is run.
   */
  sql: ['athena', 'internet'],
  mermaid: [],
  ts: [],
  json: [],
  text: [],
};

const LANGUAGE_LIST = Object.keys(BLOCK_LANGUAGES).join(', ');

/** Run by the test: an `sh` or `sql` block without a marker. */
export const isRunnable = (block: CodeBlock, lang: 'sh' | 'sql'): boolean =>
  block.lang === lang && block.markers.length === 0;

/** What is wrong with a block's fence and info string, if anything. */
function blockProblem(block: CodeBlock): string | undefined {
  if (!block.fenced) return `indented code block: fence it with a language (${LANGUAGE_LIST})`;
  if (block.lang === undefined) return `code block without a language: name one of ${LANGUAGE_LIST}`;
  const markers = BLOCK_LANGUAGES[block.lang];
  if (markers === undefined) return `code block in "${block.lang}": the languages are ${LANGUAGE_LIST}`;
  const unknown = block.markers.filter((m) => !markers.includes(m));
  if (unknown.length === 0) return undefined;
  const allowed = markers.length > 0 ? `only ${markers.join(', ')}` : 'none';
  return `code block "${block.lang} ${block.markers.join(' ')}": unknown marker ${unknown.join(', ')} (${block.lang} takes ${allowed})`;
}

export function codeBlockProblems(file: MarkdownFile): Problem[] {
  return codeBlocks(file).flatMap((block) => {
    const message = blockProblem(block);
    return message ? [{ file: file.name, line: block.line, message }] : [];
  });
}

/** http(s) and mailto targets are not checked (no network in tests). */
const EXTERNAL = /^(?:https?|mailto):/i;

const kindOf = (path: string): 'file' | 'folder' | undefined => {
  const stat = statSync(path, { throwIfNoEntry: false });
  return stat === undefined ? undefined : stat.isDirectory() ? 'folder' : 'file';
};

/** `%xx` decoded; a malformed escape is kept as written, so the path reads as missing. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch (error) {
    if (error instanceof URIError) return text;
    throw error;
  }
}

/** A target split into its path (without `?query`) and its anchor ('' when none), both decoded. */
function splitTarget(target: string): { path: string; anchor: string } {
  const [path = '', ...anchor] = target.split('#');
  return { path: decoded(path.replace(/\?.*$/, '')), anchor: decoded(anchor.join('#')) };
}

/**
 * Resolves repository targets (`path`, `path#anchor`, `#anchor`) as GitHub does: a path from a
 * folder, `/…` from the repository root, an anchor against the headings of a Markdown file.
 * The anchors of each file are read once.
 */
export class TargetResolver {
  private readonly anchors = new Map<string, Set<string>>();

  constructor(private readonly root: string) {}

  /** Why `target` does not resolve from `folder` (`self`: the file a bare `#anchor` is in); undefined if it does. */
  problem(target: string, folder: string, self?: string): string | undefined {
    const { path: relativePath, anchor } = splitTarget(target);
    const path = this.pathOf(relativePath, folder, self);
    if (path === undefined) return `"${target}": an anchor alone needs a file`;
    const shown = relative(this.root, path);
    if (shown.startsWith('..') || isAbsolute(shown)) return `"${target}" points outside the repository`;
    const kind = kindOf(path);
    if (kind === undefined) return `"${target}": no such file or folder (${shown})`;
    if (relativePath.endsWith('/') && kind === 'file') return `"${target}": ${shown} is a file, not a folder`;
    if (anchor === '') return undefined;
    if (kind === 'folder' || !path.toLowerCase().endsWith('.md'))
      return `"${target}": an anchor needs a Markdown file, ${shown} is not one`;
    if (this.anchorsOf(path).has(anchor)) return undefined;
    return `"${target}": ${shown} has no heading with anchor #${anchor}`;
  }

  private pathOf(relativePath: string, folder: string, self: string | undefined): string | undefined {
    if (relativePath === '') return self;
    return relativePath.startsWith('/') ? join(this.root, relativePath) : resolve(folder, relativePath);
  }

  private anchorsOf(path: string): Set<string> {
    let anchors = this.anchors.get(path);
    if (!anchors) {
      anchors = headingAnchors(parseMarkdown(readFileSync(path, 'utf8')));
      this.anchors.set(path, anchors);
    }
    return anchors;
  }
}

/** Every relative link, image and definition must name a file or folder, and its anchor a heading. */
export function linkProblems(file: MarkdownFile, resolver: TargetResolver): Problem[] {
  return linkTargets(file.tree).flatMap(({ value, line }) => {
    if (EXTERNAL.test(value)) return [];
    const message = resolver.problem(value, dirname(file.path), file.path);
    return message ? [{ file: file.name, line, message: `link ${message}` }] : [];
  });
}

/** An inline code span that reads as a repository path: a known top folder, no spaces nor placeholders. */
export const REPOSITORY_PATH = /^(?:shared|functions|infra|test|docs)\/[^\s<*…]*$/;

/** Every repository path in inline code must exist (a trailing `/` allowed; a `#anchor` checked too). */
export function inlinePathProblems(file: MarkdownFile, resolver: TargetResolver, root: string): Problem[] {
  return inlineCodeSpans(file.tree).flatMap(({ value, line }) => {
    if (!REPOSITORY_PATH.test(value)) return [];
    const message = resolver.problem(value, root);
    return message ? [{ file: file.name, line, message: `inline path ${message}` }] : [];
  });
}

/** Source folders whose `*.ts` may point users at the docs. */
export const SOURCE_FOLDERS = ['functions', 'infra', 'shared'] as const;

/** `docs/<file>.md` or `docs/<file>.md#anchor`, in a string literal or a comment. */
const DOCS_REFERENCE = /\bdocs\/[\w./-]+?\.md(?:#[\w-]+)?/g;

function typeScriptFiles(folder: string): string[] {
  if (kindOf(folder) !== 'folder') return [];
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name));
}

/** Every `docs/….md[#anchor]` named in the source's `*.ts` must resolve from the repository root. */
export function sourceReferenceProblems(root: string, resolver: TargetResolver): Problem[] {
  return SOURCE_FOLDERS.flatMap((folder) => typeScriptFiles(join(root, folder))).flatMap((path) => {
    const text = readFileSync(path, 'utf8');
    return [...text.matchAll(DOCS_REFERENCE)].flatMap((match) => {
      const message = resolver.problem(match[0], root);
      if (!message) return [];
      const line = text.slice(0, match.index).split('\n').length;
      return [{ file: relative(root, path), line, message: `reference ${message}` }];
    });
  });
}
