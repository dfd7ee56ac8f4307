/**
 * The mutation catalog (test/sim/mutants/*.patch): each patch puts one fixed lifecycle defect
 * back. Its free text comes before the first `diff --git` line (git apply ignores it): line 1
 * `# <title>`, then `Defect:`, `Fixed in:` and `Where:` lines; then the diff, made with
 * `git diff` from the repository root.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/** A catalog entry: the patch and its description header. */
export interface Mutant {
  slug: string;
  path: string;
  title: string;
  defect: string;
  fixedIn: string;
  where: string;
}

/** The catalog's folder, from the repository root. */
export const CATALOG_DIR = 'test/sim/mutants';

/** The catalog's patches under `root`, by name. */
export function catalogPatches(root: string): string[] {
  const dir = join(root, CATALOG_DIR);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.patch'))
    .sort()
    .map((f) => join(dir, f));
}

/** Reads a patch's header: `# title`, then `Defect:`, `Fixed in:`, `Where:` lines (empty when absent). */
export function readMutant(path: string): Mutant {
  const text = readFileSync(path, 'utf8');
  const header = text.slice(0, Math.max(0, text.indexOf('diff --git')));
  const field = (name: string) => header.match(new RegExp(`^${name}:\\s*(.*)$`, 'm'))?.[1]?.trim() ?? '';
  return {
    slug: basename(path, '.patch'),
    path,
    title: header.match(/^#\s*(.*)$/m)?.[1]?.trim() ?? '',
    defect: field('Defect'),
    fixedIn: field('Fixed in'),
    where: field('Where'),
  };
}
