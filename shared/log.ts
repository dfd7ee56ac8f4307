/**
 * The logging interface the core writes to. Powertools' Logger satisfies it in Lambda; the
 * CLI passes a console logger. Fields are structured; messages and fields never hold the key.
 */
export interface Log {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };
