/**
 * How the `aws` command shows runs: an open run's progress and a closed run's manifest as
 * two-column tables (as the export summary), the last runs as one table, and their JSON.
 */
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { RunProgress, RunState } from './aws-runs.js';
import { displayWidth, padEnd } from './columns.js';
import {
  driftRows,
  formatDuration,
  formatRequests,
  formatSummary,
  formatTable,
  jobOutcomeRows,
} from './progress.js';

/** A run's state as `status --json` gives it. */
export const stateJson = (state: RunState) => {
  if (state.state === 'open') return { state: state.state, ...state.progress };
  if (state.state === 'unknown') return state;
  return { state: state.state, manifest: state.manifest };
};

/** A run's state as `status` shows it: a table of its progress, or its manifest's summary. */
export function formatState(state: RunState, location: string, now: Date): string {
  switch (state.state) {
    case 'open':
      return formatProgress(state.progress, now);
    case 'closing':
      return `closing: publishing its files and writing its manifest; these counts are final\n${formatSummary(state.manifest, location, '(being written)')}`;
    case 'closed':
      return `closed:\n${formatSummary(state.manifest, location, state.key)}`;
    case 'unknown':
      return 'unknown';
  }
}

/** What each phase means, for people. */
const PHASE_TEXT: Record<RunProgress['phase'], string> = {
  starting: 'starting: listing campaigns',
  planning: 'planning: listing the jobs of each campaign',
  exporting: 'exporting: fetching reports',
  complete: 'complete: finish-run closes it at its next look (every 5 minutes)',
};

function formatProgress(p: RunProgress, now: Date): string {
  const c = p.counts;
  const rows: [string, string][] = [
    ['run', `${p.run_id} (${p.mode}, dt=${p.dt}, ${p.driver === 'queues' ? 'AWS' : 'a CLI'})`],
    ['state', PHASE_TEXT[p.phase]],
    ['started', `${p.started_at} (${formatDuration(now.getTime() - Date.parse(p.started_at))} ago)`],
    ['campaigns', `${p.campaigns.planned} of ${p.campaigns.total} planned`],
    ['units', `${p.units.done} of ${p.units.total} done`],
    ...jobOutcomeRows(c),
    ['  retrying', String(p.retrying)],
    ['  waiting', String(p.waiting)],
    ...driftRows(p.schema_drift),
    ['requests', formatRequests(p.requests)],
    ...p.errors.map((e, i): [string, string] => [i === 0 ? 'errors' : '', e]),
  ];
  return formatTable(rows);
}

const durationMs = (m: Manifest): number => Date.parse(m.finished_at) - Date.parse(m.started_at);

/** The fields `runs --json` gives per run. */
export const runJson = (m: Manifest) => ({
  run_id: m.run_id,
  status: m.status,
  mode: m.mode,
  dt: m.dt,
  started_at: m.started_at,
  finished_at: m.finished_at,
  duration_s: Math.round(durationMs(m) / 1000),
  counts: m.counts,
  ...(m.error && { error: m.error.message }),
  ...(m.schema_contract && { schema_contract: m.schema_contract }),
  ...(m.schema_drift && { schema_drift: m.schema_drift }),
});

/**
 * An evolve run's drift in a cell: how many paths drifted (`0`: none; `status <run_id>` names
 * them); blank for a freeze run (its reports are quarantined instead).
 */
const driftCell = (m: Manifest): string =>
  m.schema_contract === 'evolve' ? String(m.schema_drift?.length ?? 0) : '';

/**
 * The `runs` table: a header and one line per run, the counts aligned right; `drifted paths`
 * when any of the runs is an evolve run (a deployment that freezes sees the table as before).
 */
export function runsTable(manifests: readonly Manifest[]): string[] {
  const drift = manifests.some((m) => m.schema_contract === 'evolve');
  return formatColumns(
    [
      'run',
      'status',
      'mode',
      'dt',
      'jobs',
      'exported',
      'unchanged',
      'not ready',
      'failed',
      'duration',
      ...(drift ? ['drifted paths'] : []),
    ],
    manifests.map((m) => [
      m.run_id,
      m.status,
      m.mode,
      m.dt,
      String(m.counts.jobs),
      String(m.counts.reports_exported),
      String(m.counts.reports_unchanged),
      String(m.counts.reports_not_ready),
      String(m.counts.reports_failed),
      formatDuration(durationMs(m)),
      ...(drift ? [driftCell(m)] : []),
    ]),
    4,
  );
}

/** Rows under a header, columns from `rightFrom` on aligned right (numbers). */
function formatColumns(header: readonly string[], rows: readonly string[][], rightFrom: number): string[] {
  const widths = header.map((h, i) =>
    Math.max(displayWidth(h), ...rows.map((r) => displayWidth(r[i] ?? ''))),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) =>
        i >= rightFrom
          ? ' '.repeat((widths[i] ?? 0) - displayWidth(cell)) + cell
          : padEnd(cell, widths[i] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)];
}
