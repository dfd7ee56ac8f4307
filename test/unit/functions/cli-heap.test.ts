import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI_SEMI_SPACE_MB } from '../../../functions/cli/heap.js';

const HEAP = fileURLToPath(new URL('../../../functions/cli/heap.ts', import.meta.url));

/**
 * The new space (two semi-spaces) in MB after allocating short-lived objects at a run's rate,
 * in a fresh Node started as the packaged CLI is: no V8 flags on its command line.
 */
function newSpaceMbAfterGarbage(bound: boolean): number {
  const script = `
    ${bound ? `const { boundCliHeap } = await import(${JSON.stringify(HEAP)}); boundCliHeap();` : ''}
    const { getHeapSpaceStatistics } = await import('node:v8');
    let kept = [];
    for (let i = 0; i < 5e6; i++) {
      kept.push({ i, text: 'row ' + i });
      if (kept.length > 20000) kept = [];
      // A run awaits its I/O: the collections' observers run between.
      if (i % 10000 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    process.stdout.write(String(space.space_size / 2 ** 20));
  `;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  return Number(out);
}

describe('boundCliHeap', () => {
  it('caps the young generation at 2 × CLI_SEMI_SPACE_MB in a process started without V8 flags', () => {
    const unbound = newSpaceMbAfterGarbage(false);
    const bound = newSpaceMbAfterGarbage(true);

    // V8 grows it to tens of MB under this allocation rate unless told not to.
    expect(unbound, `unbound ${unbound} MB, bound ${bound} MB`).toBeGreaterThan(2 * CLI_SEMI_SPACE_MB);
    expect(bound, `unbound ${unbound} MB, bound ${bound} MB`).toBeLessThanOrEqual(2 * CLI_SEMI_SPACE_MB);
  });

  it("is the flag package.json's `npm start` and `npm run export` pass to tsx", () => {
    const { scripts } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
    for (const name of ['start', 'export'])
      expect(scripts[name], name).toContain(`--max-semi-space-size=${CLI_SEMI_SPACE_MB} `);
  });
});
