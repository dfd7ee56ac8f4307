/**
 * Writes the golden export (test/helpers/freeze-golden.ts) of each table format in its comparable form
 * (comparableFiles) into `<dir>/<format>/`: `tsx test/tools/freeze-golden.ts <dir>`. Run at 01c7797 to make
 * test/fixtures/freeze-golden/ (see its README).
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { tempDir } from '../helpers/export.js';
import { comparableFiles, GOLDEN_FORMATS, goldenExport, SHARED_WITH_HIVE } from '../helpers/freeze-golden.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: tsx test/tools/freeze-golden.ts <dir>');
for (const format of GOLDEN_FORMATS) {
  const out = await tempDir(`freeze-golden-${format}`);
  const manifest = await goldenExport(out, format);
  console.log(format, manifest.status, JSON.stringify(manifest.counts ?? {}));
  const fixture = join(dir, format);
  await rm(fixture, { recursive: true, force: true });
  for (const [path, bytes] of await comparableFiles(out)) {
    // An Iceberg run writes the same raw/ and quarantine/ files as a Hive run: kept once, in hive/.
    if (format === 'iceberg' && SHARED_WITH_HIVE.test(path)) continue;
    await mkdir(dirname(join(fixture, path)), { recursive: true });
    await writeFile(join(fixture, path), bytes);
  }
  await rm(out, { recursive: true, force: true });
}
