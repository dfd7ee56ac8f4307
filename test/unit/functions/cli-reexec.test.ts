import { describe, expect, it } from 'vitest';
import {
  CLI_MALLOC_ENV,
  CLI_START_FLAGS,
  type ProcessStart,
  REEXEC_MARKER,
  restartPlan,
} from '../../../functions/cli/reexec.js';

/** A process as `node /usr/lib/cre/dist/cli.mjs <args>` starts it, with `env` and Node's `execArgv`. */
function started(args: string[], env: NodeJS.ProcessEnv = {}, execArgv: string[] = []): ProcessStart {
  return {
    execPath: '/usr/bin/node',
    argv0: 'node',
    execArgv,
    argv: ['/usr/bin/node', '/usr/lib/cre/dist/cli.mjs', ...args],
    env: { PATH: '/usr/bin', ...env },
  };
}

describe('restartPlan', () => {
  it("starts export again with glibc's settings and V8's flags, the arguments and environment kept", () => {
    const plan = restartPlan(
      started(['export', '--out', 'a b', '--full'], { INTEGRATION_API_KEY: 'k' }, ['--import', 'x.mjs']),
    );

    expect(plan).toEqual({
      file: '/usr/bin/node',
      args: [
        'node',
        ...CLI_START_FLAGS,
        '--import',
        'x.mjs',
        '/usr/lib/cre/dist/cli.mjs',
        'export',
        '--out',
        'a b',
        '--full',
      ],
      env: { PATH: '/usr/bin', INTEGRATION_API_KEY: 'k', ...CLI_MALLOC_ENV, [REEXEC_MARKER]: '1' },
    });
  });

  it('gives glibc its mmap threshold and one arena, V8 its 8 MB semi-spaces', () => {
    const plan = restartPlan(started(['export', '--out', 'o']))!;

    expect(plan.env).toMatchObject({ MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '1' });
    expect(plan.args).toContain('--max-semi-space-size=8');
  });

  it("adds the arena limit beside a user's own mmap threshold, and keeps a user's arena limit", () => {
    const threshold = restartPlan(started(['export'], { MALLOC_MMAP_THRESHOLD_: '65536' }))!;
    expect(threshold.env).toMatchObject({ MALLOC_MMAP_THRESHOLD_: '65536', MALLOC_ARENA_MAX: '1' });

    const arenas = restartPlan(started(['export'], { MALLOC_ARENA_MAX: '8' }))!;
    expect(arenas.env).toMatchObject({ MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '8' });
  });

  it('never restarts a restarted process: its plan is none', () => {
    const plan = restartPlan(started(['export', '--out', 'o']))!;
    const [, ...execArgvAndScript] = plan.args;
    const scriptAt = execArgvAndScript.indexOf('/usr/lib/cre/dist/cli.mjs');

    const again = restartPlan({
      execPath: plan.file,
      argv0: 'node',
      execArgv: execArgvAndScript.slice(0, scriptAt),
      argv: ['/usr/bin/node', ...execArgvAndScript.slice(scriptAt)],
      env: plan.env,
    });

    expect(again).toBeUndefined();
  });

  it('leaves a run alone when the user set the marker (opt-out)', () => {
    expect(restartPlan(started(['export', '--out', 'o'], { [REEXEC_MARKER]: 'off' }))).toBeUndefined();
  });

  it('starts once for the other commands, --help, export --help and --version', () => {
    for (const args of [
      [],
      ['--version'],
      ['--help'],
      ['export', '--help'],
      ['export', '-h'],
      ['sql', 'x'],
      ['aws', 'status'],
      ['simulator'],
    ])
      expect(restartPlan(started(args)), args.join(' ')).toBeUndefined();
  });

  it("keeps the user's own glibc variables and V8 flags, and adds only what is missing", () => {
    const own = Object.fromEntries(Object.keys(CLI_MALLOC_ENV).map((name) => [name, '65536']));
    const plan = restartPlan(started(['export'], own, ['--max_semi_space_size=4']));
    expect(plan).toBeUndefined();

    const flagsOnly = restartPlan(started(['export'], own, []))!;
    expect(flagsOnly.args).toEqual(['node', ...CLI_START_FLAGS, '/usr/lib/cre/dist/cli.mjs', 'export']);
    expect(flagsOnly.env).toMatchObject(own);

    const fromNodeOptions = restartPlan(started(['export'], { NODE_OPTIONS: '--max-semi-space-size=8' }))!;
    expect(fromNodeOptions.args).toEqual(['node', '/usr/lib/cre/dist/cli.mjs', 'export']);
    expect(fromNodeOptions.env).toMatchObject(CLI_MALLOC_ENV);
  });
});
