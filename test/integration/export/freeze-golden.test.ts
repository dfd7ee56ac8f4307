/**
 * Issue 27: a `freeze` run writes what the exporter wrote before the schema contract, byte for
 * byte. The golden export (test/helpers/freeze-golden.ts: the simulator's seed, a clock that
 * never moves, seeded randomness) was run at commit 01c7797 into test/fixtures/freeze-golden/
 * (its README); today's code, run the same way under `freeze`, must give every file again:
 * Parquet, raw JSON Lines, quarantine records, state, the manifest, and the Iceberg tables.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import type { SchemaContract } from '../../../shared/export/tables.js';
import { tempDir } from '../../helpers/export.js';
import {
  comparableFiles,
  filesUnder,
  GOLDEN_FORMATS,
  type GoldenFormat,
  goldenExport,
  SHARED_WITH_HIVE,
} from '../../helpers/freeze-golden.js';

const FIXTURE = join(import.meta.dirname, '../../fixtures/freeze-golden');

/** The golden files of `format`: its folder, and for Iceberg the raw/ and quarantine/ kept under hive/. */
async function golden(format: GoldenFormat): Promise<Map<string, Buffer>> {
  const files = await filesUnder(join(FIXTURE, format));
  if (format === 'iceberg')
    for (const [path, bytes] of await filesUnder(join(FIXTURE, 'hive')))
      if (SHARED_WITH_HIVE.test(path)) files.set(path, bytes);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** A file as a reader of a failure wants it: text, gzip decompressed; Parquet by its size. */
const shown = (path: string, bytes: Buffer | undefined): string => {
  if (bytes === undefined) return '(missing)';
  if (path.endsWith('.gz')) return gunzipSync(bytes).toString('utf8');
  if (path.endsWith('.parquet')) return `(Parquet, ${bytes.length} bytes)`;
  return bytes.toString('utf8');
};

/** The files of a golden run under `contract`, in the comparable form. */
async function exportUnder(format: GoldenFormat, contract: SchemaContract): Promise<Map<string, Buffer>> {
  const out = await tempDir(`freeze-golden-${format}`);
  dirs.push(out);
  await goldenExport(out, format, { schemaContract: contract });
  return comparableFiles(out);
}

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe.each(GOLDEN_FORMATS)('a freeze run (%s) writes the files of 01c7797', (format) => {
  it('every file, byte for byte', async () => {
    const expected = await golden(format);
    const actual = await exportUnder(format, 'freeze');
    expect([...actual.keys()].sort()).toEqual([...expected.keys()]);
    for (const [path, bytes] of expected) {
      const written = actual.get(path)!;
      // The text first, so that a failure shows where it differs; then every byte.
      expect(shown(path, written), path).toBe(shown(path, bytes));
      expect(written.equals(bytes), `${path}: the bytes differ`).toBe(true);
    }
  });
});
