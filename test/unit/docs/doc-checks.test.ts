/**
 * Each static docs rule on fixture repositories (temporary folders): what passes, and a
 * failure for each way a doc can drift, naming file and line.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  codeBlockProblems,
  formatProblem,
  inlinePathProblems,
  linkProblems,
  type Problem,
  sourceReferenceProblems,
  TargetResolver,
} from '../../helpers/doc-checks.js';
import { tempDir } from '../../helpers/export.js';
import { readMarkdown } from '../../helpers/markdown.js';

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

/** A repository in a temp folder holding `files` (path → text). */
async function fixtureRepo(files: Record<string, string>): Promise<string> {
  const root = await tempDir('docs-fixture');
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
  return root;
}

const shown = (problems: Problem[]): string[] => problems.map(formatProblem);

/** The problems `check` finds in `docs/page.md` (text `page`) of a repository with `others`. */
async function checkPage(
  page: string,
  check: 'blocks' | 'links' | 'paths',
  others: Record<string, string> = {},
): Promise<string[]> {
  const root = await fixtureRepo({ 'docs/page.md': page, ...others });
  const file = readMarkdown(join(root, 'docs/page.md'), root);
  const resolver = new TargetResolver(root);
  if (check === 'blocks') return shown(codeBlockProblems(file));
  if (check === 'links') return shown(linkProblems(file, resolver));
  return shown(inlinePathProblems(file, resolver, root));
}

describe('code blocks: fenced, with a known language and marker', () => {
  it('accepts every language, sh with aws and sql with athena', async () => {
    const page = ['sh', 'sh aws', 'sql', 'sql athena', 'mermaid', 'ts', 'json', 'text']
      .map((info) => `\`\`\`${info}\nx\n\`\`\`\n`)
      .join('\n');
    expect(await checkPage(page, 'blocks')).toEqual([]);
  });

  it('fails an indented block, naming file and line', async () => {
    expect(await checkPage('# Start\n\n    npm start\n', 'blocks')).toEqual([
      'docs/page.md:3: indented code block: fence it with a language (sh, sql, mermaid, ts, json, text)',
    ]);
  });

  it('fails a fence without a language and one in another language', async () => {
    expect(await checkPage('```\nx\n```\n\n```bash\nls\n```\n', 'blocks')).toEqual([
      'docs/page.md:1: code block without a language: name one of sh, sql, mermaid, ts, json, text',
      'docs/page.md:5: code block in "bash": the languages are sh, sql, mermaid, ts, json, text',
    ]);
  });

  it('fails an unknown marker, and a marker on a language that takes none', async () => {
    expect(await checkPage('```sh athena\nls\n```\n\n```ts aws\nx\n```\n', 'blocks')).toEqual([
      'docs/page.md:1: code block "sh athena": unknown marker athena (sh takes only aws)',
      'docs/page.md:5: code block "ts aws": unknown marker aws (ts takes none)',
    ]);
  });
});

describe('relative links: a file or folder, and a heading for an anchor', () => {
  const others = {
    'README.md': '# Campaign exporter\n\n## Quick start\n',
    'docs/cli.md': '# The CLI\n\n## `--out` rules\n',
    'shared/export/tables.ts': '',
  };

  it('accepts files, folders, anchors in this and other files, root paths and external links', async () => {
    const page = [
      '# Page',
      '[cli](cli.md) [out](./cli.md#--out-rules) [readme](../README.md#quick-start) [self](#page)',
      '[folder](../shared/) [root](/shared/export/tables.ts) [web](https://example.com/x.md#nope)',
      '[mail](mailto:data@acme.com) [ref][def]',
      '',
      '[def]: ../README.md',
    ].join('\n');
    expect(await checkPage(page, 'links', others)).toEqual([]);
  });

  it('fails a link to a file that does not exist', async () => {
    expect(await checkPage('# Page\n\ntext\n[deploy](deploy.md)\n', 'links', others)).toEqual([
      'docs/page.md:4: link "deploy.md": no such file or folder (docs/deploy.md)',
    ]);
  });

  it('fails an anchor that matches no heading, in another file and in the same file', async () => {
    expect(await checkPage('# Page\n\n[a](cli.md#out-rules) [b](#pages)\n', 'links', others)).toEqual([
      'docs/page.md:3: link "cli.md#out-rules": docs/cli.md has no heading with anchor #out-rules',
      'docs/page.md:3: link "#pages": docs/page.md has no heading with anchor #pages',
    ]);
  });

  it('fails a broken image, a broken definition and a link out of the repository', async () => {
    const page = '# Page\n\n![arch](arch.png) [x][d] [up](../../x.md)\n\n[d]: ./gone/\n';
    expect(await checkPage(page, 'links', others)).toEqual([
      'docs/page.md:3: link "arch.png": no such file or folder (docs/arch.png)',
      'docs/page.md:3: link "../../x.md" points outside the repository',
      'docs/page.md:5: link "./gone/": no such file or folder (docs/gone)',
    ]);
  });

  it('fails an anchor on a folder or a file that is not Markdown', async () => {
    expect(await checkPage('# Page\n\n[t](../shared/export/tables.ts#L3)\n', 'links', others)).toEqual([
      'docs/page.md:3: link "../shared/export/tables.ts#L3": an anchor needs a Markdown file, shared/export/tables.ts is not one',
    ]);
  });
});

describe('repository paths in inline code', () => {
  const others = { 'shared/export/tables.ts': '', 'docs/cli.md': '# The CLI\n' };

  it('accepts existing files and folders, a trailing slash, and skips what is no path', async () => {
    const page =
      '# Page\n\n`shared/export/tables.ts` `shared/export/` `docs/cli.md#the-cli` `shared/<file>.ts` ' +
      '`test/…` `shared/*.ts` `npm start` `out/demo` `shared/x y`\n';
    expect(await checkPage(page, 'paths', others)).toEqual([]);
  });

  it('fails a path that was moved, naming the line', async () => {
    expect(await checkPage('# Page\n\nsee `shared/tables.ts`\n', 'paths', others)).toEqual([
      'docs/page.md:3: inline path "shared/tables.ts": no such file or folder (shared/tables.ts)',
    ]);
  });

  it('fails a file named with a trailing slash, and a wrong anchor', async () => {
    expect(
      await checkPage('# Page\n\n`shared/export/tables.ts/` `docs/cli.md#cli`\n', 'paths', others),
    ).toEqual([
      'docs/page.md:3: inline path "shared/export/tables.ts/": shared/export/tables.ts is a file, not a folder',
      'docs/page.md:3: inline path "docs/cli.md#cli": docs/cli.md has no heading with anchor #cli',
    ]);
  });
});

describe('docs/ references in the source', () => {
  const docs = { 'docs/operate.md': '# Operate\n\n## Put the API key\n' };

  it('accepts a reference to an existing file and heading, in a string and a comment', async () => {
    const root = await fixtureRepo({
      ...docs,
      'functions/aws/runtime.ts':
        "// see docs/operate.md\nthrow new Error('see docs/operate.md#put-the-api-key');\n",
    });
    expect(sourceReferenceProblems(root, new TargetResolver(root))).toEqual([]);
  });

  it('fails a reference to a missing doc or heading, naming the source line', async () => {
    const root = await fixtureRepo({
      ...docs,
      'shared/errors.ts': "const a = 1;\nconst hint = 'docs/operate.md#the-api-key';\n",
      'infra/stack.ts': '/** docs/deploy.md */\n',
    });
    expect(shown(sourceReferenceProblems(root, new TargetResolver(root)))).toEqual([
      'infra/stack.ts:1: reference "docs/deploy.md": no such file or folder (docs/deploy.md)',
      'shared/errors.ts:2: reference "docs/operate.md#the-api-key": docs/operate.md has no heading with anchor #the-api-key',
    ]);
  });
});
