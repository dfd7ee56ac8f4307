/**
 * The progress bar on a terminal of any width: every frame fits in the terminal's columns (the
 * last three left free, room for the `^C` a terminal echoes), fields give way in DROP_ORDER, and a resize redraws to the new width.
 */
import { describe, expect, it } from 'vitest';
import { displayWidth } from '../../../functions/cli/columns.js';
import { DROP_ORDER, Progress } from '../../../functions/cli/progress.js';
import { Captured, ManualClock } from '../../helpers/cli.js';

/** A terminal of `columns` columns that can be resized. */
class Terminal extends Captured {
  private readonly listeners: (() => void)[] = [];
  constructor(public columns: number) {
    super(true);
  }
  on(_event: 'resize', listener: () => void): void {
    this.listeners.push(listener);
  }
  off(_event: 'resize', listener: () => void): void {
    this.listeners.splice(this.listeners.indexOf(listener), 1);
  }
  resize(columns: number): void {
    this.columns = columns;
    for (const listener of [...this.listeners]) listener();
  }
  listening(): number {
    return this.listeners.length;
  }
  /** What the last redraw shows: after the last `\r`, without the erase to the line's end. */
  shown(): string {
    return this.text.split('\r').at(-1)!.replace('\x1b[K', '').replace('\n', '');
  }
}

type State = (progress: Progress, clock: ManualClock) => void;

/** Runs from a fresh start to one with every field, large counts included. */
const STATES: Record<string, State> = {
  'just started': (p) => p.onEvent({ type: 'started', runId: 'r', campaigns: 3 }),
  'mid-run with a rate and an ETA': (p, clock) => {
    p.onEvent({ type: 'started', runId: 'r', campaigns: 12 });
    p.onEvent({ type: 'planned', campaignId: 1, jobs: 3000, toFetch: 3000 });
    for (let i = 0; i < 340; i++) {
      clock.advance(150);
      p.onEvent({ type: 'report', outcome: 'exported', again: false });
    }
  },
  'every field, large counts': (p, clock) => {
    clock.advance(3_600_000 * 27); // elapsed 27h, passed before the timer starts
    p.onEvent({ type: 'started', runId: 'r', campaigns: 12_345 });
    p.onEvent({ type: 'planned', campaignId: 1, jobs: 9_876_543, toFetch: 9_876_543 });
    for (let i = 0; i < 1_500; i++) {
      clock.advance(10);
      const outcome = i % 3 === 0 ? 'pending' : i % 3 === 1 ? 'failed' : 'exported';
      p.onEvent({ type: 'report', outcome, again: false });
    }
  },
};

function progressIn(columns: number, state: State): { terminal: Terminal; progress: Progress } {
  const clock = new ManualClock();
  const terminal = new Terminal(columns);
  const progress = new Progress(terminal, clock);
  state(progress, clock);
  clock.advance(1000); // a redraw by the timer
  return { terminal, progress };
}

describe('the progress bar on a terminal', () => {
  it.each(Object.entries(STATES))('fits every width from 40 to 200 columns: %s', (_name, state) => {
    for (let columns = 40; columns <= 200; columns++) {
      const { terminal, progress } = progressIn(columns, state);
      const frames = terminal.text.split('\r').slice(1);
      expect(frames.length).toBeGreaterThan(0);
      for (const frame of frames) {
        const text = frame.replace('\x1b[K', '').replace('\n', '');
        expect(displayWidth(text), `${columns} columns: ${JSON.stringify(text)}`).toBeLessThanOrEqual(
          columns - 3,
        );
        expect(text).not.toContain('\n');
      }
      // The share done is always there.
      expect(terminal.shown()).toMatch(/reports \d+\/\d+ \(\d+%\)/);
      progress.finish('succeeded');
      expect(displayWidth(terminal.shown())).toBeLessThanOrEqual(columns - 3);
    }
  });

  it('shows the whole line and a full bar where there is room', () => {
    const { terminal, progress } = progressIn(200, STATES['every field, large counts']!);
    expect(terminal.shown()).toBe(`[${'#'.repeat(0)}${'.'.repeat(28)}] ${progress.line()}`);
  });

  it('gives way in the stated order: the bar shrinks, then rate, elapsed, campaigns, exported, the bar, to retry, ETA', () => {
    expect(DROP_ORDER).toEqual(['rate', 'elapsed', 'campaigns', 'exported', 'bar', 'to retry', 'ETA']);
    const { progress } = progressIn(200, STATES['every field, large counts']!);
    const full = progress.line();
    expect(full).toMatch(
      /^campaigns 1\/12345 {2}reports 1500\/9876543 \(0%\) {2}exported 500 {2}to retry 500 {2}failed 500 {2}\d+\.\d\/s {2}ETA .+ {2}elapsed 27h 00m$/,
    );
    const at = (columns: number) => progress.frame(columns);
    const fields = (frame: string) => ({
      bar: frame.startsWith('['),
      rate: /\/s/.test(frame),
      elapsed: frame.includes('elapsed'),
      campaigns: frame.includes('campaigns'),
      exported: frame.includes('exported'),
      retry: frame.includes('to retry'),
      eta: frame.includes('ETA'),
      failed: frame.includes('failed 500'),
    });
    // Each width shows a prefix of the drop order gone, never a later field without an earlier one.
    const order = ['rate', 'elapsed', 'campaigns', 'exported', 'bar', 'retry', 'eta'] as const;
    let gone = 0;
    for (let columns = 200; columns >= 40; columns--) {
      const shown = fields(at(columns));
      const dropped = order.filter((name) => !shown[name]);
      expect(dropped, `${columns} columns`).toEqual(order.slice(0, dropped.length));
      expect(dropped.length).toBeGreaterThanOrEqual(gone);
      gone = dropped.length;
      expect(shown.failed, `${columns} columns`).toBe(true);
    }
    expect(gone).toBe(order.length); // at 40 columns only reports and failed are left
    // The bar shrinks before anything goes: at the widest line that still drops nothing.
    const widest = displayWidth(full) + 3 + 10 + 3;
    expect(at(widest)).toMatch(/^\[\.{10}\] campaigns/);
    expect(at(widest - 1)).not.toMatch(/\/s/);
  });

  it('cuts what is left with … rather than wrap on a terminal narrower than 40 columns', () => {
    const { progress } = progressIn(200, STATES['every field, large counts']!);
    const frame = progress.frame(20);
    expect(displayWidth(frame)).toBe(17);
    expect(frame.endsWith('…')).toBe(true);
  });

  it('redraws to the new width when the terminal is resized, and stops listening at the end', () => {
    const { terminal, progress } = progressIn(160, STATES['mid-run with a rate and an ETA']!);
    expect(terminal.shown()).toContain('campaigns');
    expect(terminal.listening()).toBe(1);
    terminal.resize(50);
    expect(displayWidth(terminal.shown())).toBeLessThanOrEqual(47);
    expect(terminal.shown()).not.toContain('campaigns');
    progress.finish('succeeded');
    expect(terminal.listening()).toBe(0);
  });

  it('shows what it waits for before the run starts, fitted, and nothing of it on a plain stream', () => {
    const clock = new ManualClock();
    const terminal = new Terminal(40);
    const progress = new Progress(terminal, clock);
    progress.waiting('connecting to https://api.example.com/some/long/path …');
    expect(terminal.shown()).toMatch(/^connecting to https:\/\/api\.example\.co.*…$/);
    expect(displayWidth(terminal.shown())).toBe(37);
    progress.onEvent({ type: 'started', runId: 'r', campaigns: 1 });
    clock.advance(1000);
    expect(terminal.shown()).toMatch(/^\[/);
    progress.waiting('too late');
    expect(terminal.shown()).not.toContain('too late');

    const plain = new Captured(false);
    new Progress(plain, new ManualClock()).waiting('connecting');
    expect(plain.text).toBe('');
  });
});
