/**
 * The Node check that comes before anything else: in the packaged CLI's entry (built here into a
 * temporary folder, run by a real Node older than package.json `engines`) and in the npm
 * scripts' pre-script, test/tools/ensure-deps.cjs. The old Node is the machine's own
 * (/usr/bin/node is Node 20 here); without one these tests cannot show anything and are skipped.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeVersionProblem, satisfies } from '../../../functions/cli/node-version.cjs';
import { tempDir } from '../../helpers/export.js';
import { buildCli } from '../../tools/build-cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENGINES = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }
).engines.node;
const BUILD_TIMEOUT_MS = 120_000;

/** The first `node` on the machine older than `engines` (/usr/bin/node first), or undefined. */
function oldNode(): { path: string; version: string } | undefined {
  const candidates = ['/usr/bin/node'];
  try {
    candidates.push(...execFileSync('which', ['-a', 'node'], { encoding: 'utf8' }).split('\n'));
  } catch {
    // `which` found none: /usr/bin/node alone.
  }
  for (const path of candidates.filter(Boolean)) {
    try {
      const version = execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      if (!satisfies(version, ENGINES)) return { path, version };
    } catch {
      // Not there or not runnable.
    }
  }
  return undefined;
}

const old = oldNode();

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

function spawnOld(args: string[], env: NodeJS.ProcessEnv): Promise<Outcome> {
  return promisify(execFile)(old!.path, args, { cwd: ROOT, env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: Outcome) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
}

/** The one line both checks print, whatever the hint after it. */
const tooOld = (version: string) =>
  new RegExp(
    `^error: Node v${version.replaceAll('.', '\\.')} is too old: this needs Node ${ENGINES} \\(package\\.json engines\\); .*nvm install 22.*nodejs\\.org.*\\n$`,
  );

describe('the version check', () => {
  it('compares each part of the version as a number', () => {
    expect(satisfies('22.15.0', '>=22.15')).toBe(true);
    expect(satisfies('v24.1.0', '>=22.15')).toBe(true);
    expect(satisfies('22.9.0', '>=22.15')).toBe(false); // 9 < 15, not "9" > "1"
    expect(satisfies('22.14.9', '>=22.15')).toBe(false);
    expect(satisfies('20.20.2', '>=22.15')).toBe(false);
    expect(satisfies('100.0.0', '>=22.15')).toBe(true);
  });

  it('names the version found, the one needed and the way given', () => {
    expect(nodeVersionProblem('20.1.0', '>=22.15', 'do this')).toBe(
      'error: Node v20.1.0 is too old: this needs Node >=22.15 (package.json engines); do this',
    );
    expect(nodeVersionProblem('22.15.0', '>=22.15', 'do this')).toBeUndefined();
  });
});

describe.skipIf(old === undefined)(`on a Node older than engines (${old?.path} ${old?.version})`, () => {
  let dir: string;
  let entry: string;
  beforeAll(async () => {
    dir = await tempDir('cli-node-check');
    ({ outfile: entry } = await buildCli(join(dir, 'cli.mjs')));
  }, BUILD_TIMEOUT_MS);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the packaged CLI exits 2 with one line on --help, before the bundle is loaded', async () => {
    const { code, stdout, stderr } = await spawnOld([entry, '--help'], { PATH: dirname(old!.path) });
    expect(stdout).toBe('');
    expect(stderr).toMatch(tooOld(old!.version));
    expect(stderr).toContain('npx -p node@22 campaign-report-exporter');
    expect(code).toBe(2);
  });

  it('the npm scripts stop in their pre-script with one line, exit 2, when the Node on PATH is too old', async () => {
    // PATH without node_modules/.bin: as if the project's Node 24 were missing there.
    const { code, stdout, stderr } = await spawnOld(['test/tools/ensure-deps.cjs'], {
      PATH: dirname(old!.path),
    });
    expect(stdout).toBe('');
    expect(stderr).toMatch(tooOld(old!.version));
    expect(stderr).toContain('npm install');
    expect(code).toBe(2);
  });

  it('the pre-script lets the script go on when node_modules/.bin/node, first on PATH as npm run puts it, is new enough', async () => {
    const bin = join(ROOT, 'node_modules', '.bin');
    const { code, stderr } = await promisify(execFile)(join(bin, 'node'), ['test/tools/ensure-deps.cjs'], {
      cwd: ROOT,
      env: { PATH: `${bin}:${dirname(old!.path)}` },
    }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (error: Outcome) => ({ code: error.code, stderr: error.stderr }),
    );
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('package.json scripts', () => {
  const scripts = (
    JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  ).scripts;

  it('runs the Node check before every script that runs the project (tsx, cdk)', () => {
    const entries = Object.entries(scripts).filter(
      ([name, command]) => !name.startsWith('pre') && /^(tsx|cdk)\b/.test(command),
    );
    expect(entries.map(([name]) => name)).toEqual(
      expect.arrayContaining(['start', 'export', 'sql', 'aws', 'simulator', 'synth', 'docs']),
    );
    for (const [name] of entries)
      expect(scripts[`pre${name}`], `pre${name}`).toBe('node test/tools/ensure-deps.cjs');
  });
});
