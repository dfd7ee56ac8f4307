/**
 * The export command in-process (exportCommand with its own streams, env and folder) against a
 * scripted API on 127.0.0.1 that records every request, or the simulator: what a new user and
 * a hostile setup run into, each reproduced.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CliIo, exportCommand } from '../../../functions/cli/export-command.js';
import { API_PATH_PREFIX } from '../../../shared/api/base-url.js';
import { newRunId } from '../../../shared/export/run/context.js';
import { OutputLock } from '../../../shared/export/state/lock.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { Captured } from '../../helpers/cli.js';
import { tempDir } from '../../helpers/export.js';
import { type ApiScript, onePage, scriptedApi } from '../../helpers/scripted-api.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { listPage, reportData } from '../../unit/api/fixtures.js';
import { errorReply, type Reply, type TestServer } from '../api/server.js';

const KEY = 'sk_test_4f1c9a7e2b';
const isRoot = process.getuid?.() === 0;

const simulators: Simulator[] = [];
const undo: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(simulators.splice(0).map((s) => s.close()));
  for (const step of undo.splice(0)) await step();
});

/** A small API: campaign 7 with jobs 101 and 102, each with a report; parts replaceable. */
const scripted = (script: ApiScript = {}): Promise<TestServer> =>
  scriptedApi({ campaignIds: [7], jobIds: [101, 102], ...script });

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  /** stderr's lines. */
  errors: string[];
}

/** Runs the command with its output captured; the working folder is a temp folder unless given. */
async function run(argv: string[], env: NodeJS.ProcessEnv, io: Partial<CliIo> = {}): Promise<Ran> {
  const stdout = new Captured();
  const stderr = new Captured();
  const code = await exportCommand(argv, env, { stdout, stderr, cwd: await tempDir('cwd'), ...io });
  return { code, stdout: stdout.text, stderr: stderr.text, errors: stderr.lines() };
}

const envOf = (server: { url: string }, key = KEY): NodeJS.ProcessEnv => ({
  INTEGRATION_API_BASE_URL: server.url,
  INTEGRATION_API_KEY: key,
});

describe('the key and the base URL, checked before any request', () => {
  it.each(['   ', '\n', ''])(
    'exits 2 for INTEGRATION_API_KEY=%j with one line, sending nothing',
    async (key) => {
      const server = await scripted();
      const r = await run(['--out', await tempDir('out')], envOf(server, key));
      expect(r.code).toBe(2);
      expect(r.errors).toEqual(['error: INTEGRATION_API_KEY is empty (see --help)']);
      expect(r.stdout).toBe('');
      expect(server.requests).toEqual([]);
    },
  );

  it('sends a key pasted with a trailing newline as the key', async () => {
    const server = await scripted();
    const r = await run(['--out', await tempDir('out')], envOf(server, `${KEY}\n`));
    expect(r.code).toBe(0);
    expect(server.requests.length).toBeGreaterThan(0);
    for (const request of server.requests) expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('exits 2 for a key with a control character inside, never showing the key', async () => {
    const server = await scripted();
    const r = await run(
      ['--out', await tempDir('out')],
      envOf(server, `${KEY.slice(0, 9)}\u0007${KEY.slice(9)}`),
    );
    expect(r.code).toBe(2);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/^error: INTEGRATION_API_KEY holds a control character/);
    expect(r.stderr + r.stdout).not.toContain(KEY.slice(0, 9));
    expect(r.stderr + r.stdout).not.toContain(KEY.slice(9));
    expect(server.requests).toEqual([]);
  });

  it('accepts a base URL that already ends in /integration/v1/client, without doubling the path', async () => {
    const server = await scripted();
    const env = { ...envOf(server), INTEGRATION_API_BASE_URL: `${server.url}${API_PATH_PREFIX}/` };
    const r = await run(['--out', await tempDir('out')], env);
    expect(r.code).toBe(0);
    expect(server.requests[0]?.path).toBe(`${API_PATH_PREFIX}/verify`);
    expect(server.requests.every((q) => !q.path.includes(`${API_PATH_PREFIX}${API_PATH_PREFIX}`))).toBe(true);
  });

  it('exits 2 naming INTEGRATION_API_BASE_URL and what it got when the scheme is missing', async () => {
    const server = await scripted();
    const host = server.url.replace('http://', '');
    const r = await run(['--out', await tempDir('out')], {
      ...envOf(server),
      INTEGRATION_API_BASE_URL: host,
    });
    expect(r.code).toBe(2);
    expect(r.errors).toEqual([
      `error: INTEGRATION_API_BASE_URL must start with https:// or http://, got "${host}". write it as https://${host} (see --help)`,
    ]);
    expect(server.requests).toEqual([]);
  });
});

describe('flag errors name the flag and its range, before any request', () => {
  it.each([
    [['--max-rate', '1001'], '--max-rate takes a whole number from 1 to 1000'],
    [['--max-rate', '-5'], '--max-rate takes a whole number from 1 to 1000'],
    [['--date', '2026-13-45'], '--date takes a calendar date YYYY-MM-DD, got 2026-13-45'],
    [['--max-body-mb', '0'], '--max-body-mb takes a whole number from 1 to 512'],
    [['--schema-contract', 'strict'], '--schema-contract takes evolve or freeze, got strict'],
  ])('%j', async (flags, message) => {
    const server = await scripted();
    const r = await run(['--out', await tempDir('out'), ...flags], envOf(server));
    expect(r.code).toBe(2);
    expect(r.errors).toEqual([`error: ${message} (see --help)`]);
    expect(server.requests).toEqual([]);
  });

  it('runs with --concurrency 65', async () => {
    const server = await scripted();
    expect((await run(['--out', await tempDir('out'), '--concurrency', '65'], envOf(server))).code).toBe(0);
  });
});

describe('--out', () => {
  it('exits 1 for a file, naming --out, before the first API request', async () => {
    const server = await scripted();
    const file = join(await tempDir('out'), 'exports.json');
    await writeFile(file, '{}');
    const r = await run(['--out', file], envOf(server));
    expect(r.code).toBe(1);
    expect(r.errors).toEqual([
      `error: --out ${file} is a file, not a folder. pass a folder (created if missing) or s3://bucket/prefix`,
    ]);
    expect(r.stdout).toBe('');
    expect(server.requests).toEqual([]);
  });

  it('exits 1 for a path under a file, before the first API request', async () => {
    const server = await scripted();
    const file = join(await tempDir('out'), 'exports.json');
    await writeFile(file, '{}');
    const r = await run(['--out', join(file, 'lake')], envOf(server));
    expect(r.code).toBe(1);
    expect(r.errors).toEqual([
      `error: --out ${join(file, 'lake')} cannot be a folder: a part of its path is a file. pass a folder, or s3://bucket/prefix`,
    ]);
    expect(server.requests).toEqual([]);
  });

  // Root passes permission checks: as root the command runs under the effective uid of nobody.
  it(`exits 1 for a read-only folder before the first API request${isRoot ? ' (as root: run as nobody)' : ''}`, async () => {
    const server = await scripted();
    const parent = await tempDir('out');
    const folder = join(parent, 'read-only');
    await mkdir(folder);
    await chmod(parent, 0o755);
    await chmod(folder, 0o555);
    undo.push(() => chmod(folder, 0o755));
    let r: Ran;
    const cwd = await tempDir('cwd');
    try {
      if (isRoot) process.seteuid!(65534);
      r = await run(['--out', folder], envOf(server), { cwd });
    } finally {
      if (isRoot) process.seteuid!(0);
    }
    expect(r.code).toBe(1);
    expect(r.errors).toEqual([
      `error: --out ${folder} is not writable: permission denied. pass a folder you may write to`,
    ]);
    expect(server.requests).toEqual([]);
  });

  it('takes a relative --out from the folder the command runs in, whatever INIT_CWD says', async () => {
    const server = await scripted();
    const caller = await tempDir('caller');
    const elsewhere = await tempDir('elsewhere');
    const r = await run(
      ['--out', 'exports/acme', '--date', '2026-11-22'],
      { ...envOf(server), INIT_CWD: elsewhere },
      { cwd: caller },
    );
    expect(r.code).toBe(0);
    expect(await readdir(join(caller, 'exports', 'acme', 'runs', 'dt=2026-11-22'))).toHaveLength(1);
    expect(await readdir(elsewhere)).toEqual([]);
    expect(r.stdout).toMatch(new RegExp(`output\\s+${join(caller, 'exports', 'acme')}`));
  });
});

describe('another run writing to --out', () => {
  it('exits 1 with one line naming the run that holds it, before any API request', async () => {
    const server = await scripted();
    const out = await tempDir('out');
    const held = await OutputLock.acquire(new LocalStorage(out), {
      ttlMs: 60_000,
      newRunId: (at) => newRunId(at),
    });
    undo.push(() => held.release());
    const r = await run(['--out', out], envOf(server));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/^error: /);
    expect(r.errors[0]).toContain(held.runId);
    expect(server.requests).toEqual([]);
  });
});

describe('what a run prints', () => {
  it('prints exactly one error line and no summary for a failed run, the reason naming the error_code', async () => {
    // The key is revoked mid-run: verify and the listings pass, the reports answer 401.
    const server = await scripted({ report: () => errorReply(401, 'INVALID_API_KEY', 'Invalid API key') });
    const r = await run(['--out', await tempDir('out')], envOf(server));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/^error: .*INVALID_API_KEY.*\. \S/);
    expect(r.stderr).not.toContain('{');
  });

  it('prints one error line for a key the API refuses at verify', async () => {
    const simulator = await startSimulator({ seed: 3, campaigns: 1, jobsPerCampaign: 3 });
    simulators.push(simulator);
    const r = await run(['--out', await tempDir('out')], envOf(simulator, simulator.keys.expired));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.errors).toEqual([expect.stringMatching(/^error: API key expired \(API_KEY_EXPIRED\)\. \S/)]);
  });

  it('keeps the summary on stdout for a finished run, and progress on stderr as plain lines', async () => {
    const server = await scripted();
    const r = await run(['--out', await tempDir('out')], envOf(server));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}status\s+succeeded$/m);
    expect(r.stdout).toMatch(/^ {2}campaigns invalid\s+0$/m);
    expect(r.stdout).toMatch(/^ {2}duplicates\s+0$/m);
    expect(r.errors).toEqual([
      expect.stringMatching(/^campaigns 1\/1 {2}reports 2\/2 \(100%\) {2}exported 2/),
    ]);
  });

  it('shows warnings as human lines, not JSON', async () => {
    const server = await scripted({
      campaigns: () => onePage([{ id: 7 }, { id: 8 }]),
      jobs: (id) =>
        id === 8
          ? errorReply(404, 'NOT_FOUND', 'Campaign not found')
          : { body: listPage([{ id: 101 }], 1, 1) },
    });
    const r = await run(['--out', await tempDir('out')], envOf(server));
    expect(r.code).toBe(0);
    expect(r.errors).toContain('warn: campaign not found while listing its jobs (campaign_id=8)');
  });

  it('--quiet prints no progress and no summary, only warnings', async () => {
    const server = await scripted({
      campaigns: () => onePage([{ id: 7 }, { id: 8 }]),
      jobs: (id) =>
        id === 8
          ? errorReply(404, 'NOT_FOUND', 'Campaign not found')
          : { body: listPage([{ id: 101 }], 1, 1) },
    });
    const r = await run(['--out', await tempDir('out'), '--quiet'], envOf(server));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.errors).toEqual(['warn: campaign not found while listing its jobs (campaign_id=8)']);
  });

  it('--verbose logs one line per API request', async () => {
    const server = await scripted();
    const r = await run(['--out', await tempDir('out'), '--verbose'], envOf(server));
    expect(r.code).toBe(0);
    const requests = r.errors.filter((line) => line.startsWith('debug: GET '));
    expect(requests).toHaveLength(server.requests.length);
    expect(requests).toContain(
      `debug: GET ${API_PATH_PREFIX}/verify -> 200 in ${requests[0]!.match(/in (\d+) ms/)![1]} ms`,
    );
    expect(r.errors.some((line) => line.startsWith('info: key verified'))).toBe(true);
  });

  it('shows invalid campaign items in the summary', async () => {
    const server = await scripted({ campaigns: () => onePage([{ id: 7 }, { id: 'seven' }]) });
    const r = await run(['--out', await tempDir('out')], envOf(server));
    expect(r.stdout).toMatch(/^ {2}status\s+partial$/m);
    expect(r.stdout).toMatch(/^ {2}campaigns invalid\s+1$/m);
  });
});

describe('a full run says how long it will take', () => {
  const MANIFEST_LINE = /^ {2}manifest\s+(\S+)$/m;

  it('prints the reports and the time at --max-rate on stderr, its requests counted in the manifest', async () => {
    const simulator = await startSimulator({ seed: 11, campaigns: 3, jobsPerCampaign: 4 });
    simulators.push(simulator);
    const out = await tempDir('out');
    const r = await run(['--out', out, '--full', '--max-rate', '20'], envOf(simulator, simulator.keys.valid));
    expect(r.code).toBe(0);
    // verify, 1 campaign page, 3 job pages, 12 reports: 17 requests at 20/s.
    expect(r.errors[0]).toBe(
      'full run: 12 reports in 3 campaigns; at 20 requests/s (--max-rate) about 1 s, longer if the API ' +
        'throttles (429); a higher --max-rate shortens it if the API allows more, and a higher ' +
        '--concurrency if it takes over 6.4 s to answer; incremental runs after it fetch only new and changed reports',
    );
    expect(r.stdout).not.toContain('full run');
    // One count per campaign besides its listing, in the manifest's requests as in the simulator's.
    expect(simulator.stats.byEndpoint.jobs).toBe(3 + 3);
    const manifest = JSON.parse(await readFile(join(out, MANIFEST_LINE.exec(r.stdout)![1]!), 'utf8')) as {
      requests: { total: number };
    };
    expect(manifest.requests.total).toBe(simulator.stats.total);
  });

  it('says it on a terminal before any campaign is planned, the bar drawn again below it', async () => {
    const simulator = await startSimulator({ seed: 11, campaigns: 2, jobsPerCampaign: 2 });
    simulators.push(simulator);
    const terminal = new Captured(true);
    const r = await run(['--out', await tempDir('out'), '--full'], envOf(simulator, simulator.keys.valid), {
      stderr: terminal,
    });
    expect(r.code).toBe(0);
    const said = terminal.text.indexOf('\r\x1b[Kfull run: 4 reports in 2 campaigns;');
    expect(said).toBeGreaterThan(-1);
    // Planned campaigns give the bar its reports to fetch: `reports 0/2` or more.
    expect(terminal.text.search(/reports \d+\/[1-9]/)).toBeGreaterThan(said);
  });

  it('says nothing and counts nothing for an incremental run, nor with --quiet', async () => {
    const simulator = await startSimulator({ seed: 11, campaigns: 2, jobsPerCampaign: 2 });
    simulators.push(simulator);
    const incremental = await run(['--out', await tempDir('out')], envOf(simulator, simulator.keys.valid));
    const quiet = await run(
      ['--out', await tempDir('out'), '--full', '-q'],
      envOf(simulator, simulator.keys.valid),
    );
    expect([incremental.code, quiet.code]).toEqual([0, 0]);
    expect(`${incremental.stderr}${quiet.stderr}`).not.toContain('full run');
    expect(simulator.stats.byEndpoint.jobs).toBe(2 + 2); // each run's listings, no count
  });
});

describe('--schema-contract', () => {
  /**
   * Runs the command into a new folder and returns the text of its run record as it stood while
   * the reports were fetched (a finished run's records are cleared when it closes).
   */
  const runRecordWith = async (flags: string[]): Promise<string> => {
    const out = await tempDir('out');
    let text: string | undefined;
    const server = await scripted({
      report: (_campaign, jobId) => {
        const runs = join(out, 'state', 'runs');
        text ??= readFileSync(join(runs, readdirSync(runs)[0]!, 'run.json'), 'utf8');
        return { body: { data: reportData(jobId) } };
      },
    });
    expect((await run(['--out', out, ...flags], envOf(server))).code).toBe(0);
    expect(text).toBeDefined();
    return text!;
  };

  it.each([
    ['no flag', []],
    ['--schema-contract evolve', ['--schema-contract', 'evolve']],
  ])('starts an evolve run with %s, and says so in its run record', async (_name, flags) => {
    expect(JSON.parse(await runRecordWith(flags))).toMatchObject({
      schema_contract: 'evolve',
      driver: 'local',
    });
  });

  it('writes the run record of a frozen run as before the option: without schema_contract', async () => {
    const text = await runRecordWith(['--schema-contract', 'freeze']);
    expect(JSON.parse(text)).toMatchObject({ mode: 'incremental', driver: 'local' });
    expect(text).not.toContain('schema_contract');
  });
});

describe('--fail-on-partial', () => {
  it('exits 0 for a partial run without it and 3 with it, the summary shown both times', async () => {
    const simulator = await startSimulator({
      seed: 5,
      campaigns: 1,
      jobsPerCampaign: 6,
      invalidReportJobs: 1,
    });
    simulators.push(simulator);
    // The invalid report makes a frozen run partial (an evolve run lands it: the next test).
    const without = await run(
      ['--out', await tempDir('out'), '--full', '--schema-contract', 'freeze'],
      envOf(simulator, simulator.keys.valid),
    );
    expect(without.code).toBe(0);
    expect(without.stdout).toMatch(/^ {2}status\s+partial$/m);
    const withFlag = await run(
      ['--out', await tempDir('out'), '--full', '--schema-contract', 'freeze', '--fail-on-partial'],
      envOf(simulator, simulator.keys.valid),
    );
    expect(withFlag.code).toBe(3);
    expect(withFlag.stdout).toMatch(/^ {2}status\s+partial$/m);
    expect(withFlag.stdout).toMatch(/^ {4}invalid\s+1$/m);
  });

  it('exits 0 with it for the same report under the default contract (evolve), which lands it', async () => {
    const simulator = await startSimulator({
      seed: 5,
      campaigns: 1,
      jobsPerCampaign: 6,
      invalidReportJobs: 1,
    });
    simulators.push(simulator);
    const r = await run(
      ['--out', await tempDir('out'), '--full', '--fail-on-partial'],
      envOf(simulator, simulator.keys.valid),
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}status\s+succeeded$/m);
    expect(r.stdout).toMatch(/^ {4}invalid\s+0$/m);
  });

  it('exits 0 with it when the run succeeded', async () => {
    const server = await scripted();
    expect((await run(['--out', await tempDir('out'), '--fail-on-partial'], envOf(server))).code).toBe(0);
  });
});

describe('--max-body-mb', () => {
  const MIB = 1024 * 1024;
  const bigReport = (_c: number, jobId: number): Reply => ({
    body: { data: { ...reportData(jobId), padding: 'x'.repeat(1.5 * MIB) } },
  });

  it('reaches the client: an answer larger than it fails that report', async () => {
    const server = await scripted({
      report: (c, j) => (j === 102 ? bigReport(c, j) : { body: { data: reportData(j) } }),
    });
    const r = await run(['--out', await tempDir('out'), '--max-body-mb', '1'], envOf(server));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}status\s+partial$/m);
    expect(r.stdout).toMatch(/^ {4}failed\s+1$/m);
    expect(r.stdout).toMatch(/^ {4}exported\s+1$/m);
  });

  it('takes the same answer under the default limit', async () => {
    const server = await scripted({ report: bigReport });
    const r = await run(['--out', await tempDir('out')], envOf(server));
    expect(r.stdout).toMatch(/^ {4}exported\s+2$/m);
  });
});
