/**
 * What a run supersedes in the current tables (`shared/iceberg/current.ts`), and what newer runs
 * supersede of the run's own rows when its closing commits after theirs.
 *
 * Runs can commit out of run order: a crashed run's closing is taken up by a later finisher or
 * by a later run's recovery (`recover.ts`), after newer runs committed. The `*_latest` views
 * (`shared/export/views.ts`) order by run id whatever the commit order, and so do the current
 * tables: a run's rule supersedes only rows of older runs (`SupersedeRule.runId`), and a run
 * committing late drops its own rows of the jobs a newer run exported, got a 404 for, or left
 * out of a complete listing of their campaign ({@link blockedByNewerRuns}). The newer runs are
 * those whose snapshots the history tables (`campaigns`, `jobs`, `reports`) hold: every run
 * commits them before its current tables, so a run seen in its current-table commit is seen
 * here too. Each newer run's rule is rebuilt from its history rows (the files its snapshot
 * added, and any file another engine's compaction rewrote them into: {@link filesOfRun}) and its
 * manifest (or, before the manifest, its closing record), one run at a time: memory grows with a
 * run, not with the lake.
 */

import { ExporterError } from '../../errors.js';
import { CONTENT, decodeManifest, STATUS } from '../../iceberg/avro.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import { type BaseChange, type BaseContext, snapshotIdOf } from '../../iceberg/commit.js';
import { type SupersedeRule, supersedes } from '../../iceberg/current.js';
import { idColumnGroups, mayHoldRun, SortedIds } from '../../iceberg/current-scan.js';
import { keyOfLocation } from '../../iceberg/locations.js';
import { currentManifests } from '../../iceberg/manifests.js';
import { fieldId } from '../../iceberg/schema.js';
import { manifestKey } from '../../layout.js';
import { type Manifest, ManifestSchema } from '../state/manifest.js';
import { parseRecord } from '../state/records.js';
import { readClosing } from './closing.js';
import type { ExportDeps } from './context.js';

/** A published Parquet file of a run: its key and size. */
export interface RunFile {
  readonly key: string;
  readonly bytes: number;
  /**
   * Only the rows of this run count: the file holds several runs' rows (another engine's
   * compaction rewrote the run's own file into it).
   */
  readonly ofRun?: string;
}

/** What a rule reads of a run's manifest: the run, and what its listings and 404s delete. */
export type RuleOf = Pick<
  Manifest,
  'run_id' | 'unlisted_campaigns' | 'partially_listed_campaigns' | 'not_found_jobs'
>;

/** The history tables every run with a rule commits, before its current tables. */
const HISTORY = ['campaigns', 'jobs', 'reports'] as const;

/** The rows of a published file, by their bigint `columns`, a row group at a time. */
function publishedIds<C extends string>(deps: ExportDeps, f: RunFile, columns: readonly C[]) {
  return idColumnGroups(deps.storage, f.key, f.bytes, columns, f.ofRun);
}

/**
 * What the run supersedes in the current tables, as the `*_latest` views define it
 * (`shared/export/views.ts`): of runs older than it, the rows of the jobs it exported or got a
 * 404 for, and for each campaign whose jobs it listed completely (listed, not unlisted, no
 * invalid item), the rows of the jobs that listing leaves out.
 */
export async function supersedeRuleOf(
  deps: ExportDeps,
  manifest: RuleOf,
  committed: ReadonlyMap<string, readonly RunFile[]>,
): Promise<SupersedeRule> {
  const jobs = new Set<number>(manifest.not_found_jobs ?? []);
  for (const f of committed.get('reports') ?? []) {
    for await (const group of publishedIds(deps, f, ['job_id']))
      for (const job of group.job_id) jobs.add(job);
  }
  const incomplete = new Set([
    ...(manifest.unlisted_campaigns ?? []),
    ...(manifest.partially_listed_campaigns ?? []),
  ]);
  // Each listed campaign's jobs, gathered in growing typed arrays and kept sorted (SortedIds):
  // the run lists as many jobs as the lake holds.
  const listed = new Map<number, { ids: Float64Array; count: number }>();
  for (const f of committed.get('campaigns') ?? []) {
    for await (const group of publishedIds(deps, f, ['campaign_id'])) {
      for (const campaign of group.campaign_id)
        if (!incomplete.has(campaign)) listed.set(campaign, { ids: new Float64Array(16), count: 0 });
    }
  }
  for (const f of committed.get('jobs') ?? []) {
    for await (const group of publishedIds(deps, f, ['job_id', 'campaign_id'])) {
      for (let i = 0; i < group.job_id.length; i++) {
        const list = listed.get(group.campaign_id[i]!);
        if (!list) continue;
        if (list.count === list.ids.length) {
          const grown = new Float64Array(list.ids.length * 2);
          grown.set(list.ids);
          list.ids = grown;
        }
        list.ids[list.count++] = group.job_id[i]!;
      }
    }
  }
  const listings = new Map<number, SortedIds>();
  for (const [campaign, { ids, count }] of listed) listings.set(campaign, new SortedIds(ids.slice(0, count)));
  return { jobs, listings, runId: manifest.run_id };
}

/** The runs newer than `runId` (by run id) that committed a history table, with their export dates. */
export async function newerRuns(
  catalog: IcebergCatalog,
  runId: string,
): Promise<{ runId: string; dt: string | undefined }[]> {
  const found = new Map<string, string | undefined>();
  for (const table of HISTORY) {
    const { metadata } = await catalog.load(table);
    for (const s of metadata?.snapshots ?? []) {
      const run = s.summary['run-id'];
      if (run !== undefined && run > runId && !found.has(run)) found.set(run, s.summary['exporter.dt']);
    }
  }
  return [...found].sort(([a], [b]) => (a < b ? -1 : 1)).map(([run, dt]) => ({ runId: run, dt }));
}

/**
 * The live data files of history table `table` that hold `runId`'s rows: those its snapshot
 * added, and those another engine's compaction (`OPTIMIZE … REWRITE DATA`) wrote the rows into,
 * their `run_id` bounds (or none) leaving room for the run; of those only the run's rows count
 * (`RunFile.ofRun`). The `*_latest` views read the table's rows whatever file holds them: a
 * compacted run read by its snapshot's files alone would supersede nothing.
 */
async function filesOfRun(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  table: (typeof HISTORY)[number],
  runId: string,
): Promise<RunFile[]> {
  const { metadata } = await catalog.load(table);
  if (!metadata) return [];
  const ours = BigInt(snapshotIdOf(runId, table));
  const runIdField = fieldId(table, 'run_id');
  const files: RunFile[] = [];
  for (const m of await currentManifests(deps.storage, metadata)) {
    const found = await deps.storage.get(keyOfLocation(deps.storage, m.manifest_path));
    if (!found) throw new Error(`Iceberg manifest ${m.manifest_path} of ${table} is missing`);
    for (const e of await decodeManifest(found.body)) {
      const snapshot = e.snapshot_id ?? m.added_snapshot_id;
      if (e.status === STATUS.DELETED || e.data_file.content !== CONTENT.DATA) continue;
      const own = BigInt(snapshot) === ours;
      // Our own files of other runs hold one run id each (bounds low = high): not opened.
      if (!own && !mayHoldRun(e, runIdField, runId)) continue;
      files.push({
        key: keyOfLocation(deps.storage, e.data_file.file_path),
        bytes: Number(e.data_file.file_size_in_bytes),
        ...(!own && { ofRun: runId }),
      });
    }
  }
  return files;
}

/**
 * A newer run's rule, rebuilt: its history files, and its 404s and incomplete listings from its
 * manifest or, when it has none yet (it died after committing), its closing record. A run with
 * neither is taken as listing nothing completely, its 404s unknown: only its exports count.
 */
async function ruleOfRun(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  run: { runId: string; dt: string | undefined },
): Promise<SupersedeRule> {
  let record: RuleOf | undefined;
  if (run.dt !== undefined) {
    const key = manifestKey(run.dt, run.runId);
    const found = await deps.storage.get(key);
    if (found) record = parseRecord(ManifestSchema, found.body, key);
  }
  record ??= (await readClosing(deps, run.runId))?.manifest;
  const committed = new Map<string, RunFile[]>();
  for (const table of HISTORY) {
    if (table === 'campaigns' && !record) continue;
    committed.set(table, await filesOfRun(deps, catalog, table, run.runId));
  }
  if (!record) deps.log.warn('a newer run has no manifest nor closing record: only its exports count', run);
  return supersedeRuleOf(deps, record ?? { run_id: run.runId }, committed);
}

/**
 * The jobs of the run's reports (`reports`: its published files of the `reports` table) that a
 * run newer than it superseded already: the run's own rows of these jobs must not enter the
 * current tables. Empty (and nothing read) when no newer run committed. Also returns the newer
 * runs it took into account (see {@link newerRunCheck}).
 */
export async function blockedByNewerRuns(
  deps: ExportDeps,
  catalog: IcebergCatalog,
  runId: string,
  reports: readonly RunFile[],
): Promise<{ blocked: Set<number>; newer: ReadonlySet<string> }> {
  const blocked = new Set<number>();
  const newer = await newerRuns(catalog, runId);
  const out = { blocked, newer: new Set(newer.map((r) => r.runId)) };
  if (newer.length === 0 || reports.length === 0) return out;
  const jobs: number[] = [];
  const campaigns: number[] = [];
  for (const f of reports) {
    for await (const group of publishedIds(deps, f, ['job_id', 'campaign_id'])) {
      for (let i = 0; i < group.job_id.length; i++) {
        jobs.push(group.job_id[i]!);
        campaigns.push(group.campaign_id[i]!);
      }
    }
  }
  for (const run of newer) {
    const rule = await ruleOfRun(deps, catalog, run);
    for (let i = 0; i < jobs.length; i++)
      if (supersedes(rule, jobs[i]!, campaigns[i]!)) blocked.add(jobs[i]!);
  }
  if (blocked.size > 0)
    deps.log.info('a run committed after newer runs: its rows of jobs they superseded stay out', {
      run_id: runId,
      newer_runs: newer.map((r) => r.runId),
      jobs: blocked.size,
    });
  return out;
}

/**
 * Wraps a current table's `changeBase`: a base holding a snapshot of a run newer than `runId`
 * that `known` did not take into account (it committed while the run's blocked jobs were found)
 * makes the commit fail retryably, so that the closing is taken up again and finds them anew.
 */
export function newerRunCheck(
  known: ReadonlySet<string>,
  change: (ctx: BaseContext) => Promise<BaseChange>,
): (ctx: BaseContext) => Promise<BaseChange> {
  return async (ctx) => {
    for (const s of ctx.metadata.snapshots ?? []) {
      const run = s.summary['run-id'];
      if (run !== undefined && run > ctx.runId && !known.has(run))
        throw new ExporterError(
          `run ${run} committed a current table while run ${ctx.runId}'s closing was committing; the closing is retried`,
          { retryable: true },
        );
    }
    return change(ctx);
  };
}
