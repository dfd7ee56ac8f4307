/**
 * Which faults of the Iceberg commit a seed reached, counted from the bucket's request log
 * (`SimS3.events`), so that a run of many seeds can show that the simulation exercises them
 * (`npm run sim -- --seeds N` prints the totals; the vitest file asserts that each occurs):
 * - `swaps`: metadata files created (`vN.metadata.json`, the file catalog's swap; Glue's swaps,
 *   UpdateTable, are glue.ts's `GlueCases`, and a Glue commit ends at its metadata file here);
 * - `raceLost`: a create that met 412 from another committer's file (two committers on one base:
 *   the loser rebases, or finds its own snapshot);
 * - `answerLost`: a create whose answer was lost after it applied (the SDK's retry met its own
 *   file: 412, which the storage recognises);
 * - `swapConflict`, `swapSlowDown`: a create answered 409 or 503 (not applied);
 * - `crashAtSwap`: the committer died just before the create, or just after it applied;
 * - `crashBeforeSwap`: it died after publishing data files of a run and before swapping all of
 *   its tables (the crashes at the create included);
 * - `crashAfterSwap`: it died after a swap and before the run's manifest;
 * - `concurrentCommits`: a committer wrote a manifest list of a table while another live
 *   committer of that table had begun (written its manifest) and not yet had its create's answer;
 * - `concurrentRuns`: of those, the two committers work for different runs (their snapshots
 *   differ: the loser must rebase). The output's lock serialises runs, so this is rare;
 * - `recommitted`: a run's data manifest written by two actors (a second committer of the
 *   same run, at once or after the first one died);
 * - `lateCommits`: runs that committed a table after a newer run had (an older closing taken up
 *   late; `lateRuns` in iceberg-current.ts, read from the metadata versions, not the log).
 * Another engine's changes (other-engine.ts; its requests are left out of the counts above):
 * - `othersCommits`, `othersRaceLost`: versions it created, and its creates that met 412 (an
 *   exporter's commit came first); `compactions`, `currentCompactions`: its `replace` snapshots
 *   of history and of `_current` tables (counted by the engine itself);
 * - `othersRaceWon`: an exporter's create that met 412 from the other engine's version (the
 *   exporter rebases over Java-shaped metadata and Athena's manifests);
 * - `commitsAfterCompaction`: runs' snapshots committed over another engine's compaction
 *   (`commitsAfterCompaction`, read from each table's newest metadata).
 */
import { parseJson } from '../../shared/iceberg/json.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import { ICEBERG_ROOT } from '../../shared/layout.js';
import type { SimS3, StorageEvent } from './s3.js';
import type { Actor } from './scheduler.js';

export interface IcebergCases {
  swaps: number;
  raceLost: number;
  answerLost: number;
  swapConflict: number;
  swapSlowDown: number;
  crashAtSwap: number;
  crashBeforeSwap: number;
  crashAfterSwap: number;
  concurrentCommits: number;
  concurrentRuns: number;
  recommitted: number;
  lateCommits: number;
  othersCommits: number;
  othersRaceLost: number;
  othersRaceWon: number;
  compactions: number;
  currentCompactions: number;
  commitsAfterCompaction: number;
}

export const noCases = (): IcebergCases => ({
  swaps: 0,
  raceLost: 0,
  answerLost: 0,
  swapConflict: 0,
  swapSlowDown: 0,
  crashAtSwap: 0,
  crashBeforeSwap: 0,
  crashAfterSwap: 0,
  concurrentCommits: 0,
  concurrentRuns: 0,
  recommitted: 0,
  lateCommits: 0,
  othersCommits: 0,
  othersRaceLost: 0,
  othersRaceWon: 0,
  compactions: 0,
  currentCompactions: 0,
  commitsAfterCompaction: 0,
});

const SWAP = /^iceberg\/([^/]+)\/metadata\/v\d+\.metadata\.json$/;
/** A Glue commit's metadata file (`NNNNN-<uuid>.metadata.json`), written just before its UpdateTable (glue.ts counts those). */
const GLUE_METADATA = /^iceberg\/([^/]+)\/metadata\/\d+-[^/]+\.metadata\.json$/;
const AVRO = /^iceberg\/([^/]+)\/metadata\/(?:snap-.*|.*-m0)\.avro$/;
const DATA_MANIFEST = /-m0\.avro$/;
const RUN = /(\d{8}T\d{6}Z-[0-9a-f]{6})-\d+-m0\.avro$/;
const DATA = /^iceberg\/[^/]+\/data\//;
const MANIFEST = /^runs\//;

/** Counts the cases in one seed's request log. */
export function icebergCases(events: readonly StorageEvent[]): IcebergCases {
  const cases = noCases();
  const phase = new Map<Actor, 'published' | 'swapped'>();
  /** Per table, who is between its first write of a commit and its create's answer, for which run. */
  const committing = new Map<string, Map<Actor, string | undefined>>();
  const writers = new Map<string, Set<Actor>>();
  const live = (actor: Actor, t: number) => actor.endedAt === undefined || actor.endedAt > t;
  /** Who created each metadata version. */
  const createdBy = new Map<string, Actor>();
  for (const e of events) {
    if (e.op === 'put' && SWAP.test(e.key) && e.result.startsWith('ok')) createdBy.set(e.key, e.actor);
    if (e.actor.kind === 'other') continue;
    const crashed = e.result === 'crash-before' || e.result === 'crash-after';
    const swap = SWAP.exec(e.key);
    if (crashed) {
      const at = phase.get(e.actor);
      if (at === 'published') cases.crashBeforeSwap++;
      if (at === 'swapped') cases.crashAfterSwap++;
      if (swap && e.op === 'put') cases.crashAtSwap++;
      phase.delete(e.actor);
      for (const actors of committing.values()) actors.delete(e.actor);
      continue;
    }
    if (e.op !== 'put') continue;
    if (DATA.test(e.key) && e.result.startsWith('ok') && !phase.has(e.actor)) phase.set(e.actor, 'published');
    if (MANIFEST.test(e.key) && e.result.startsWith('ok')) phase.delete(e.actor);
    const avro = AVRO.exec(e.key);
    if (avro && e.result.startsWith('ok')) {
      const actors = committing.get(avro[1]!) ?? new Map<Actor, string | undefined>();
      const run = RUN.exec(e.key)?.[1] ?? actors.get(e.actor);
      if (!DATA_MANIFEST.test(e.key)) {
        const others = [...actors].filter(([other]) => other !== e.actor && live(other, e.t));
        if (others.length > 0) cases.concurrentCommits++;
        if (others.some(([, theirs]) => theirs !== run)) cases.concurrentRuns++;
      }
      actors.set(e.actor, run);
      committing.set(avro[1]!, actors);
      if (DATA_MANIFEST.test(e.key)) {
        const who = writers.get(e.key) ?? new Set<Actor>();
        who.add(e.actor);
        writers.set(e.key, who);
      }
    }
    // A Glue commit's swap is its UpdateTable, a moment after this put: its commit ends here.
    const glue = GLUE_METADATA.exec(e.key);
    if (glue) committing.get(glue[1]!)?.delete(e.actor);
    if (!swap) continue;
    committing.get(swap[1]!)?.delete(e.actor);
    if (e.result === 'ok') {
      cases.swaps++;
      phase.set(e.actor, 'swapped');
    } else if (e.result === '412 PreconditionFailed') {
      cases.raceLost++;
      if (createdBy.get(e.key)?.kind === 'other') cases.othersRaceWon++;
    } else if (e.result === '412 PreconditionFailed (SDK retry)') cases.answerLost++;
    else if (e.result.startsWith('409')) cases.swapConflict++;
    else if (e.result.startsWith('503')) cases.swapSlowDown++;
  }
  cases.recommitted = [...writers.values()].filter((who) => who.size > 1).length;
  return cases;
}

/** Runs' snapshots (summary `run-id`) above another engine's `replace` snapshot, over every table. */
export function commitsAfterCompaction(s3: SimS3): number {
  let count = 0;
  const newest = new Map<string, number>();
  for (const key of s3.keys(`${ICEBERG_ROOT}/`)) {
    const m = /^iceberg\/([^/]+)\/metadata\/v(\d+)\.metadata\.json$/.exec(key);
    if (m) newest.set(m[1]!, Math.max(newest.get(m[1]!) ?? 0, Number(m[2])));
  }
  for (const [table, version] of newest) {
    const body = s3.peek(`${ICEBERG_ROOT}/${table}/metadata/v${version}.metadata.json`);
    if (!body) continue;
    const snapshots = (parseJson(Buffer.from(body).toString('utf8')) as TableMetadata).snapshots ?? [];
    const replaced = snapshots
      .filter((s) => s.summary.operation === 'replace' && s.summary['run-id'] === undefined)
      .map((s) => s['sequence-number']);
    if (replaced.length === 0) continue;
    const first = Math.min(...replaced);
    count += snapshots.filter(
      (s) => s.summary['run-id'] !== undefined && s['sequence-number'] > first,
    ).length;
  }
  return count;
}
