/**
 * What a person sees while a run goes and when it ends: on stderr a progress bar on a terminal
 * (plain lines on a timer otherwise), and on stdout a summary table.
 */
import type { ProgressEvent } from '../../shared/export/run/local-run.js';
import { driftLines } from '../../shared/export/state/drift-summary.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { displayWidth, padEnd, truncate } from './columns.js';

/** Between plain progress lines when stderr is not a terminal: often enough to see a slow run move. */
export const PLAIN_INTERVAL_MS = 5_000;
/** Between redraws of the bar with no event (the elapsed time and ETA still move). */
const TTY_INTERVAL_MS = 1_000;
/** Shortest time between two redraws of the bar: a fast run sends thousands of events a second. */
const TTY_MIN_REDRAW_MS = 100;
/** No ETA before this many reports, nor before this long: a rate from less says nothing. */
const ETA_MIN_REPORTS = 3;
const ETA_MIN_MS = 2_000;
const FIELD_GAP = '  ';
const BAR_WIDTH = 28;
/** The narrowest bar worth showing; narrower, it goes (in {@link DROP_ORDER}'s turn). */
const MIN_BAR_WIDTH = 10;
/**
 * Columns left free at the end of the bar's line: the terminal echoes Ctrl-C as `^C` after it,
 * and a line that then reached the last column would wrap, leaving a stale bar above the
 * interrupted line (seen in tmux at 70 columns); writing into the last column also makes some
 * terminals wrap at once.
 */
const SPARE_COLUMNS = 3;
/** A terminal's width when it does not say (stderr.columns undefined). */
const DEFAULT_COLUMNS = 80;

/** The fields of the progress line, in their order on it. */
type FieldName = 'campaigns' | 'reports' | 'exported' | 'to retry' | 'failed' | 'rate' | 'ETA' | 'elapsed';

/**
 * What gives way when the terminal is narrower than the line: first the bar shrinks from
 * BAR_WIDTH to MIN_BAR_WIDTH, then these go one by one, the least telling first. `reports` and
 * `failed` always stay; if even they do not fit, the line is cut with `…`. A line is never
 * wider than the terminal: a wrapped one is not redrawn by `\r` and leaves a stale copy behind.
 */
export const DROP_ORDER: readonly (FieldName | 'bar')[] = [
  'rate',
  'elapsed',
  'campaigns',
  'exported',
  'bar',
  'to retry',
  'ETA',
];

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
  /** A terminal's width; the bar's line fits in it. */
  columns?: number;
  /** A terminal's `resize` event (SIGWINCH): the bar is redrawn to the new width. */
  on?(event: 'resize', listener: () => void): unknown;
  off?(event: 'resize', listener: () => void): unknown;
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
  private started = false;
  /** What a terminal shows before the run starts (connecting, retrying); none once it started. */
  private note: string | undefined;

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
        this.started = true;
        this.note = undefined;
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
      case 'estimate':
      case 'unit':
        break;
    }
    // A terminal redraws as events come (at most every TTY_MIN_REDRAW_MS); plain lines keep to the timer.
    if (this.stream.isTTY && this.clock.now() - this.lastDraw >= TTY_MIN_REDRAW_MS) this.draw();
  };

  /** The progress line, without bar: `campaigns 3/12  reports 340/3,000 (11%)  exported 338  5.1/s  ETA 8m 40s`. */
  line(): string {
    return this.fields(this.clock.now())
      .map((f) => f.text)
      .join(FIELD_GAP);
  }

  /**
   * The bar and the line as they fit in `columns` columns, the last {@link SPARE_COLUMNS} left
   * free: the bar shrinks, then fields go in {@link DROP_ORDER}, then the line is cut.
   */
  frame(columns: number): string {
    const width = Math.max(1, columns - SPARE_COLUMNS);
    let fields = this.fields(this.clock.now());
    let withBar = true;
    const render = (): string => {
      const text = fields.map((f) => f.text).join(FIELD_GAP);
      if (!withBar) return text;
      const room = width - displayWidth(text) - 3; // `[`, `]` and the space after them
      return `${this.bar(Math.max(MIN_BAR_WIDTH, Math.min(BAR_WIDTH, room)))} ${text}`;
    };
    let line = render();
    for (const name of DROP_ORDER) {
      if (displayWidth(line) <= width) return line;
      if (name === 'bar') withBar = false;
      else fields = fields.filter((f) => f.name !== name);
      line = render();
    }
    return truncate(line, width);
  }

  private fields(now: number): { name: FieldName; text: string }[] {
    const fields: { name: FieldName; text: string }[] = [
      { name: 'campaigns', text: `campaigns ${this.planned}/${this.campaigns}` },
      { name: 'reports', text: `reports ${this.done}/${this.toFetch} (${Math.floor(100 * this.share())}%)` },
      { name: 'exported', text: `exported ${this.exported}` },
    ];
    if (this.pending > 0) fields.push({ name: 'to retry', text: `to retry ${this.pending}` });
    if (this.failed > 0) fields.push({ name: 'failed', text: `failed ${this.failed}` });
    const rate = this.rate(now);
    if (rate !== undefined) {
      fields.push({ name: 'rate', text: `${rate.toFixed(1)}/s` });
      const left = this.toFetch - this.done;
      fields.push({ name: 'ETA', text: left > 0 ? `ETA ${formatDuration((1000 * left) / rate)}` : 'ETA 0s' });
    }
    fields.push({ name: 'elapsed', text: `elapsed ${formatDuration(now - this.startedAt)}` });
    return fields;
  }

  /**
   * Shows `text` on a terminal until the run starts (`connecting to …`, a retry of the first
   * request): the wait before the first answer is not silent. Nothing on a plain stream, whose
   * run that cannot start prints its one error line alone.
   */
  waiting(text: string): void {
    if (this.finished || this.started || !this.stream.isTTY) return;
    this.note = text;
    this.draw();
  }

  /**
   * Writes a line of its own (a full run's estimate) on the stream: on a terminal it takes the
   * bar's place and the bar is drawn again below it.
   */
  say(line: string): void {
    if (this.finished) return;
    if (!this.stream.isTTY) {
      this.stream.write(`${line}\n`);
      return;
    }
    this.stream.write(`\r\x1b[K${line}\n`);
    this.draw();
  }

  /**
   * Stops the display. A finished run shows its last line; a failed or interrupted one clears
   * the bar and adds nothing (its one error line follows).
   */
  finish(status: Manifest['status'] | 'finished' | 'interrupted' = 'finished'): void {
    if (this.finished) return;
    this.finished = true;
    this.stopTimer?.();
    this.stopTimer = undefined;
    if (status === 'failed' || status === 'interrupted') {
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
    const stop = this.clock.every(this.stream.isTTY ? TTY_INTERVAL_MS : PLAIN_INTERVAL_MS, () => {
      if (this.stream.isTTY) this.draw();
      else this.stream.write(`${this.line()}\n`);
    });
    if (!this.stream.isTTY || !this.stream.on) {
      this.stopTimer = stop;
      return;
    }
    const redraw = () => this.draw();
    this.stream.on('resize', redraw);
    this.stopTimer = () => {
      stop();
      this.stream.off?.('resize', redraw);
    };
  }

  private bar(width: number): string {
    const filled = Math.round(this.share() * width);
    return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
  }

  private draw(): void {
    this.lastDraw = this.clock.now();
    const columns = this.stream.columns ?? DEFAULT_COLUMNS;
    const text =
      this.note === undefined
        ? this.frame(columns)
        : truncate(this.note, Math.max(1, columns - SPARE_COLUMNS));
    this.stream.write(`\r${text}\x1b[K`);
  }
}

/** Rows of a two-column table, aligned by the width the text takes on screen. */
export function formatTable(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(0, ...rows.map(([k]) => displayWidth(k)));
  return rows.map(([k, v]) => `  ${padEnd(k, width)}  ${v}`).join('\n');
}

/** `12 (200: 11, 429: 1)`: the requests sent and their count by status. */
export function formatRequests(requests: Manifest['requests']): string {
  const statuses = Object.entries(requests.by_status)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ');
  return `${requests.total} (${statuses || 'none'})`;
}

/** The jobs listed and their one outcome each, as rows of a {@link formatTable} table. */
export function jobOutcomeRows(c: Manifest['counts']): [string, string][] {
  return [
    ['jobs listed', String(c.jobs)],
    ['  exported', String(c.reports_exported)],
    ['  unchanged', String(c.reports_unchanged)],
    ['  not ready', String(c.reports_not_ready)],
    ['  not found', String(c.reports_not_found)],
    ['  invalid', String(c.reports_invalid)],
    ['  failed', String(c.reports_failed)],
    // A run its deadline cut (a backfill larger than one run): the next run goes on with these.
    ...(c.reports_deferred
      ? [['  deferred to the next run', String(c.reports_deferred)] as [string, string]]
      : []),
  ];
}

/**
 * One row per drift kind with its top paths (an evolve run whose reports differed from the
 * spec; none otherwise): the reports landed, the values that did not fit are in `_rescued`.
 */
export function driftRows(drift: Manifest['schema_drift']): [string, string][] {
  return driftLines(drift ?? []).map((line, i) => [i === 0 ? 'schema drift' : '', line]);
}

/** The end-of-run summary: outcomes, schema drift, requests, time, throughput, where the output went. */
export function formatSummary(manifest: Manifest, location: string, manifestKey: string): string {
  const c = manifest.counts;
  const seconds = (Date.parse(manifest.finished_at) - Date.parse(manifest.started_at)) / 1000;
  const throttled = manifest.requests.by_status['429'] ?? 0;
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
    ...jobOutcomeRows(c),
    ...driftRows(manifest.schema_drift),
    ['requests', formatRequests(manifest.requests)],
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
