import { describe, expect, it } from 'vitest';
import {
  codeBlocks,
  headingAnchors,
  inlineCodeSpans,
  linkTargets,
  parseMarkdown,
} from '../../helpers/markdown.js';

const blocksOf = (source: string) => codeBlocks({ source, tree: parseMarkdown(source) });

describe('codeBlocks', () => {
  it('reads a fence: its language, its markers and the line of the fence', () => {
    const source = '# T\n\n```sh aws\naws s3 ls\n```\n';
    expect(blocksOf(source)).toEqual([
      { fenced: true, lang: 'sh', markers: ['aws'], value: 'aws s3 ls', line: 3 },
    ]);
  });

  it('tells an indented block from a fence, at the top level and in a list', () => {
    const source =
      'text\n\n    npm start\n\n- item\n\n  ```sql\n  SELECT 1\n  ```\n\n- item\n\n      npm test\n';
    expect(blocksOf(source).map((b) => [b.fenced, b.lang, b.line])).toEqual([
      [false, undefined, 3],
      [true, 'sql', 7],
      [false, undefined, 13],
    ]);
  });

  it('reads a tilde fence and a fence in a block quote as fenced', () => {
    const source = '~~~text\nx\n~~~\n\n> ```json\n> {}\n> ```\n';
    expect(blocksOf(source).map((b) => [b.fenced, b.lang, b.value, b.line])).toEqual([
      [true, 'text', 'x', 1],
      [true, 'json', '{}', 5],
    ]);
  });

  it('gives a bare fence no language and no markers', () => {
    expect(blocksOf('```\nx\n```\n')).toEqual([
      { fenced: true, lang: undefined, markers: [], value: 'x', line: 1 },
    ]);
  });
});

describe('linkTargets', () => {
  it('lists links, images, definitions and autolinks with their lines', () => {
    const tree = parseMarkdown('[a](docs/cli.md#x) ![p](p.png)\n\n[r][d] <https://e.com>\n\n[d]: ./z.md\n');
    expect(linkTargets(tree)).toEqual([
      { value: 'docs/cli.md#x', line: 1 },
      { value: 'p.png', line: 1 },
      { value: 'https://e.com', line: 3 },
      { value: './z.md', line: 5 },
    ]);
  });
});

describe('inlineCodeSpans', () => {
  it('lists inline code in paragraphs, tables and headings, not code blocks', () => {
    const tree = parseMarkdown('# `h`\n\n| a |\n|---|\n| `t` |\n\ntext `p`\n\n```text\n`no`\n```\n');
    expect(inlineCodeSpans(tree)).toEqual([
      { value: 'h', line: 1 },
      { value: 't', line: 5 },
      { value: 'p', line: 7 },
    ]);
  });
});

describe('headingAnchors', () => {
  it('slugs headings as GitHub does: lower case, punctuation dropped, repeats numbered', () => {
    const tree = parseMarkdown(
      '# Put the API key\n\n## `--out` rules: S3 & folders\n\n## Athena\n\n## Athena\n\n### Incremental, full and backfill\n',
    );
    expect([...headingAnchors(tree)]).toEqual([
      'put-the-api-key',
      '--out-rules-s3--folders',
      'athena',
      'athena-1',
      'incremental-full-and-backfill',
    ]);
  });
});
