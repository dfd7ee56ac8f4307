/**
 * The mutation catalog stays usable between runs of `npm run mutants` (which is not part of
 * `npm test`): every patch describes its defect and still applies to the code as it is, so that
 * a change that moves a fixed line shows here, not at the release's mutation run.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { catalogPatches, readMutant } from './catalog.js';

const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
const patches = catalogPatches(root);

describe('the mutation catalog (test/sim/mutants)', () => {
  it('holds patches', () => {
    expect(patches.length).toBeGreaterThan(0);
  });
  for (const path of patches) {
    const mutant = readMutant(path);
    it(`${mutant.slug}: describes its defect and applies to the code as it is`, () => {
      expect(mutant.title, 'line 1: # <title>').not.toBe('');
      expect(mutant.defect, 'Defect: line').not.toBe('');
      expect(mutant.fixedIn, 'Fixed in: line').not.toBe('');
      expect(mutant.where, 'Where: line').not.toBe('');
      // Throws with git's message when the patch no longer applies.
      execFileSync('git', ['apply', '--check', path], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    });
  }
});
