/**
 * What a person sees while a run goes and when it ends: on stderr a progress bar on a terminal
 * (plain lines on a timer otherwise), and on stdout a summary table.
 */
import type { ProgressEvent } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { displayWidth, padEnd } from './columns.js';

/** Between plain progress lines when stderr is not a terminal: often enough to see a slow run move. */
export const PLAIN_INTERVAL_MS = 5_000;
/** Between redraws of the bar with no event (the elapsed time and ETA still move). */
const TTY_INTERVAL_MS = 1_000;
/** Shortest time between two redraws of the bar: a fast run sends thousands of events a second. */
const TTY_MIN_REDRAW_MS = 100;
/** No ETA before this many reports, nor before this long: a rate from less says nothing. */
const ETA_MIN_REPORTS = 3;
const ETA_MIN_MS = 2_000;
const BAR_WIDTH = 28;

/** Time for the progress display; tests pass a manual one. */
export interface ProgressClock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls `tick` every `ms` until the returned function is called; never keeps the process alive. */
  every(ms: number, tick: () => void): () => void;
}

export const systemProgressClock: ProgressClock = {
  now: () => performance.now(),
  every(ms, tick) {
    const timer = setInterval(tick, ms);
    timer.unref(); // A run that ends, or a process that exits, never waits for the next line.
    return () => clearInterval(timer);
  },
};

/** The stream progress goes to: stderr, or a test's. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** `1h 02m`, `4m 05s`, `12s`. */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m ${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}

/**
 * Counts a run's progress events and shows them. The share done moves with each report; the
 * ETA is the reports left at the rate reports came in since the first one.
 */
export class Progress {
  private campaigns = 0;
  private planned = 0;
  private toFetch = 0;
  /** Reports with a result in their first round: the bar's share. */
  private done = 0;
  private exported = 0;
  private failed = 0;
  /** Reports that failed retryably and will be asked for again in a later round. */
  private pending = 0;
  private firstReportAt: number | undefined;
  private readonly startedAt: number;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private stopTimer: (() => void) | undefined;
  private finished = false;

  constructor(
    private readonly stream: ProgressStream = process.stderr,
    private readonly clock: ProgressClock = systemProgressClock,
  ) {
    this.startedAt = clock.now();
  }

  readonly onEvent = (event: ProgressEvent): void => {
    if (this.finished) return;
    switch (event.type) {
      case 'started':
        this.campaigns = event.campaigns;
        this.startTimer();
        break;
      case 'planned':
        this.planned++;
        this.toFetch += event.toFetch;
        break;
      case 'report':
        this.firstReportAt ??= this.clock.now();
        // A later round asks again only for jobs left pending: each such result replaces one.
        if (event.again) this.pending = Math.max(0, this.pending - 1);
        else this.done++;
        if (event.outcome === 'exported') this.exported++;
        if (event.outcome === 'failed') this.failed++;
        if (event.outcome === 'pending') this.pending++;
        break;
      case 'unit':
        break;
    }
    // A terminal redraws as events come (at most every TTY_MIN_REDRAW_MS); plain lines keep to the timer.
    if (this.stream.isTTY && this.clock.now() - this.lastDraw >= TTY_MIN_REDRAW_MS) this.draw();
  };

  /** The progress line, without bar: `campaigns 3/12  reports 340/3,000 (11%)  exported 338  5.1/s  ETA 8m 40s`. */
  line(): string {
    const now = this.clock.now();
    const parts = [
      `campaigns ${this.planned}/${this.campaigns}`,
      `reports ${this.done}/${this.toFetch} (${Math.floor(100 * this.share())}%)`,
      `exported ${this.exported}`,
    ];
    if (this.pending > 0) parts.push(`to retry ${this.pending}`);
    if (this.failed > 0) parts.push(`failed ${this.failed}`);
    const rate = this.rate(now);
    if (rate !== undefined) {
      parts.push(`${rate.toFixed(1)}/s`);
      const left = this.toFetch - this.done;
      parts.push(left > 0 ? `ETA ${formatDuration((1000 * left) / rate)}` : 'ETA 0s');
    }
    parts.push(`elapsed ${formatDuration(now - this.startedAt)}`);
    return parts.join('  ');
  }

  /**
   * Stops the display. A finished run shows its last line; a failed one clears the bar and
   * adds nothing (its one error line follows).
   */
  finish(status: Manifest['status'] | 'finished' = 'finished'): void {
    if (this.finished) return;
    this.finished = true;
    this.stopTimer?.();
    this.stopTimer = undefined;
    if (status === 'failed') {
      if (this.stream.isTTY && this.lastDraw > Number.NEGATIVE_INFINITY) this.stream.write('\r\x1b[K');
      return;
    }
    if (this.stream.isTTY) {
      this.draw();
      this.stream.write('\n');
    } else this.stream.write(`${this.line()}\n`);
  }

  private share(): number {
    return this.toFetch > 0 ? Math.min(1, this.done / this.toFetch) : 0;
  }

  /** Reports per second since the first one; undefined until there is enough to go by. */
  private rate(now: number): number | undefined {
    if (this.firstReportAt === undefined || this.done < ETA_MIN_REPORTS) return undefined;
    const elapsed = now - this.firstReportAt;
    if (elapsed < ETA_MIN_MS) return undefined;
    return (1000 * this.done) / elapsed;
  }

  private startTimer(): void {
    if (this.stopTimer) return;
    this.stopTimer = this.clock.every(this.stream.isTTY ? TTY_INTERVAL_MS : PLAIN_INTERVAL_MS, () => {
      if (this.stream.isTTY) this.draw();
      else this.stream.write(`${this.line()}\n`);
    });
  }

  private draw(): void {
    this.lastDraw = this.clock.now();
    const filled = Math.round(this.share() * BAR_WIDTH);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`;
    this.stream.write(`\r${bar} ${this.line()}\x1b[K`);
  }
}

/** Rows of a two-column table, aligned by the width the text takes on screen. */
export function formatTable(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(0, ...rows.map(([k]) => displayWidth(k)));
  return rows.map(([k, v]) => `  ${padEnd(k, width)}  ${v}`).join('\n');
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
    // Always shown, 0 included: a list item quarantined must not go unnoticed (status partial).
    ['campaigns invalid', String(c.campaigns_invalid)],
    ...(manifest.unlisted_campaigns?.length
      ? [['campaigns unlisted', manifest.unlisted_campaigns.join(', ')] as [string, string]]
      : []),
    ['duplicates', String(c.duplicates)],
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
