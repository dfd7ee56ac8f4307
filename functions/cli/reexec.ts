/**
 * The packaged CLI's `export` starts Node once more, in the same process, with the memory settings
 * that only a process's start can give: glibc reads its `MALLOC_*` variables when the C library
 * starts, and V8 fixes its young generation's maximum when the isolate is made. Neither can be set
 * from inside a running Node, and `node dist/cli.mjs` or `npx` pass neither. `process.execve`
 * (POSIX exec) replaces the process's image, so the pid, the parent, stdin/stdout/stderr, the exit
 * code and the signals a shell sends stay as they were, and no second process is left in the tree.
 * Measured on a 100,000-report packaged run (BENCHMARKS.md, cli-memory).
 *
 * The entry (functions/cli/bin.ts) calls {@link restartWithStartSettings} before it loads the
 * bundle; where exec is missing (Windows, a runtime without it) or not allowed, the run goes on
 * in this process with the run-time bounds of heap.ts alone. No built-in is imported: the entry
 * links nothing before its Node check (bin.ts); they come from `process.getBuiltinModule`
 * (Node 22.3+), called only once the check has passed.
 */
import { MALLOC_MMAP_THRESHOLD_BYTES } from '../../shared/malloc.js';
import { CLI_SEMI_SPACE_MB } from './heap.js';

/**
 * glibc's arenas for the CLI's process, at most. glibc gives a thread that finds the arenas busy
 * an arena of its own, up to 8 per core, and each keeps what was freed in it to reuse: V8's
 * collector threads (one per core less one), libuv's four and the main thread each fill one
 * over a run, so what the allocator holds grows with the machine's cores, not with what the run
 * holds. One: every thread shares the main thread's, where the run's buffers are. Measured on
 * 100,000-report packaged runs run side by side (BENCHMARKS.md, cli-memory): two arenas peak
 * at 304 MB, one at 286 MB, for the same CPU (242 / 239 s); the CLI's other threads allocate
 * little, so sharing one arena costs them no measurable waiting.
 */
export const CLI_MALLOC_ARENAS = 1;

/** glibc's settings, read from the environment when the C library starts (shared/malloc.ts). */
export const CLI_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(MALLOC_MMAP_THRESHOLD_BYTES),
  MALLOC_ARENA_MAX: String(CLI_MALLOC_ARENAS),
};

/**
 * V8's flags at start-up: the young generation capped per semi-space, as `npm run export` passes
 * it (heap.ts caps it at run time otherwise, by stopping its growth, where no restart is made).
 */
export const CLI_START_FLAGS: readonly string[] = [`--max-semi-space-size=${CLI_SEMI_SPACE_MB}`];

/**
 * Set in the restarted process's environment, so that it never restarts again; set by a user
 * (any value), the CLI runs in the process Node started, without these settings.
 */
export const REEXEC_MARKER = 'CAMPAIGN_REPORT_EXPORTER_REEXEC';

/** The commands whose run is long enough for the settings to matter; the others start once. */
const RESTARTED_COMMANDS = new Set(['export']);

/** What a process was started with: the parts of `process` a restart reads. */
export interface ProcessStart {
  readonly execPath: string;
  readonly argv0: string;
  readonly execArgv: readonly string[];
  /** `process.argv`: Node's path, the entry's, then the CLI's own arguments. */
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
}

/** The exec to make: `process.execve(file, args, env)`. */
export interface Restart {
  readonly file: string;
  readonly args: string[];
  readonly env: Record<string, string>;
}

/** The name of a Node option (`--max-semi-space-size=16` → `--max-semi-space-size`), `_` read as `-`. */
const optionName = (arg: string): string => arg.split('=')[0]!.replaceAll('_', '-');

/**
 * The restart `start` needs, or undefined when it needs none: a command other than `export`, or
 * `export --help`, the marker already set (restarted, or the user's opt-out), or every setting
 * already given by the user (a `MALLOC_*` variable or a V8 flag of theirs is kept, never
 * overridden).
 */
export function restartPlan(start: ProcessStart): Restart | undefined {
  const command = start.argv[2];
  if (command === undefined || !RESTARTED_COMMANDS.has(command)) return undefined;
  // Its usage text is all `--help` does: not worth a second start of Node (~80 ms, cli-startup).
  if (start.argv.slice(3).some((arg) => arg === '--help' || arg === '-h')) return undefined;
  if (start.env[REEXEC_MARKER] !== undefined) return undefined;
  const given = new Set([...start.execArgv, ...(start.env.NODE_OPTIONS ?? '').split(/\s+/)].map(optionName));
  const flags = CLI_START_FLAGS.filter((flag) => !given.has(optionName(flag)));
  const malloc = Object.entries(CLI_MALLOC_ENV).filter(([name]) => start.env[name] === undefined);
  if (flags.length === 0 && malloc.length === 0) return undefined;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(start.env)) if (value !== undefined) env[name] = value;
  return {
    file: start.execPath,
    // The user's own Node flags after ours: on a repeated V8 flag the last one wins.
    args: [start.argv0, ...flags, ...start.execArgv, ...start.argv.slice(1)],
    env: { ...env, ...Object.fromEntries(malloc), [REEXEC_MARKER]: '1' },
  };
}

/** `process.execve` where this Node has it (22.15+, 23.11+; not on Windows). */
type Execve = (file: string, args: string[], env: Record<string, string>) => never;

/**
 * Whether an exec of `file` can be made: a failed `process.execve` cannot be caught (Node prints
 * a native stack and aborts), so whatever it could fail on is checked first. Run by `node`, `file`
 * is the binary running now; the permission model (`--permission`) refuses exec unless allowed.
 */
function canExec(file: string, entry: string | undefined, ownEntry: string): boolean {
  if ((process as { permission?: unknown }).permission !== undefined) return false;
  const { accessSync, constants, realpathSync } = process.getBuiltinModule('node:fs');
  try {
    accessSync(file, constants.X_OK);
    // Started as the CLI's main module, not imported by some other program.
    return entry !== undefined && realpathSync(entry) === realpathSync(ownEntry);
  } catch {
    // Not executable, or a path that no longer resolves: run here instead.
    return false;
  }
}

/**
 * Replaces this process with Node started again with {@link CLI_MALLOC_ENV} and
 * {@link CLI_START_FLAGS}, when {@link restartPlan} says so and exec is possible; returns (having
 * done nothing) otherwise. `ownEntryUrl`: `import.meta.url` of the entry calling it (the
 * packaged dist/cli.mjs).
 */
export function restartWithStartSettings(ownEntryUrl: string): void {
  const execve = (process as { execve?: Execve }).execve;
  if (typeof execve !== 'function' || process.platform === 'win32') return;
  const plan = restartPlan(process);
  if (plan === undefined) return;
  const ownEntry = process.getBuiltinModule('node:url').fileURLToPath(ownEntryUrl);
  if (!canExec(plan.file, process.argv[1], ownEntry)) return;
  try {
    // Node's ExperimentalWarning for execve is queued for the next tick, which this process,
    // replaced now, never reaches: nothing is printed.
    execve.call(process, plan.file, plan.args, plan.env);
  } catch {
    // Refused before the exec (Node checks its arguments and permissions in JavaScript first):
    // the run goes on here, as on a Node without execve. Nothing to report: the user's command
    // runs all the same.
  }
}
