import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { FLAGS, optionsFromArgs } from '../../simulator/cli-options.js';
import { simulatorCommand } from '../../simulator/command.js';
import { generateDataset } from '../../simulator/dataset.js';
import { startSimulator } from '../../simulator/index.js';

describe('simulator command line', () => {
  let child: ChildProcess | undefined;
  afterEach(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('reads every flag', () => {
    expect(
      optionsFromArgs([
        '--port',
        '0',
        '--seed',
        '5',
        '--campaigns',
        '2',
        '--jobs',
        '7',
        '--rate',
        '50',
        '--burst',
        '10',
        '--size',
        'mixed',
      ]),
    ).toEqual({
      port: 0,
      seed: 5,
      campaigns: 2,
      jobsPerCampaign: 7,
      reportSize: 'mixed',
      rateLimit: { ratePerSecond: 50, burst: 10 },
    });
    expect(() => optionsFromArgs(['--size', 'huge'])).toThrow(/--size/);
    expect(() => optionsFromArgs(['--seed', 'x'])).toThrow(/--seed/);
    expect(() => optionsFromArgs(['--nope'])).toThrow();
  });

  it('reads a fixed window, its header style and the latency', () => {
    expect(optionsFromArgs(['--window', '500/10', '--headers', 'laravel', '--latency', '80'])).toEqual({
      rateLimit: { windowRequests: 500, windowMs: 10_000, headers: 'laravel' },
      latencyMs: 80,
    });
    expect(optionsFromArgs(['--window', '3/1.5']).rateLimit).toStrictEqual({
      windowRequests: 3,
      windowMs: 1_500,
      headers: undefined,
    });
    expect(optionsFromArgs(['--latency', '0']).latencyMs).toBe(0);
    for (const bad of ['500', '0/10', '5/0', '5/-1', '1.5/10', 'a/b'])
      expect(() => optionsFromArgs(['--window', bad])).toThrow(`--window must be <requests>/<seconds>`);
    expect(() => optionsFromArgs(['--window', '5/1', '--rate', '3'])).toThrow(
      '--window and --rate exclude each other',
    );
    expect(() => optionsFromArgs(['--headers', 'ietf'])).toThrow('--headers needs --window');
    expect(() => optionsFromArgs(['--window', '5/1', '--headers', 'nginx'])).toThrow(
      '--headers must be one of none, laravel, github, ietf',
    );
    expect(() => optionsFromArgs(['--latency=-5'])).toThrow('--latency must be a number >= 0');
  });

  it('--help names every flag with its default, the defaults of a run without flags', async () => {
    const writes: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((chunk: string) => writes.push(chunk) > 0) as typeof process.stdout.write;
    try {
      expect(await simulatorCommand(['--help'])).toBe(0);
    } finally {
      process.stdout.write = write;
    }
    const help = writes.join('');
    for (const flag of Object.keys(FLAGS))
      expect(help).toMatch(new RegExp(`^  --${flag} [^\\n]*(\\n {23}[^\\n]*)?\\[[^\\]]+\\]$`, 'm'));
    const dataset = generateDataset(optionsFromArgs([]));
    const defaultOf = (flag: string) =>
      new RegExp(`^  --${flag} .*(?:\\n {23}.*)?\\[([^\\]]+)\\]$`, 'm').exec(help)?.[1];
    expect(defaultOf('seed')).toBe(String(dataset.seed));
    expect(defaultOf('campaigns')).toBe(String(dataset.campaigns.length));
    expect(defaultOf('jobs')).toBe(String(dataset.campaigns[0]?.jobs.length));
    expect(defaultOf('size')).toBe(dataset.reportSize);
  });

  it('leaves validating the window to the simulator', async () => {
    const options = optionsFromArgs(['--window', '5/1.5', '--headers', 'laravel']);
    await expect(startSimulator(options)).rejects.toThrow(/multiple of 1000/);
  });

  it('prints one JSON line with url and keys first, serves, and stops on SIGTERM', async () => {
    child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/simulator/main.ts', '--port', '0', '--seed', '5', '--jobs', '3'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const lines = createInterface({ input: child.stdout! });
    const [first] = (await once(lines, 'line')) as [string];
    const info = JSON.parse(first) as { url: string; keys: Record<string, string> };
    expect(Object.keys(info.keys).sort()).toEqual([
      'domain_restricted',
      'expired',
      'ip_restricted',
      'other_company',
      'valid',
    ]);
    expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(`${info.url}/integration/v1/client/campaigns`, {
      headers: { authorization: `Bearer ${info.keys.valid}` },
    });
    const body = (await response.json()) as { meta: { total: number } };
    expect(body.meta.total).toBe(4);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });
});
