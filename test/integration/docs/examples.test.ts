/**
 * Every example in the docs runs and every link resolves, so the docs cannot drift from the code.
 *
 * Conventions (docs/testing.md, "The docs are tested"):
 * - Files: README.md and docs/**\/*.md (code blocks, inline paths, links); BENCHMARKS.md,
 *   test/sim/README.md and test/simulator/README.md for links and inline paths only.
 * - Every code block is fenced and names a language: sh, sql, mermaid, ts, json or text. An
 *   indented block, a bare fence or another language fails, naming file and line.
 * - Markers after the language: `sh aws` (needs an AWS account: only `bash -n`), `sql athena`
 *   (Athena-only) and `sql internet` (needs a DuckDB extension from the internet): not run. Any
 *   other marker fails. mermaid, ts, json and text are not run.
 * - The runnable `sh` blocks of a file run in document order as ONE bash script (`set -euo
 *   pipefail`, so an `export` holds for later blocks) from the repository root, with:
 *   `https://api.acme.com` replaced by the API simulator's URL (small dataset, seed 1); the
 *   simulator's valid key on stdin, one line per `read -rs INTEGRATION_API_KEY`; a temporary
 *   HOME; `npm_config_prefix` in a temporary folder whose bin/ leads PATH (so `npm install -g`
 *   lands there); PATH without node_modules/.bin (a user's shell); npm's own config files and
 *   cache kept; no INTEGRATION_*, npm_* or vitest variables. What the script adds under out/
 *   is removed afterwards. A failure names the block's first line, with the tails of stderr and
 *   stdout.
 * - The runnable `sql` blocks run statement by statement (split on `;` outside strings and
 *   comments) on DuckDB over an export folder from two runs against the simulator (full on
 *   2026-11-22, incremental on 2026-11-23), through `openLakeSql`: the tables, `runs` and the
 *   `*_latest` views, as in the demo and Athena; a path `'out/acme/…'` in a statement reads that
 *   folder. An error names the statement's line.
 * - Links, images and definitions whose target is not http(s) or mailto name an existing file or
 *   folder (from the Markdown file; `/…` from the repository root; a trailing `/` only on a
 *   folder), inside the repository; a `#anchor` names a heading of that Markdown file (or of this
 *   one for `#anchor` alone) by GitHub's slugs. External links are not fetched.
 * - Inline code that reads as a repository path (starts with shared/, functions/, infra/,
 *   test/ or docs/; no space, `<`, `*` or `…`) names an existing file or folder; `#anchor` too.
 * - `docs/<file>.md` and `docs/<file>.md#anchor` in `*.ts` under functions/, infra/ and shared/
 *   (error messages, comments) resolve from the repository root.
 */
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LakeSql, openLakeSql } from '../../../functions/cli/sql.js';
import {
  codeBlockProblems,
  formatProblem,
  inlinePathProblems,
  linkProblems,
  type Problem,
  sourceReferenceProblems,
  TargetResolver,
} from '../../helpers/doc-checks.js';
import {
  DOCS_API_URL,
  NESTED_RUN_VARIABLE,
  runShellExamples,
  runSqlExamples,
  type ShellContext,
  shellSyntaxProblems,
  userShell,
} from '../../helpers/doc-examples.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { docsFiles as listDocs, type MarkdownFile, readMarkdown } from '../../helpers/markdown.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

const docsFiles = (): string[] => listDocs(ROOT);

/** Files whose links and inline paths are checked: the docs, and the READMEs beside the code. */
const LINKED_ONLY = ['BENCHMARKS.md', 'test/sim/README.md', 'test/simulator/README.md'];
const linkedFiles = (): string[] => [
  ...docsFiles(),
  ...LINKED_ONLY.filter((name) => existsSync(join(ROOT, name))),
];

/** Each file parsed once (the README takes a tenth of a second). */
const parsed = new Map<string, MarkdownFile>();
function read(name: string): MarkdownFile {
  let file = parsed.get(name);
  if (!file) {
    file = readMarkdown(join(ROOT, name), ROOT);
    parsed.set(name, file);
  }
  return file;
}
const shown = (problems: Problem[]): string[] => problems.map(formatProblem);

/** A few `npm run export` (a few seconds of tsx startup each) and an `npm pack`: minutes at most. */
const SCRIPT_TIMEOUT_MS = 300_000;

/** True in a test run started by a docs script. */
const nested = process.env[NESTED_RUN_VARIABLE] !== undefined;

/** Small and fixed: two campaigns of six jobs, seed 1, no "try again later" backoff to wait for. */
const SIMULATOR = { seed: 1, campaigns: 2, jobsPerCampaign: 6, tryLaterJobs: 0 } as const;

describe.each(docsFiles())('%s', (name) => {
  it('fences every code block with a known language and marker', () => {
    expect(shown(codeBlockProblems(read(name)))).toEqual([]);
  });

  it('writes `sh aws` blocks that bash can parse', async () => {
    expect(shown(await shellSyntaxProblems(read(name)))).toEqual([]);
  });
});

describe.each(linkedFiles())('%s', (name) => {
  const resolver = new TargetResolver(ROOT);

  it('links only to files, folders and headings that exist', () => {
    expect(shown(linkProblems(read(name), resolver))).toEqual([]);
  });

  it('names only repository paths that exist in inline code', () => {
    expect(shown(inlinePathProblems(read(name), resolver, ROOT))).toEqual([]);
  });
});

it('points users only at docs/ files and headings that exist, from the source', () => {
  expect(shown(sourceReferenceProblems(ROOT, new TargetResolver(ROOT)))).toEqual([]);
});

describe('the examples run', () => {
  let simulator: Simulator;
  let shell: Awaited<ReturnType<typeof userShell>>;
  let context: ShellContext;
  let lake: string;

  beforeAll(async () => {
    simulator = await startSimulator(SIMULATOR);
    shell = await userShell();
    context = {
      root: ROOT,
      apiUrl: simulator.url,
      apiKey: simulator.keys.valid,
      env: shell.env,
      timeoutMs: SCRIPT_TIMEOUT_MS,
    };
    lake = await tempDir('docs-lake');
    const target = exporter(simulator, lake);
    await target.run({ mode: 'full', dt: '2026-11-22' });
    await target.run({ mode: 'incremental', dt: '2026-11-23' });
  });

  afterAll(async () => {
    await simulator?.close();
    await shell?.dispose();
    if (lake) await rm(lake, { recursive: true, force: true });
  });

  /** DuckDB over the export folder for `act`, closed after. */
  async function withLake<T>(act: (sql: LakeSql) => Promise<T>): Promise<T> {
    const sql = await openLakeSql(lake);
    try {
      return await act(sql);
    } finally {
      sql.close();
    }
  }

  describe.each(docsFiles())('%s', (name) => {
    // Inside a docs script (`npm test` in a doc), the scripts are not run again.
    it.skipIf(nested)(
      'runs its sh blocks as one script against the simulator',
      {
        timeout: SCRIPT_TIMEOUT_MS + 30_000,
      },
      async () => {
        expect(shown(await runShellExamples(read(name), context))).toEqual([]);
      },
    );

    it('runs its sql statements on DuckDB over an export', async () => {
      expect(shown(await withLake((sql) => runSqlExamples(read(name), sql, lake)))).toEqual([]);
    });
  });

  describe('on fixtures: what a script gets, and a failing block or statement', () => {
    let fixtures: string;
    beforeAll(async () => {
      fixtures = await tempDir('docs-examples');
    });
    afterAll(async () => {
      if (fixtures) await rm(fixtures, { recursive: true, force: true });
    });

    /** A Markdown fixture with `text`, read as the tests read docs. */
    async function fixture(text: string): Promise<MarkdownFile> {
      const path = join(fixtures, `page-${Math.random().toString(36).slice(2)}.md`);
      await writeFile(path, text);
      return readMarkdown(path, fixtures);
    }

    const sh = (code: string, info = 'sh') => `\`\`\`${info}\n${code}\n\`\`\`\n`;

    it('runs the blocks in order as one script: the key on stdin, the URL replaced, exports kept, `sh aws` left out', async () => {
      const file = await fixture(
        [
          '# Page',
          sh(
            `read -rs INTEGRATION_API_KEY && export INTEGRATION_API_KEY\nexport INTEGRATION_API_BASE_URL=${DOCS_API_URL}`,
          ),
          sh(
            `test "$INTEGRATION_API_KEY" = '${simulator.keys.valid}'\nread -rs AGAIN && test "$AGAIN" = "$INTEGRATION_API_KEY"`,
          ),
          sh(
            `test "$INTEGRATION_API_BASE_URL" = '${simulator.url}'\ntest "$PWD" = '${ROOT.replace(/\/$/, '')}'`,
          ),
          sh('exit 9', 'sh aws'),
        ].join('\n'),
      );
      expect(await runShellExamples(file, context)).toEqual([]);
    });

    it('runs with a HOME and an npm global prefix of its own, marked as nested, without npm or vitest variables', async () => {
      const file = await fixture(
        sh(
          [
            `test "$HOME" != '${process.env.HOME}' && test -d "$HOME"`,
            `test "$${NESTED_RUN_VARIABLE}" = 1`,
            'test "$(npm prefix -g)" = "$npm_config_prefix"',
            'case ":$PATH:" in ":$npm_config_prefix/bin:"*) ;; *) exit 1 ;; esac',
            // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${VAR:-}, not a template
            'test -z "${VITEST:-}${INIT_CWD:-}${npm_lifecycle_event:-}${INTEGRATION_API_KEY:-}"',
          ].join('\n'),
        ),
      );
      expect(await runShellExamples(file, context)).toEqual([]);
    });

    it('fails a failing sh block, naming its first line and the tail of its output', async () => {
      const file = await fixture(
        [
          '# Page',
          '',
          sh('echo one'),
          sh('echo two\necho "no such table" >&2\nfalse'),
          sh('echo never'),
        ].join('\n'),
      );
      const [problem, ...more] = await runShellExamples(file, context);
      expect(more).toEqual([]);
      expect(problem).toMatchObject({ file: file.name, line: 7 });
      expect(problem?.message).toMatch(/^sh block failed \(exit 1;/);
      expect(problem?.message).toContain(
        '--- stderr (last 30 lines)\nno such table\n--- stdout (last 30 lines)\none\ntwo',
      );
      expect(problem?.message).not.toContain('never');
    });

    it('removes what the script added under out/, and keeps what was there', async () => {
      const out = join(ROOT, 'out');
      const hadOut = existsSync(out);
      const kept = join(out, `docs-examples-kept-${process.pid}`);
      await mkdir(kept, { recursive: true });
      const added = `out/docs-examples-added-${process.pid}`;
      const file = await fixture(
        sh(`mkdir -p ${added}/dt=2026-11-22\ntouch ${added}/dt=2026-11-22/x.parquet`),
      );
      try {
        expect(await runShellExamples(file, context)).toEqual([]);
        expect(existsSync(join(ROOT, added))).toBe(false);
        expect(existsSync(kept)).toBe(true);
      } finally {
        await rm(hadOut ? kept : out, { recursive: true, force: true });
      }
    });

    it('fails a failing sql statement, naming its line, and runs the others', async () => {
      const file = await fixture(
        [
          '# Page',
          '',
          '```sql',
          'SELECT count(*) FROM reports_latest;',
          '-- the runs, newest first',
          'SELECT run_id, status FROM runs ORDER BY run_id DESC;',
          'SELECT nope FROM reports;',
          '```',
          '',
          '```sql athena',
          'MSCK REPAIR TABLE reports;',
          '```',
        ].join('\n'),
      );
      const problems = await withLake((sql) => runSqlExamples(file, sql, lake));
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatchObject({ file: file.name, line: 7 });
      expect(problems[0]?.message).toMatch(/^sql statement failed on DuckDB: .*nope/);
    });
  });
});
