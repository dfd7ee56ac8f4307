/**
 * What a person sees while a run goes and when it ends: a progress bar on a TTY (plain lines
 * every few seconds otherwise) on stderr, and a summary table on stdout.
 */
import type { ProgressEvent } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';

/** Seconds between plain progress lines when stderr is not a terminal. */
const PLAIN_INTERVAL_MS = 5_000;
const BAR_WIDTH = 28;

export class Progress {
  private toFetch = 0;
  private done = 0;
  private exported = 0;
  private campaigns = 0;
  private planned = 0;
  private lastPlain = 0;
  private readonly startedAt = Date.now();

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  readonly onEvent = (event: ProgressEvent): void => {
    if (event.type === 'started') this.campaigns = event.campaigns;
    if (event.type === 'planned') {
      this.planned++;
      this.toFetch += event.toFetch;
    }
    if (event.type === 'unit') {
      this.done += event.jobs;
      this.exported += event.exported;
    }
    this.render(false);
  };

  private line(): string {
    const seconds = (Date.now() - this.startedAt) / 1000;
    const rate = seconds > 0 ? this.exported / seconds : 0;
    return `campaigns ${this.planned}/${this.campaigns}  reports ${this.done}/${this.toFetch}  exported ${this.exported}  ${rate.toFixed(0)}/s`;
  }

  private render(final: boolean): void {
    if (this.stream.isTTY) {
      const share = this.toFetch > 0 ? Math.min(1, this.done / this.toFetch) : 0;
      const filled = Math.round(share * BAR_WIDTH);
      const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`;
      this.stream.write(
        `\r${bar} ${(share * 100).toFixed(0).padStart(3)}%  ${this.line()}\x1b[K${final ? '\n' : ''}`,
      );
    } else if (final || Date.now() - this.lastPlain >= PLAIN_INTERVAL_MS) {
      this.lastPlain = Date.now();
      this.stream.write(`${this.line()}\n`);
    }
  }

  finish(): void {
    this.render(true);
  }
}

/** Rows of a two-column table, aligned. */
export function formatTable(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n');
}

/** The end-of-run summary: outcomes, requests, time, throughput, where the output went. */
export function formatSummary(manifest: Manifest, location: string, manifestKey: string): string {
  const c = manifest.counts;
  const seconds = (Date.parse(manifest.finished_at) - Date.parse(manifest.started_at)) / 1000;
  const throttled = manifest.requests.by_status['429'] ?? 0;
  const statuses = Object.entries(manifest.requests.by_status)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ');
  const rows: [string, string][] = [
    ['run', `${manifest.run_id} (${manifest.mode}, dt=${manifest.dt})`],
    ['status', manifest.status],
    ['campaigns', String(c.campaigns)],
    ['jobs listed', String(c.jobs)],
    ['  exported', String(c.reports_exported)],
    ['  unchanged', String(c.reports_unchanged)],
    ['  not ready', String(c.reports_not_ready)],
    ['  not found', String(c.reports_not_found)],
    ['  invalid', String(c.reports_invalid)],
    ['  failed', String(c.reports_failed)],
    ['requests', `${manifest.requests.total} (${statuses || 'none'})`],
    [
      '429s',
      `${throttled} (${manifest.requests.total ? ((100 * throttled) / manifest.requests.total).toFixed(2) : '0.00'}%)`,
    ],
    ['retries', String(manifest.requests.retried)],
    ['duration', `${seconds.toFixed(1)} s`],
    ['throughput', `${seconds > 0 ? (c.reports_exported / seconds).toFixed(1) : '0'} reports/s`],
    ['output', location],
    ['manifest', manifestKey],
  ];
  if (manifest.error) rows.splice(2, 0, ['error', manifest.error.message]);
  return formatTable(rows);
}
