/**
 * Runs the examples of a docs file as a user in a checkout would: its runnable `sh` blocks as
 * one bash script from the repository root, against the API simulator, and its runnable `sql`
 * statements on DuckDB over an export folder. Conventions: test/integration/docs/examples.test.ts.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { LakeSql } from '../../functions/cli/sql.js';
import { isRunnable, type Problem } from './doc-checks.js';
import { type CodeBlock, codeBlocks, type MarkdownFile } from './markdown.js';
import { sqlStatements } from './sql-statements.js';

const run = promisify(execFile);

/** "Your API" in the docs: replaced by the simulator's base URL before a script runs. */
export const DOCS_API_URL = 'https://api.acme.com';

/** Lines of the key on stdin: the docs `read -rs INTEGRATION_API_KEY`, maybe more than once. */
const KEY_LINES = 20;

/** Lines of stdout and of stderr shown for a failing block. */
const TAIL_LINES = 30;

/**
 * Set in a docs script's environment: a doc that runs `npm test` would run this test again,
 * which must not run the docs' scripts once more (it would never end).
 */
export const NESTED_RUN_VARIABLE = 'DOCS_EXAMPLES_RUNNING';

/** What a docs script runs with. */
export interface ShellContext {
  /** The repository root: the scripts' working folder. */
  root: string;
  /** The simulator's base URL, put where the docs say {@link DOCS_API_URL}. */
  apiUrl: string;
  /** Written to stdin, one line per read. */
  apiKey: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

/** The variables of a user's shell kept from the test's environment; the rest (npm's, vitest's, INTEGRATION_*) dropped. */
const USER_VARIABLE =
  /^(?:PATH|LANG|LC_\w+|TERM|TZ|TMPDIR|USER|LOGNAME|SHELL|(?:HTTPS?|NO|ALL)_PROXY|(?:https?|no|all)_proxy|NODE_EXTRA_CA_CERTS|SSL_CERT_(?:FILE|DIR))$/;

/** PATH without node_modules/.bin folders (npx and npm run add them; a user's shell has none). */
const userPath = (path: string): string =>
  path
    .split(delimiter)
    .filter((folder) => !/[\\/]node_modules[\\/]/.test(`${folder}/`))
    .join(delimiter);

/** npm's config files and cache as this machine has them (HOME moves, so they are named). */
async function npmSettings(): Promise<Record<string, string>> {
  const { stdout } = await run('npm', ['config', 'get', 'globalconfig', 'userconfig', 'cache']);
  const settings: Record<string, string> = {};
  for (const line of stdout.trim().split('\n')) {
    const [key = '', ...value] = line.split('=');
    settings[`npm_config_${key}`] = value.join('=');
  }
  return settings;
}

/**
 * A user's environment in a temporary HOME, with `npm install -g` going to a temporary prefix
 * whose bin is first on PATH, then the Node that runs the tests. `dispose` removes both folders.
 */
export async function userShell(): Promise<{ env: NodeJS.ProcessEnv; dispose(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'docs-shell-'));
  const home = join(dir, 'home');
  const prefix = join(dir, 'npm-global');
  await mkdir(home);
  await mkdir(join(prefix, 'bin'), { recursive: true });
  const kept = Object.entries(process.env).filter(([key]) => USER_VARIABLE.test(key));
  const env: NodeJS.ProcessEnv = {
    ...Object.fromEntries(kept),
    ...(await npmSettings()),
    HOME: home,
    npm_config_prefix: prefix,
    [NESTED_RUN_VARIABLE]: '1',
    // The Node running the tests (the engines' >= 22.15) stands for the user's: this machine's
    // own `node` may be older, and the packaged CLI needs a recent one.
    PATH: [join(prefix, 'bin'), dirname(process.execPath), userPath(process.env.PATH ?? '')].join(delimiter),
  };
  return { env, dispose: () => rm(dir, { recursive: true, force: true }) };
}

const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * One bash script of `blocks` in order: strict mode, then each block after a line that records
 * its first line number in `statusFile` (the last one written names the block that failed).
 */
export function shellScript(blocks: readonly CodeBlock[], apiUrl: string, statusFile: string): string {
  const parts = blocks.map(
    (block) =>
      `printf '%s\\n' ${block.line} > ${shellQuote(statusFile)}\n${block.value.replaceAll(DOCS_API_URL, apiUrl)}\n`,
  );
  return ['set -euo pipefail', ...parts].join('\n');
}

interface BashOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Ends the process group of a detached child: its background jobs too. */
function endGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    // ESRCH: the group has ended already.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Runs `bash scriptFile`, feeding `stdin`; on time out, or once bash exits, ends what it left running. */
async function runBash(scriptFile: string, stdin: string, context: ShellContext): Promise<BashOutcome> {
  const child = spawn('bash', [scriptFile], { cwd: context.root, env: context.env, detached: true });
  const exited = once(child, 'exit');
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // A script that never reads its stdin closes it: EPIPE on our side is expected then.
  let stdinError: NodeJS.ErrnoException | undefined;
  child.stdin.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') stdinError = error;
  });
  child.stdin.end(stdin);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    endGroup(child.pid);
  }, context.timeoutMs);
  const closed = once(child, 'close');
  const [code] = (await exited) as [number | null];
  clearTimeout(timer);
  endGroup(child.pid);
  await closed;
  if (stdinError) throw new Error(`writing the key to the script's stdin failed`, { cause: stdinError });
  return { code, stdout, stderr, timedOut };
}

/** Characters shown of one line of output (a stack trace can quote a whole minified bundle). */
const LINE_WIDTH = 400;

const tail = (text: string): string =>
  text
    .trimEnd()
    .split('\n')
    .slice(-TAIL_LINES)
    .map((line) => (line.length > LINE_WIDTH ? `${line.slice(0, LINE_WIDTH)}…` : line))
    .join('\n');

function failure(outcome: BashOutcome, seconds: number): string {
  const why = outcome.timedOut ? `timed out after ${seconds} s` : `exit ${outcome.code ?? 'by signal'}`;
  return [
    `sh block failed (${why}; the file's sh blocks run as one script from the repository root)`,
    `--- stderr (last ${TAIL_LINES} lines)`,
    tail(outcome.stderr),
    `--- stdout (last ${TAIL_LINES} lines)`,
    tail(outcome.stdout),
  ].join('\n');
}

/** `read`'s result, or undefined when the file or folder does not exist. */
async function ifExists<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

const entries = async (folder: string): Promise<Set<string> | undefined> =>
  ifExists(async () => new Set(await readdir(folder)));

/** Removes what is in `out` but not in `before`; `out` itself when it was not there before. */
async function removeAdded(out: string, before: Set<string> | undefined): Promise<void> {
  if (before === undefined) return rm(out, { recursive: true, force: true });
  for (const name of (await entries(out)) ?? [])
    if (!before.has(name)) await rm(join(out, name), { recursive: true, force: true });
}

/** Runs `act`, then removes what it added under `<root>/out/` (the folder itself if it was not there). */
export async function removingNewOutEntries<T>(root: string, act: () => Promise<T>): Promise<T> {
  const out = join(root, 'out');
  const before = await entries(out);
  try {
    return await act();
  } finally {
    await removeAdded(out, before);
  }
}

/** Runs the file's runnable `sh` blocks as one script; a failure names the block's first line. */
export async function runShellExamples(file: MarkdownFile, context: ShellContext): Promise<Problem[]> {
  const blocks = codeBlocks(file).filter((block) => isRunnable(block, 'sh'));
  if (blocks.length === 0) return [];
  const dir = await mkdtemp(join(tmpdir(), 'docs-sh-'));
  try {
    const statusFile = join(dir, 'block');
    const scriptFile = join(dir, 'script.sh');
    await writeFile(scriptFile, shellScript(blocks, context.apiUrl, statusFile));
    const stdin = `${context.apiKey}\n`.repeat(KEY_LINES);
    const outcome = await removingNewOutEntries(context.root, () => runBash(scriptFile, stdin, context));
    if (outcome.code === 0 && !outcome.timedOut) return [];
    // No status: bash failed before the first block began.
    const status = await ifExists(() => readFile(statusFile, 'utf8'));
    const line = status === undefined ? blocks[0]!.line : Number(status.trim());
    return [{ file: file.name, line, message: failure(outcome, context.timeoutMs / 1000) }];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `sh aws` blocks are not run (they need an account): `bash -n` checks their syntax. */
export async function shellSyntaxProblems(file: MarkdownFile): Promise<Problem[]> {
  const blocks = codeBlocks(file).filter((block) => block.lang === 'sh' && block.markers.includes('aws'));
  const problems: Problem[] = [];
  for (const block of blocks) {
    const message = await run('bash', ['-n', '-c', block.value]).then(
      () => undefined,
      (error: { stderr: string }) => `sh aws block: bash -n: ${error.stderr.trim()}`,
    );
    if (message) problems.push({ file: file.name, line: block.line, message });
  }
  return problems;
}

const firstLine = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).split('\n')[0]!;

/** The export folder the docs' SQL names, as a user's own `--out` (cli.md's examples write it). */
export const DOCS_OUT = 'out/acme/';

/**
 * Runs every statement of the file's runnable `sql` blocks, in order, on `lake` (DuckDB over the
 * export folder `root`; a path under `out/acme/` in a statement is read from there); each error
 * names its line.
 */
export async function runSqlExamples(file: MarkdownFile, lake: LakeSql, root: string): Promise<Problem[]> {
  const problems: Problem[] = [];
  for (const block of codeBlocks(file).filter((b) => isRunnable(b, 'sql'))) {
    for (const statement of sqlStatements(block.value)) {
      const text = statement.text.replaceAll(`'${DOCS_OUT}`, `'${root}/`);
      const message = await lake.query(text).then(
        () => undefined,
        (error: unknown) => `sql statement failed on DuckDB: ${firstLine(error)}`,
      );
      // The block's text starts on the line after its fence.
      if (message) problems.push({ file: file.name, line: block.line + statement.line, message });
    }
  }
  return problems;
}
