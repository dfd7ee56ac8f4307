/**
 * Builders for exporter tests: run the exporter against a simulator into a folder, and the
 * row counts a report must give, computed from the generator's truth independently of the
 * flattener.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliDeps } from '../../functions/cli/deps.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { type LocalRunOptions, runExport } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { ReportTableName } from '../../shared/export/tables.js';
import { silentLog } from '../../shared/log.js';
import type { Storage } from '../../shared/storage/storage.js';
import type { Simulator } from '../simulator/index.js';

export const tempDir = (prefix: string): Promise<string> => mkdtemp(join(tmpdir(), `${prefix}-`));

export interface ExportTarget {
  deps: ExportDeps;
  run(options?: Partial<LocalRunOptions>): Promise<Manifest>;
}

/** An exporter wired to a simulator (valid key unless given) and a folder or a storage. */
export function exporter(
  simulator: Simulator,
  out: string,
  options: { apiKey?: string; storage?: Storage; maxRate?: number } = {},
): ExportTarget {
  const base = cliDeps({
    baseUrl: simulator.url,
    apiKey: options.apiKey ?? simulator.keys.valid,
    out,
    concurrency: 8,
    maxRate: options.maxRate ?? 10_000,
    log: silentLog,
  });
  const deps = options.storage ? { ...base, storage: options.storage } : base;
  return { deps, run: (run = {}) => runExport(deps, { mode: 'incremental', ...run }) };
}

type Json = Record<string, unknown>;
const items = (value: unknown): Json[] => (Array.isArray(value) ? value : []) as Json[];
const nonNull = (value: unknown): Json[] => items(value).filter((v) => v !== null);

/** Rows each report table must get from one report (`data` object), counted from the raw JSON. */
export function expectedRowCounts(report: unknown): Record<ReportTableName, number> {
  const counts: Record<ReportTableName, number> = {
    reports: 1,
    sections: 0,
    questions: 0,
    text_entries: 0,
    inputs: 0,
    media_images: 0,
  };
  for (const section of items((report as Json).sections)) {
    counts.sections++;
    for (const q of nonNull(section.questions)) {
      if (q.type === 'text_entry') counts.text_entries++;
      else counts.questions += 1 + items(q.logic_questions).length;
    }
    counts.text_entries += items(section.text_entries).length;
    counts.inputs += nonNull(section.inputs).length;
    for (const gallery of nonNull(section.media_galleries))
      counts.media_images += nonNull(gallery.images).length;
  }
  return counts;
}
