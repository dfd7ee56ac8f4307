/**
 * The `export` command: one run against the real API, in one process. `npm run export` and
 * the packaged `campaign-report-exporter export` both call {@link exportCommand}.
 *
 * What it prints: a usage error or a run that failed or could not start is one line on stderr,
 * `error: <reason>. <hint>`, and nothing else; a run that finished shows progress and warnings
 * on stderr and its summary on stdout; a full run first says on stderr how long it will take
 * (estimate-line.ts).
 */
import { randomUUID } from 'node:crypto';
import { untilAborted } from '../../shared/abort.js';
import { ConfigError, describeError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { runExport } from '../../shared/export/run/local-run.js';
import type { LockWait } from '../../shared/export/state/lock.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { outputTableFormat } from '../../shared/export/state/table-format.js';
import { manifestKey, STATE_ROOT, type TableFormat } from '../../shared/layout.js';
import { checkWritable } from '../../shared/storage/open.js';
import { cliCatalog } from './catalog.js';
import { type CliConfig, EXIT, parseCli, runOptionsOf, USAGE } from './config.js';
import { type CliDepsOptions, cliDeps, consoleLog, formatRequestEvent } from './deps.js';
import { exportEstimateLine } from './estimate-line.js';
import { exitCodeOf, listenForInterrupt, type SignalSource, type StopSignal } from './interrupt.js';
import {
  formatDuration,
  formatSummary,
  Progress,
  type ProgressClock,
  type ProgressStream,
} from './progress.js';

/** The command's surroundings; tests pass their own streams, folder and clock. */
export interface CliIo {
  stdout: ProgressStream;
  stderr: ProgressStream;
  /** The folder a relative --out is taken from (default: the working folder). */
  cwd: string;
  /** Time for the progress display. */
  clock?: ProgressClock;
  /** Where SIGINT and SIGTERM come from (default: the process). */
  signals?: SignalSource;
  /**
   * The run's dependencies from the parsed flags (default: `cliDeps`, the real API and storage
   * clients); the simulation passes its own storage, API and clock.
   */
  deps?: (options: CliDepsOptions) => ExportDeps;
  /** A new unique id, for the write check's key (default: the process id and a random UUID). */
  uniqueId?: () => string;
}

const USAGE_HINT = 'see --help';

/** A wait for a retry before the run starts that is said without a terminal: a few seconds, not a blink. */
const SAID_WAIT_MS = 3_000;

/** Runs `export` with `argv` (the flags after the command) and `env`; resolves to the exit code. */
export async function exportCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  io: Partial<CliIo> = {},
): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const fail = (error: unknown, hint?: string): void => {
    stderr.write(`error: ${describeError(error)}${hint ? ` (${hint})` : ''}\n`);
  };

  let config: CliConfig | 'help';
  try {
    config = parseCli(argv, env, io.cwd ?? process.cwd());
  } catch (error) {
    fail(error, USAGE_HINT);
    return EXIT.usage;
  }
  if (config === 'help') {
    stdout.write(`${USAGE}\n`);
    return EXIT.ok;
  }

  const log = consoleLog(config.verbose ? 'verbose' : config.quiet ? 'quiet' : 'normal', stderr);
  const progress = config.quiet ? undefined : new Progress(stderr, io.clock);
  /**
   * How far the command got, for the interrupted line: checking --out and its catalog, waiting
   * for another run's lock (neither has started a run: nothing to close), starting (the lock
   * taken, the run not yet under way), or the run `runId` under way.
   */
  let stage: InterruptedStage = { at: 'checking' };
  const interrupted = (signal: StopSignal, again: boolean): number => {
    progress?.finish('interrupted');
    log.settle(true);
    stderr.write(`error: ${interruptedLine(signal, again, stage)}\n`);
    return exitCodeOf(signal);
  };
  /** A line of its own on stderr, above the bar on a terminal; none with --quiet. */
  const say = (line: string): void => {
    if (progress) progress.say(line);
    else if (!config.quiet) stderr.write(`${line}\n`);
  };
  const interrupt = listenForInterrupt((first) => interrupted(first, true), io.signals);
  try {
    let deps: ExportDeps;
    try {
      deps = (io.deps ?? cliDeps)({
        ...config,
        log,
        signal: interrupt.signal,
        onRequest: (event) => {
          if (config.verbose) log.debug(formatRequestEvent(event));
          // Before the first answer, a terminal shows why nothing moves yet.
          if (event.status === 'error' && event.retryInMs !== undefined)
            progress?.waiting(
              `no answer from ${config.baseUrl} (${event.detail}); attempt ${event.attempt + 1} in ${(event.retryInMs / 1000).toFixed(1)} s`,
            );
          // Without a terminal no progress line comes before the run starts: a long wait (a
          // Retry-After, a backoff) before it is said in a line of its own. During the run the
          // progress lines every 5 s show it goes on.
          if (
            !stderr.isTTY &&
            !config.verbose &&
            stage.at !== 'run' &&
            event.retryInMs !== undefined &&
            event.retryInMs >= SAID_WAIT_MS
          )
            say(
              `GET ${event.path} -> ${event.status}${event.detail && event.detail !== `HTTP ${event.status}` ? ` (${event.detail})` : ''}: attempt ${event.attempt + 1} in ${formatDuration(event.retryInMs)}`,
            );
        },
      });
    } catch (error) {
      fail(error, error instanceof ConfigError ? USAGE_HINT : undefined);
      return error instanceof ConfigError ? EXIT.usage : EXIT.failed;
    }

    // The checks below start no run: a signal stops them at once (a file system that never
    // answers cannot hold the command), with nothing to close.
    const checked = <T>(work: Promise<T>): Promise<T> => untilAborted(work, interrupt.signal);
    const stoppedInCheck = (): number => {
      const code = interrupted(interrupt.received!, false);
      interrupt.exitSoon(code);
      return code;
    };

    // --out is proven writable before the first API request: a wrong one costs nothing.
    try {
      const id = io.uniqueId?.() ?? `${process.pid}-${randomUUID()}`;
      await checked(checkWritable(deps.storage, `${STATE_ROOT}/write-check-${id}`));
    } catch (error) {
      if (interrupt.received) return stoppedInCheck();
      fail(error);
      return EXIT.failed;
    }

    // The catalog the output is registered in, settled before the first API request as well; a
    // run without --table-format continues the output's format (hive for a new output), so that
    // a cron line need not repeat the flag of the output's first run.
    let settled: CliConfig & { tableFormat: TableFormat };
    try {
      const tableFormat = config.tableFormat ?? (await checked(outputTableFormat(deps.storage))) ?? 'hive';
      settled = { ...config, tableFormat };
      const catalog = await checked(cliCatalog(deps.storage, settled));
      if (catalog) deps = { ...deps, catalog };
    } catch (error) {
      if (interrupt.received) return stoppedInCheck();
      fail(error);
      return error instanceof ConfigError ? EXIT.usage : EXIT.failed;
    }

    stage = { at: 'starting' };
    progress?.waiting(`connecting to ${config.baseUrl} …`);
    let manifest: Manifest;
    try {
      manifest = await runExport(deps, {
        ...runOptionsOf(settled),
        // Said before the reports are fetched; not asked for when nothing would show it.
        estimate: config.full && !config.quiet,
        signal: interrupt.signal,
        // A wait says it waits, on a terminal or not (a cron job's log shows why it took long).
        onLockWait: (wait) => {
          stage = wait.state === 'waiting' ? { at: 'waiting' } : { at: 'starting' };
          say(lockWaitLine(wait, config.waitLockSeconds));
        },
        onProgress: (event) => {
          if (event.type === 'started') stage = { at: 'run', runId: event.runId };
          if (event.type === 'estimate') progress?.say(exportEstimateLine(event.size, config));
          progress?.onEvent(event);
        },
      });
    } catch (error) {
      if (interrupt.received) {
        const code = interrupted(interrupt.received, false);
        interrupt.exitSoon(code);
        return code;
      }
      // Another run holds --out, or the storage failed: the run could not go on.
      progress?.finish('failed');
      log.settle(true);
      fail(error);
      return EXIT.failed;
    }
    // A signal that came while the run published did not stop it: it finished, and says so.
    progress?.finish(manifest.status);
    log.settle(manifest.status === 'failed');
    if (manifest.status === 'failed') {
      // The reason carries the API's error_code and what to do (fatalOf); the manifest is written.
      stderr.write(`error: ${manifest.error?.message ?? 'the run failed'}\n`);
      return EXIT.failed;
    }
    if (!config.quiet) {
      stdout.write(
        `${formatSummary(manifest, deps.storage.location, manifestKey(manifest.dt, manifest.run_id))}\n`,
      );
    }
    return manifest.status === 'partial' && config.failOnPartial ? EXIT.partial : EXIT.ok;
  } finally {
    interrupt.dispose();
  }
}

/** Where the command was when a signal came (see `stage` in exportCommand). */
type InterruptedStage =
  | { at: 'checking' }
  | { at: 'waiting' }
  | { at: 'starting' }
  | { at: 'run'; runId: string };

/** `12:04:31Z`: a time of today in UTC, as short as a person reads it. */
const clockTime = (at: Date | string): string => `${new Date(at).toISOString().slice(11, 19)}Z`;

/** The lines of a wait for another run's lock (--wait-lock): when it starts and when it ends. */
function lockWaitLine(wait: LockWait, waitSeconds: number): string {
  if (wait.state === 'taken')
    return `--out is free after ${formatDuration(wait.waitedMs)} of waiting: this run starts`;
  const holder = wait.holder;
  const who = holder
    ? `run ${holder.run_id} (${holder.owner}, since ${clockTime(holder.acquired_at)})`
    : 'another run';
  const lease = holder ? `; its lock lasts until ${clockTime(holder.expires_at)} unless it renews it` : '';
  return `waiting up to ${formatDuration(waitSeconds * 1000)} (--wait-lock, until ${clockTime(wait.until)}) for ${who} to release --out${lease}`;
}

/**
 * The one line of an interrupted run: what stopped it and what the next run does (recover.ts:
 * it closes the interrupted run, publishing under its id what it finished, and asks again for
 * the reports it never got). `again`: a second signal, which stopped the process at once.
 * Before a run started (checking --out, waiting for its lock) there is nothing to close.
 */
function interruptedLine(signal: StopSignal, again: boolean, stage: InterruptedStage): string {
  if (stage.at === 'checking' || stage.at === 'waiting') {
    const where = stage.at === 'checking' ? 'while checking --out' : 'while waiting for --out (--wait-lock)';
    return `interrupted by ${signal}${again ? ' again: stopped at once' : ''} ${where}, before a run started; nothing to close, the next export to --out starts afresh`;
  }
  const runId = stage.at === 'run' ? stage.runId : undefined;
  const run = runId ? `run ${runId}` : 'the run';
  const stopped = again
    ? `interrupted by ${signal} again: stopped at once, before ${run} published`
    : `interrupted by ${signal}: ${run} stopped before it published, its requests ended and --out released`;
  const next = runId
    ? `the next export to --out closes it, publishing what it finished, and fetches the reports it did not get`
    : 'the next export to --out closes what it left and starts afresh';
  return `${stopped}; ${next}`;
}
