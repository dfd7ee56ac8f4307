/**
 * The direction of dependencies (ARCHITECTURE.md, STYLE.md), checked over the source: the core
 * never reaches out to its edges, and each layer of the core only down.
 */
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

async function sources(folder: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(join(ROOT, folder), { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts'))
      found.push(relative(ROOT, join(entry.parentPath, entry.name)));
  }
  return found;
}

/** Every import of a file: package names as written, relative ones as paths from the root. */
async function importsOf(file: string): Promise<string[]> {
  const text = await readFile(join(ROOT, file), 'utf8');
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]!);
  return specifiers.map((s) => (s.startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s));
}

/** The imports of the files under `from` that match `forbidden`, as `file → import`. */
async function violations(from: string, forbidden: (target: string) => boolean): Promise<string[]> {
  const found: string[] = [];
  for (const file of await sources(from)) {
    for (const target of await importsOf(file)) if (forbidden(target)) found.push(`${file} → ${target}`);
  }
  return found;
}

const under =
  (...folders: string[]) =>
  (target: string) =>
    folders.some((f) => target.startsWith(`${f}/`));

describe('dependencies point one way', () => {
  it('shared never imports functions, infra, test or Lambda types, and reads no environment', async () => {
    expect(
      await violations('shared', (t) => under('functions', 'infra', 'test')(t) || t === 'aws-lambda'),
    ).toEqual([]);
    const env: string[] = [];
    for (const file of await sources('shared')) {
      if ((await readFile(join(ROOT, file), 'utf8')).includes('process.env')) env.push(file);
    }
    expect(env).toEqual([]);
  });

  it('the Parquet library knows nothing of the exporter', async () => {
    expect(
      await violations('shared/parquet', under('shared/export', 'shared/api', 'shared/storage')),
    ).toEqual([]);
  });

  it('encoding and records never import the steps of a run', async () => {
    expect(
      await violations('shared/export/format', under('shared/export/run', 'shared/export/state')),
    ).toEqual([]);
    expect(await violations('shared/export/state', under('shared/export/run'))).toEqual([]);
  });

  it('the Iceberg writer takes from the export only the tables it writes, and the key layout imports nothing', async () => {
    expect(
      await violations('shared/iceberg', (t) => under('shared/export')(t) && t !== 'shared/export/tables.js'),
    ).toEqual([]);
    expect(await importsOf('shared/layout.ts')).toEqual([]);
  });

  it('infra takes from shared only definitions: tables, key layout, SQL, manifest, metric names, run defaults, AWS payloads, the stack name, table keys and glibc settings', async () => {
    const allowed = new Set([
      'shared/export/tables.js',
      'shared/layout.js',
      'shared/export/queries.js',
      'shared/export/views.js',
      'shared/export/raw-lines.js',
      'shared/export/state/manifest.js',
      'shared/errors.js',
      'shared/metrics.js',
      'shared/run-defaults.js',
      'shared/aws/payloads.js',
      'shared/aws/stack-name.js',
      'shared/aws/request-budget-table.js',
      // The Glue parameters that make a table Iceberg, shared with the Glue catalog.
      'shared/iceberg/glue-parameters.js',
      // glibc's mmap threshold, set for the functions and for the packaged CLI's restart.
      'shared/malloc.js',
    ]);
    expect(await violations('infra', (t) => t.startsWith('shared/') && !allowed.has(t))).toEqual([]);
  });
});
