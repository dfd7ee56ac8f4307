/**
 * A folder output written before locations became file:// URIs: its metadata, manifest lists
 * and manifests name files by bare absolute path. After a real full export, every such file is
 * turned back into that form (as the old writer left it); the next incremental run commits on
 * it, carrying the old manifests beside its new file:// ones and deleting rows of old files.
 * icebird and the sql command's DuckDB views read both kinds of path.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import avro from 'avsc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeSql } from '../../../functions/cli/sql.js';
import { REPORT_TABLES } from '../../../shared/export/tables.js';
import {
  decodeManifest,
  decodeManifestList,
  encodeManifest,
  encodeManifestList,
} from '../../../shared/iceberg/avro.js';
import { FileCatalog } from '../../../shared/iceberg/file-catalog.js';
import { currentTableOf, ICEBERG_TABLE_NAMES } from '../../../shared/iceberg/schema.js';
import { snapshotFiles } from '../../../shared/iceberg/snapshot-files.js';
import { ICEBERG_ROOT } from '../../../shared/layout.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { openDuckDb } from '../../helpers/duckdb.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { readIcebergTable, rowKey } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

/** Rewrites a table's metadata files, lists and manifests with bare paths instead of file:// URIs. */
async function toBarePaths(out: string, table: string) {
  const folder = join(out, ICEBERG_ROOT, table, 'metadata');
  const bare = (location: string) => location.replace(/^file:\/\//, '');
  const files = await readdir(folder);
  const lengths = new Map<string, number>();
  for (const f of files.filter((x) => x.endsWith('.avro') && !x.startsWith('snap-'))) {
    const path = join(folder, f);
    const meta = avro.extractFileHeader(path).meta as Record<string, Buffer>;
    const entries = (await decodeManifest(await readFile(path))).map((e) => ({
      ...e,
      data_file: { ...e.data_file, file_path: bare(e.data_file.file_path) },
    }));
    const bytes = await encodeManifest(entries, {
      schema: meta.schema!.toString(),
      schemaId: Number(meta['schema-id']!.toString()),
      partitionSpec: meta['partition-spec']!.toString(),
      partitionSpecId: Number(meta['partition-spec-id']!.toString()),
      content: meta.content!.toString() as 'data' | 'deletes',
    });
    await writeFile(path, bytes);
    lengths.set(path, bytes.length);
  }
  for (const f of files.filter((x) => x.startsWith('snap-'))) {
    const path = join(folder, f);
    const meta = avro.extractFileHeader(path).meta as Record<string, Buffer>;
    const list = (await decodeManifestList(await readFile(path))).map((m) => ({
      ...m,
      manifest_path: bare(m.manifest_path),
      manifest_length: lengths.get(bare(m.manifest_path)) ?? m.manifest_length,
    }));
    const parent = meta['parent-snapshot-id']!.toString();
    await writeFile(
      path,
      await encodeManifestList(list, {
        snapshotId: BigInt(meta['snapshot-id']!.toString()),
        parentSnapshotId: parent === 'null' ? undefined : BigInt(parent),
        sequenceNumber: Number(meta['sequence-number']!.toString()),
      }),
    );
  }
  for (const f of files.filter((x) => x.endsWith('.metadata.json'))) {
    const path = join(folder, f);
    await writeFile(path, (await readFile(path, 'utf8')).replaceAll(`file://${out}`, out));
  }
}

describe('a folder output whose Iceberg files name bare paths', () => {
  let simulator: Simulator;
  let out: string;
  const order: string[] = [];

  beforeAll(async () => {
    simulator = await startSimulator({ seed: 7, campaigns: 2, jobsPerCampaign: 10, reportSize: 'mixed' });
    out = await tempDir('iceberg-legacy-paths');
    const target = exporter(simulator, out);
    order.push((await target.run({ mode: 'full', tableFormat: 'iceberg' })).run_id);
    for (const table of ICEBERG_TABLE_NAMES) await toBarePaths(out, table);
    const published = simulator.dataset.campaigns
      .flatMap((c) => c.jobs)
      .filter((j) => j.state === 'published' && !j.invalid && !j.forbidden)
      .map((j) => j.id);
    for (const id of published.slice(0, 6)) simulator.dataset.touch(id);
    order.push((await target.run({ tableFormat: 'iceberg' })).run_id);
  }, 120_000);

  afterAll(async () => {
    await simulator?.close();
  });

  it('holds old bare paths and new file:// URIs side by side after the next run', async () => {
    const folder = join(out, ICEBERG_ROOT, 'reports_current', 'metadata');
    const versions = (await readdir(folder)).filter((f) => f.endsWith('.metadata.json')).sort();
    const metadata = await readFile(join(folder, versions.at(-1)!), 'utf8');
    expect(metadata).toContain(`"manifest-list": "${out}/`);
    expect(metadata).toContain(`"manifest-list": "file://${out}/`);
    // The new run's delete files name the old data files by their old, bare paths.
    const storage = new LocalStorage(out);
    const files = await snapshotFiles(storage, new FileCatalog(storage), 'reports_current');
    expect(files.positionDeletes.every((p) => p.startsWith('file://'))).toBe(true);
    const db = await openDuckDb();
    try {
      const named = await db.all(
        `SELECT DISTINCT file_path FROM read_parquet([${files.positionDeletes.map((p) => `'${fileURLToPath(p)}'`).join(', ')}])`,
      );
      expect(named.length).toBeGreaterThan(0);
      expect(named.every((r) => String(r.file_path).startsWith(`${out}/`))).toBe(true);
    } finally {
      await db.close();
    }
  });

  it.each(REPORT_TABLES)('%s_current reads the same in icebird and in the sql views', async (table) => {
    const reports = await readIcebergTable(join(out, ICEBERG_ROOT, 'reports'));
    // Newest by run id, as the current tables and the latest views order runs.
    const byRunId = [...order].sort();
    const newest = new Map<string, string>();
    for (const r of reports) {
      const seen = newest.get(String(r.job_id));
      if (seen === undefined || byRunId.indexOf(String(r.run_id)) > byRunId.indexOf(seen))
        newest.set(String(r.job_id), String(r.run_id));
    }
    const history = await readIcebergTable(join(out, ICEBERG_ROOT, table));
    const want = history
      .filter((r) => newest.get(String(r.job_id)) === r.run_id)
      .map((r) => rowKey(table, r))
      .sort();
    const current = await readIcebergTable(join(out, ICEBERG_ROOT, currentTableOf(table)));
    expect(current.map((r) => rowKey(table, r)).sort()).toEqual(want);
    const sql = await openLakeSql(out);
    try {
      const { rows } = await sql.query(`SELECT count(*) FROM ${currentTableOf(table)}`);
      expect(Number(rows[0]![0])).toBe(want.length);
      const all = await sql.query(`SELECT count(*) FROM ${table}`);
      expect(Number(all.rows[0]![0])).toBe(history.length);
    } finally {
      sql.close();
    }
  });
});
