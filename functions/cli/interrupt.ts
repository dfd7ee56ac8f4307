/**
 * Ctrl-C and SIGTERM during a run: the first one aborts it (requests ended, nothing published,
 * the lock released: export-command.ts says so in one line); a second one exits at once.
 */
import { InterruptedError } from '../../shared/errors.js';
import { EXIT } from './config.js';

export type StopSignal = 'SIGINT' | 'SIGTERM';

/** The exit code of a run stopped by `signal`: 128 + its number, as a shell reports it. */
export const exitCodeOf = (signal: StopSignal): number =>
  signal === 'SIGINT' ? EXIT.interrupted : EXIT.terminated;

/**
 * How long an interrupted process may take to end by itself once its line is written; then it
 * exits. A wait of the rate limiter for a long Retry-After would otherwise hold it that long.
 */
export const EXIT_GRACE_MS = 1_000;

/** What a run listens to while it goes; {@link Interrupt.dispose} when it is over. */
export interface Interrupt {
  /** Aborted by the first signal, with an InterruptedError as its reason. */
  readonly signal: AbortSignal;
  /** The first signal received, if any. */
  readonly received: StopSignal | undefined;
  /** Exits with `code` after EXIT_GRACE_MS unless the process has ended by itself. */
  exitSoon(code: number): void;
  dispose(): void;
}

/** Where signals come from and how the process ends: the process itself, or a test's. */
export interface SignalSource {
  on(event: StopSignal, listener: () => void): unknown;
  off(event: StopSignal, listener: () => void): unknown;
  exit(code: number): void;
}

/**
 * Listens for SIGINT and SIGTERM until disposed. The first aborts `signal`; a second calls
 * `onSecond` (the one line for a person) and exits at once with the first signal's code.
 */
export function listenForInterrupt(
  onSecond: (first: StopSignal) => void,
  source: SignalSource = process,
): Interrupt {
  const controller = new AbortController();
  let received: StopSignal | undefined;
  const handle = (signal: StopSignal) => () => {
    if (received !== undefined) {
      onSecond(received);
      source.exit(exitCodeOf(received));
      return;
    }
    received = signal;
    controller.abort(new InterruptedError(`interrupted by ${signal}`));
  };
  const listeners = { SIGINT: handle('SIGINT'), SIGTERM: handle('SIGTERM') };
  source.on('SIGINT', listeners.SIGINT);
  source.on('SIGTERM', listeners.SIGTERM);
  return {
    signal: controller.signal,
    get received() {
      return received;
    },
    exitSoon(code) {
      setTimeout(() => source.exit(code), EXIT_GRACE_MS).unref();
    },
    dispose() {
      source.off('SIGINT', listeners.SIGINT);
      source.off('SIGTERM', listeners.SIGTERM);
    },
  };
}
