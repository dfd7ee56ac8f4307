/**
 * Markdown as GitHub reads it (CommonMark + GFM, parsed by mdast-util-from-markdown): the code
 * blocks, links, inline code spans and heading anchors of a file, each with its line, for the
 * docs tests (test/integration/docs/examples.test.ts).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import GithubSlugger from 'github-slugger';
import type { Code, Nodes, Root } from 'mdast';
import { fromMarkdown } from 'mdast-util-from-markdown';
import { gfmFromMarkdown } from 'mdast-util-gfm';
import { gfm } from 'micromark-extension-gfm';

/** A Markdown file read and parsed. */
export interface MarkdownFile {
  /** Absolute path. */
  path: string;
  /** The path shown in messages: relative to the repository root. */
  name: string;
  source: string;
  tree: Root;
}

/** A code block: fenced (```` ```lang marker… ````) or indented (four spaces). */
export interface CodeBlock {
  fenced: boolean;
  /** The info string's first word; undefined for an indented block or a bare fence. */
  lang: string | undefined;
  /** The info string's other words. */
  markers: string[];
  value: string;
  /** Line of the opening fence (or of the first indented line), from 1. */
  line: number;
}

/** Something a file names (a link's url, an inline code span's text) and where. */
export interface Located {
  value: string;
  line: number;
}

export function parseMarkdown(source: string): Root {
  return fromMarkdown(source, { extensions: [gfm()], mdastExtensions: [gfmFromMarkdown()] });
}

/** The files whose examples run and whose diagrams are checked: README.md, then docs/**\/*.md in order. */
export function docsFiles(root: string): string[] {
  const docs = existsSync(join(root, 'docs'))
    ? readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((name) => name.endsWith('.md'))
        .map((name) => join('docs', name))
        .sort()
    : [];
  return ['README.md', ...docs];
}

/** Reads and parses `path`; `root` only makes the name shown in messages. */
export function readMarkdown(path: string, root: string): MarkdownFile {
  const source = readFileSync(path, 'utf8');
  return { path, name: relative(root, path), source, tree: parseMarkdown(source) };
}

/** Every node of the tree, depth first, in document order. */
function* nodes(node: Nodes): Generator<Nodes> {
  yield node;
  if ('children' in node) for (const child of node.children) yield* nodes(child);
}

const lineOf = (node: Nodes): number => node.position?.start.line ?? 0;

/** A fence opens with up to three spaces, then three or more backticks or tildes. */
const FENCE = /^[ \t]{0,3}(?:`{3,}|~{3,})/;

function isFenced(node: Code, source: string): boolean {
  return FENCE.test(source.slice(node.position?.start.offset ?? 0));
}

export function codeBlocks(file: Pick<MarkdownFile, 'source' | 'tree'>): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const node of nodes(file.tree)) {
    if (node.type !== 'code') continue;
    blocks.push({
      fenced: isFenced(node, file.source),
      lang: node.lang ?? undefined,
      markers: (node.meta ?? '').split(/\s+/).filter(Boolean),
      value: node.value,
      line: lineOf(node),
    });
  }
  return blocks;
}

/** The url of every link, image and link definition (references resolve to definitions). */
export function linkTargets(tree: Root): Located[] {
  const targets: Located[] = [];
  for (const node of nodes(tree)) {
    if (node.type === 'link' || node.type === 'image' || node.type === 'definition')
      targets.push({ value: node.url, line: lineOf(node) });
  }
  return targets;
}

export function inlineCodeSpans(tree: Root): Located[] {
  const spans: Located[] = [];
  for (const node of nodes(tree))
    if (node.type === 'inlineCode') spans.push({ value: node.value, line: lineOf(node) });
  return spans;
}

/** A heading's text as GitHub slugs it: the text of its words and code spans, markup dropped. */
function plainText(node: Nodes): string {
  if (node.type === 'text' || node.type === 'inlineCode') return node.value;
  return 'children' in node ? node.children.map(plainText).join('') : '';
}

/**
 * The anchors GitHub gives a file's headings (`#some-heading`, `-1`, `-2` for repeats), by
 * github-slugger, the slugger GitHub's own renderer is modelled on.
 */
export function headingAnchors(tree: Root): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  for (const node of nodes(tree)) if (node.type === 'heading') anchors.add(slugger.slug(plainText(node)));
  return anchors;
}
