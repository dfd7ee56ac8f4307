/**
 * For CLI tests: a stream that keeps what is written (a terminal or not), and a clock that
 * moves only when told, whose timers fire as it passes them.
 */
import type { ProgressClock, ProgressStream } from '../../functions/cli/progress.js';

/** A stream that keeps what is written. */
export class Captured implements ProgressStream {
  text = '';
  constructor(readonly isTTY = false) {}
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
  /** The lines written, empty ones left out. */
  lines(): string[] {
    return this.text.split('\n').filter((line) => line !== '');
  }
}

/** Time that moves only when told; its timers fire as it passes them, in order. */
export class ManualClock implements ProgressClock {
  private time = 0;
  private readonly timers: { ms: number; tick: () => void; next: number; stopped: boolean }[] = [];

  now(): number {
    return this.time;
  }

  every(ms: number, tick: () => void): () => void {
    const timer = { ms, tick, next: this.time + ms, stopped: false };
    this.timers.push(timer);
    return () => {
      timer.stopped = true;
    };
  }

  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => !t.stopped && t.next <= end).sort((a, b) => a.next - b.next)[0];
      if (!due) break;
      this.time = due.next;
      due.next += due.ms;
      due.tick();
    }
    this.time = end;
  }

  /** Timers started and not stopped. */
  running(): number {
    return this.timers.filter((t) => !t.stopped).length;
  }
}
