/**
 * A run's schema drift in short: per kind, how many paths drifted and the top ones. What the
 * `ExportRunFinished` event carries and the CLI summary and `aws status` print; the manifest
 * keeps every entry.
 */
import * as z from 'zod';
import { DRIFT_KINDS, type DriftEntry } from '../schema-drift.js';

/** Paths named per kind: enough to see what changed, bounded whatever the run. */
export const DRIFT_TOP_PATHS = 5;
/**
 * The longest path kept (characters): a path is built from the API's keys, which are data to
 * us; a longer one is cut with `…`. Keeps the event's drift under ~8 KB (5 kinds × 5 paths).
 */
export const DRIFT_PATH_CHARS = 200;
/** Paths named per kind on a summary line: what fits on a line of a terminal or two. */
export const DRIFT_LINE_PATHS = 3;

export const DriftPathSchema = z.object({
  path: z.string(),
  /** Reports with at least one occurrence. */
  reports: z.number().int().positive(),
  count: z.number().int().positive(),
  first_job_id: z.number().int(),
});

export const DriftKindSummarySchema = z.object({
  kind: z.enum(DRIFT_KINDS),
  /** Distinct paths of this kind (the manifest's `(other paths)` entry counts as one). */
  paths: z.number().int().positive(),
  /** Occurrences over every path of this kind. */
  count: z.number().int().positive(),
  /** The {@link DRIFT_TOP_PATHS} paths of most reports. */
  top: z.array(DriftPathSchema),
});
export type DriftKindSummary = z.infer<typeof DriftKindSummarySchema>;

const clip = (path: string): string =>
  path.length > DRIFT_PATH_CHARS ? `${path.slice(0, DRIFT_PATH_CHARS - 1)}…` : path;

/**
 * The drift per kind (in `DRIFT_KINDS` order, kinds without drift left out), each with its
 * top paths: most reports first, then most occurrences, then path.
 *
 * @example summarizeDrift(manifest.schema_drift ?? [])
 * // [{ kind: 'unlisted_value', paths: 2, count: 35, top: [{ path: 'job.job_status', reports: 31, … }, …] }]
 */
export function summarizeDrift(
  entries: readonly DriftEntry[],
  topPaths: number = DRIFT_TOP_PATHS,
): DriftKindSummary[] {
  return DRIFT_KINDS.flatMap((kind) => {
    const ofKind = entries
      .filter((e) => e.kind === kind)
      .sort(
        (a, b) =>
          b.reports - a.reports || b.count - a.count || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
      );
    if (ofKind.length === 0) return [];
    return [
      {
        kind,
        paths: ofKind.length,
        count: ofKind.reduce((sum, e) => sum + e.count, 0),
        top: ofKind.slice(0, topPaths).map((e) => ({
          path: clip(e.path),
          reports: e.reports,
          count: e.count,
          first_job_id: e.first_job_id,
        })),
      },
    ];
  });
}

/**
 * One line per kind for people: `unlisted_value 2 paths: job.job_status (31 reports),
 * sections[].questions[].answer_type (4)`.
 */
export function driftLines(entries: readonly DriftEntry[], topPaths = DRIFT_LINE_PATHS): string[] {
  return summarizeDrift(entries, topPaths).map((s) => {
    const paths = s.top.map(
      (p, i) => `${p.path} (${p.reports}${i === 0 ? ` report${p.reports === 1 ? '' : 's'}` : ''})`,
    );
    const more = s.paths > s.top.length ? `, ${s.paths - s.top.length} more` : '';
    return `${s.kind} ${s.paths} path${s.paths === 1 ? '' : 's'}: ${paths.join(', ')}${more}`;
  });
}
