/**
 * `campaign-report-exporter <command>`: the packaged CLI (package.json `bin`, bundled by
 * test/tools/build-cli.ts into dist/cli-main.mjs, which the entry dist/cli.mjs loads after its
 * Node check). Dispatches to a command; each command resolves to its exit code.
 */
import packageJson from '../../package.json' with { type: 'json' };
import { exitWith } from './exit-with.js';
import { boundCliHeap } from './heap.js';

const PROGRAM = 'campaign-report-exporter';

type Command = (argv: readonly string[], env: NodeJS.ProcessEnv) => Promise<number>;

/**
 * Loaded when asked, so `--help` and each command evaluate only what they use (esbuild keeps a
 * module imported this way in the bundle but runs its top level on first use).
 */
const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  export: {
    summary: 'copy the Integration API into a folder or s3://bucket/prefix',
    load: async () => (await import('./export-command.js')).exportCommand,
  },
  sql: {
    summary: 'SQL over an export (folder or S3) with DuckDB: the views as in Athena',
    load: async () => (await import('./sql-command.js')).sqlCommand,
  },
  aws: {
    summary: "the deployed stack's runs: start one, see its progress, list the last ones",
    load: async () => (await import('./aws-command.js')).awsCommand,
  },
  simulator: {
    summary: "serve the project's Integration API simulator on 127.0.0.1, to try export",
    // The one import from functions/ into test/: the simulator ships so that the CLI can be
    // tried without an API account; it stays the test suite's simulator.
    load: async () => (await import('../../test/simulator/command.js')).simulatorCommand,
  },
};

const USAGE = `Usage: ${PROGRAM} <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(10)} ${summary}`)
  .join('\n')}

Options:
  -h, --help     this text; \`${PROGRAM} <command> --help\` for a command's options
  -V, --version  the version

Exit code 2 on a usage error; each command's help says its other codes.`;

/** Runs the command `argv[0]` with the flags after it; resolves to the exit code. */
async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (name === '--version' || name === '-V') {
    process.stdout.write(`${packageJson.version}\n`);
    return 0;
  }
  if (name === undefined) {
    process.stderr.write(`error: no command given\n\n${USAGE}\n`);
    return 2;
  }
  // Own keys only: `toString` is no command.
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    process.stderr.write(
      `error: unknown command "${name}"; the commands are ${Object.keys(COMMANDS).join(', ')} (${PROGRAM} --help)\n`,
    );
    return 2;
  }
  return (await command.load())(rest, env);
}

boundCliHeap();
exitWith(main(process.argv.slice(2), process.env));
