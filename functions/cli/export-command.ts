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
import { ConfigError, describeError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { runExport } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { manifestKey, STATE_ROOT } from '../../shared/layout.js';
import { checkWritable } from '../../shared/storage/open.js';
import { cliCatalog } from './catalog.js';
import { type CliConfig, EXIT, parseCli, runOptionsOf, USAGE } from './config.js';
import { type CliDepsOptions, cliDeps, consoleLog, formatRequestEvent } from './deps.js';
import { exportEstimateLine } from './estimate-line.js';
import { exitCodeOf, listenForInterrupt, type SignalSource, type StopSignal } from './interrupt.js';
import { formatSummary, Progress, type ProgressClock, type ProgressStream } from './progress.js';

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
  /** The run's id once it started: the interrupted line names the run the next one closes. */
  let runId: string | undefined;
  const interrupted = (signal: StopSignal, again: boolean): number => {
    progress?.finish('interrupted');
    log.settle(true);
    stderr.write(`error: ${interruptedLine(signal, again, runId)}\n`);
    return exitCodeOf(signal);
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
        },
      });
    } catch (error) {
      fail(error, error instanceof ConfigError ? USAGE_HINT : undefined);
      return error instanceof ConfigError ? EXIT.usage : EXIT.failed;
    }

    // --out is proven writable before the first API request: a wrong one costs nothing.
    try {
      const id = io.uniqueId?.() ?? `${process.pid}-${randomUUID()}`;
      await checkWritable(deps.storage, `${STATE_ROOT}/write-check-${id}`);
    } catch (error) {
      fail(error);
      return EXIT.failed;
    }

    // The catalog the output is registered in, settled before the first API request as well.
    try {
      const catalog = await cliCatalog(deps.storage, config);
      if (catalog) deps = { ...deps, catalog };
    } catch (error) {
      fail(error);
      return error instanceof ConfigError ? EXIT.usage : EXIT.failed;
    }

    progress?.waiting(`connecting to ${config.baseUrl} …`);
    let manifest: Manifest;
    try {
      manifest = await runExport(deps, {
        ...runOptionsOf(config),
        // Said before the reports are fetched; not asked for when nothing would show it.
        estimate: config.full && !config.quiet,
        signal: interrupt.signal,
        onProgress: (event) => {
          if (event.type === 'started') runId = event.runId;
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

/**
 * The one line of an interrupted run: what stopped it and what the next run does (recover.ts:
 * it closes the interrupted run, publishing under its id what it finished, and asks again for
 * the reports it never got). `again`: a second signal, which stopped the process at once.
 */
function interruptedLine(signal: StopSignal, again: boolean, runId: string | undefined): string {
  const run = runId ? `run ${runId}` : 'the run';
  const stopped = again
    ? `interrupted by ${signal} again: stopped at once, before ${run} published`
    : `interrupted by ${signal}: ${run} stopped before it published, its requests ended and --out released`;
  const next = runId
    ? `the next export to --out closes it, publishing what it finished, and fetches the reports it did not get`
    : 'the next export to --out closes what it left and starts afresh';
  return `${stopped}; ${next}`;
}
