/**
 * The `aws` command: the deployed stack's runs, seen from a laptop. `start` invokes start-run
 * and prints the run id; `status` shows an open run's progress from its records in the bucket
 * (or a closed run's manifest); `runs` lists the last runs. `npm run aws` and the packaged
 * `campaign-report-exporter aws` both call {@link awsCommand}. The stack is found by its name
 * (its stage's); everything else comes from its outputs.
 */
import { parseArgs } from 'node:util';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import * as z from 'zod';
import {
  backfillBeforeProjection,
  type FullRunEstimate,
  type StartRunEvent,
} from '../../shared/aws/payloads.js';
import { DEFAULT_STAGE, stackNameOf } from '../../shared/aws/stack-name.js';
import { ConfigError, describeError } from '../../shared/errors.js';
import { DtSchema, RunIdSchema } from '../../shared/export/state/records.js';
import { type OpenStorageOptions, openStorage } from '../../shared/storage/open.js';
import type { Storage } from '../../shared/storage/storage.js';
import { formatState, runJson, runsTable, stateJson } from './aws-format.js';
import { heldLock, lastRuns, openRunStates, runState } from './aws-runs.js';
import { invokeStartRun, OUTPUT, requiredOutput, type StartOutcome, stackOutputs } from './aws-stack.js';
import { truncate } from './columns.js';
import { awsEstimateLine } from './estimate-line.js';
import { formatTable, type ProgressStream } from './progress.js';

/** Exit codes of the aws command (USAGE and docs/cli.md say the same). */
export const AWS_EXIT = {
  /** Done: the run started; the status or the runs were shown. */
  ok: 0,
  /** The run failed at start or start-run failed; the stack, the bucket or a run id not found; AWS refused. */
  failed: 1,
  /** A flag or argument is wrong, or a backfill date is before the projection start; no run started. */
  usage: 2,
  /** No run started: another run holds the output (start-run answered `skipped`). */
  notStarted: 3,
} as const;

const DEFAULT_LIMIT = 10;
const MAX_LIMIT = 1000;

export const AWS_USAGE = `Usage: campaign-report-exporter aws <start|status|runs> [options]
       npm run --silent aws -- <start|status|runs> [options]   (in a checkout)

The runs of the deployed stack (docs/operate.md#start-a-run-by-hand), with the AWS credentials
the SDK finds (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a role).

Commands:
  start [--full | --incremental] [--date YYYY-MM-DD]
        invokes start-run and waits for its answer; prints the run id on stdout. A full run
        first has start-run count its campaigns' jobs (starting nothing) and says on stderr how
        long it takes at the stack's rateCeiling, what its runDeadlineMinutes leaves to later
        runs and what shortens it, then starts it. --date names
        the run's dt= partition (default: today, UTC): a backfill is --full with a --date,
        and lands today's state of the API under that date (the API keeps no history). A
        date before the stack's partition projection start (output ProjectionStartDate,
        2025-01-01 by default) is refused, here and by start-run: Athena would not see the
        partition (exit 2)
  status [RUN_ID]
        a run's progress from its records in the bucket: campaigns planned, units done,
        jobs by outcome, requests, errors; a closed run's manifest. Without RUN_ID, the
        open runs, else who holds the output's lock and the last run
  runs [--limit N]
        the last N runs (default ${DEFAULT_LIMIT}), newest first: status, mode, dt, counts, duration

Options:
  --stage <name>    the stage deployed (default ${DEFAULT_STAGE}: stack CampaignReportExporter;
                    another: CampaignReportExporter-<name>)
  --stack <name>    the stack's name, when it is none of those
  --region <region> the stack's region (default: AWS_REGION or the profile's)
  --json            JSON on stdout instead of a table (start: start-run's answer)
  -h, --help        this text

Exit codes:
  ${AWS_EXIT.ok}  the run started (start), or the status or runs were shown
  ${AWS_EXIT.failed}  the run failed at start, start-run failed, or the stack, its bucket or the run
     was not found, or AWS refused (one line on stderr says what and what to do)
  ${AWS_EXIT.usage}  usage error (a flag, a date before the projection start); nothing was sent
  ${AWS_EXIT.notStarted}  start: no run started, another run holds the output`;

/** The command's surroundings; tests pass their own streams, clients and clock. */
export interface AwsIo {
  stdout: ProgressStream & { columns?: number };
  stderr: ProgressStream;
  cloudFormation: CloudFormationClient;
  lambda: LambdaClient;
  /** How the stack's bucket is opened (default: the SDK's endpoint in the stack's region). */
  storageOptions: OpenStorageOptions;
  now: () => Date;
}

const LimitSchema = z.coerce
  .number({ error: `--limit takes a whole number from 1 to ${MAX_LIMIT}` })
  .int({ error: `--limit takes a whole number from 1 to ${MAX_LIMIT}` })
  .min(1, { error: `--limit takes a whole number from 1 to ${MAX_LIMIT}` })
  .max(MAX_LIMIT, { error: `--limit takes a whole number from 1 to ${MAX_LIMIT}` });

interface Parsed {
  sub: 'start' | 'status' | 'runs';
  stackName: string;
  region: string | undefined;
  json: boolean;
  event: StartRunEvent;
  runId: string | undefined;
  limit: number;
}

const SUBCOMMANDS = ['start', 'status', 'runs'] as const;

/** The flags; every error is a ConfigError naming the flag. */
function parse(argv: readonly string[]): Parsed | 'help' {
  const [sub, ...rest] = argv;
  if (sub === '-h' || sub === '--help') return 'help';
  if (!SUBCOMMANDS.includes(sub as Parsed['sub']))
    throw new ConfigError(sub === undefined ? 'no aws command given' : `unknown aws command "${sub}"`, {
      hint: 'use start, status or runs',
    });
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...rest],
      allowPositionals: true,
      strict: true,
      options: {
        stage: { type: 'string' },
        stack: { type: 'string' },
        region: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        ...(sub === 'start' && {
          full: { type: 'boolean', default: false },
          incremental: { type: 'boolean', default: false },
          date: { type: 'string' },
        }),
        ...(sub === 'runs' && { limit: { type: 'string' } }),
      },
    }));
  } catch (cause) {
    throw new ConfigError(`aws ${sub}: ${describeError(cause)}`, { cause });
  }
  if (values.help) return 'help';
  const stage = typeof values.stage === 'string' ? values.stage : DEFAULT_STAGE;
  let stackName: string;
  try {
    stackName = typeof values.stack === 'string' ? values.stack : stackNameOf(stage);
  } catch (cause) {
    throw new ConfigError(`--stage ${describeError(cause)}`, { cause });
  }
  if (values.full && values.incremental) throw new ConfigError('--full and --incremental exclude each other');
  const date = values.date;
  if (typeof date === 'string' && !DtSchema.safeParse(date).success)
    throw new ConfigError(`--date takes a calendar date YYYY-MM-DD, got ${date}`);
  const maxPositionals = sub === 'status' ? 1 : 0;
  if (positionals.length > maxPositionals)
    throw new ConfigError(
      `aws ${sub} takes ${maxPositionals ? 'one run id' : 'no argument'}, got ${positionals.join(' ')}`,
    );
  const runId = positionals[0];
  if (runId !== undefined && !RunIdSchema.safeParse(runId).success)
    throw new ConfigError(`${runId} is not a run id (like 20261122T031500Z-a1b2c3)`);
  const limit = LimitSchema.safeParse(values.limit ?? DEFAULT_LIMIT);
  if (!limit.success) throw new ConfigError(limit.error.issues[0]?.message ?? '--limit is wrong');
  return {
    sub: sub as Parsed['sub'],
    stackName,
    region: typeof values.region === 'string' ? values.region : undefined,
    json: values.json === true,
    event: { mode: values.full ? 'full' : 'incremental', ...(typeof date === 'string' && { date }) },
    runId,
    limit: limit.data,
  };
}

/** Runs `aws` with `argv` (the words after it); resolves to the exit code. */
export async function awsCommand(
  argv: readonly string[],
  _env: NodeJS.ProcessEnv,
  io: Partial<AwsIo> = {},
): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  let parsed: Parsed | 'help';
  try {
    parsed = parse(argv);
  } catch (error) {
    stderr.write(`error: ${describeError(error)} (see --help)\n`);
    return AWS_EXIT.usage;
  }
  if (parsed === 'help') {
    stdout.write(`${AWS_USAGE}\n`);
    return AWS_EXIT.ok;
  }
  const region = parsed.region !== undefined ? { region: parsed.region } : {};
  const cloudFormation = io.cloudFormation ?? new CloudFormationClient(region);
  const out = { stdout, stderr, json: parsed.json, now: io.now ?? (() => new Date()) };
  try {
    const outputs = await stackOutputs(cloudFormation, parsed.stackName);
    const output = (key: string) => requiredOutput(outputs, key, parsed.stackName);
    if (parsed.sub === 'start') {
      // A stack deployed before the output existed has none: start-run then checks alone.
      const refused = backfillBeforeProjection(parsed.event.date, outputs.get(OUTPUT.projectionStart));
      if (refused) {
        stderr.write(`error: ${refused}; nothing was started\n`);
        return AWS_EXIT.usage;
      }
      // No retries: an invocation lost on the way back may have started a run (aws-stack.ts).
      const lambda = io.lambda ?? new LambdaClient({ ...region, maxAttempts: 1 });
      const startRun = output(OUTPUT.startRunFunction);
      if (parsed.event.mode !== 'full')
        return reportStart(await invokeStartRun(lambda, startRun, parsed.event), out);
      // A full run says how long it takes before it starts: start-run answers the estimate
      // alone (no lock, nothing written), then starts the run without counting again.
      const estimated = await invokeStartRun(lambda, startRun, { ...parsed.event, estimate: 'only' });
      // A stack deployed before `estimate` existed ignores it and starts the run: that is the start.
      if (estimated.kind === 'answer' && estimated.answer.status !== 'estimated') {
        if (estimated.answer.status === 'started' && estimated.answer.estimate)
          stderr.write(`${awsEstimateLine(estimated.answer.estimate)}\n`);
        return reportStart(estimated, out);
      }
      const estimate = sayEstimate(estimated, stderr);
      const started = await invokeStartRun(lambda, startRun, { ...parsed.event, estimate: 'skip' });
      return reportStart(withEstimate(started, estimate), out);
    }
    const storage = openStorage(output(OUTPUT.dataLocation), { ...region, ...io.storageOptions });
    if (parsed.sub === 'runs') return await showRuns(storage, parsed.limit, out);
    return await showStatus(storage, parsed.runId, out);
  } catch (error) {
    stderr.write(`error: ${describeError(error)}\n`);
    return AWS_EXIT.failed;
  }
}

interface Out {
  stdout: AwsIo['stdout'];
  stderr: ProgressStream;
  json: boolean;
  now: () => Date;
}

/**
 * The estimate start-run answered, said on stderr before the run starts; or why there is none
 * (the start goes on: it says the error itself if it meets one).
 */
function sayEstimate(outcome: StartOutcome, stderr: ProgressStream): FullRunEstimate | undefined {
  if (outcome.kind === 'answer' && outcome.answer.status === 'estimated' && outcome.answer.estimate) {
    stderr.write(`${awsEstimateLine(outcome.answer.estimate)}\n`);
    return outcome.answer.estimate;
  }
  const why =
    outcome.kind === 'error'
      ? outcome.message
      : outcome.answer.status === 'estimated'
        ? (outcome.answer.error ?? 'start-run counted nothing')
        : outcome.answer.status;
  stderr.write(`full run: no estimate (${why}); starting it all the same\n`);
  return undefined;
}

/** The start's answer with the estimate said before it (`--json` gives both, as one answer). */
function withEstimate(outcome: StartOutcome, estimate: FullRunEstimate | undefined): StartOutcome {
  if (!estimate || outcome.kind !== 'answer' || outcome.answer.status !== 'started') return outcome;
  return { kind: 'answer', answer: { ...outcome.answer, estimate } };
}

/** start-run's answer as the run id (stdout) and one line (stderr); the exit code. */
function reportStart(outcome: StartOutcome, { stdout, stderr, json }: Out): number {
  if (json) stdout.write(`${JSON.stringify(outcome.kind === 'answer' ? outcome.answer : outcome.payload)}\n`);
  if (outcome.kind === 'error') {
    stderr.write(`error: start-run failed: ${outcome.message}\n`);
    return AWS_EXIT.failed;
  }
  const { answer } = outcome;
  switch (answer.status) {
    case 'started':
      if (!json) stdout.write(`${answer.run_id}\n`);
      stderr.write(
        `run ${answer.run_id} started: ${answer.campaigns} campaign(s) to plan; follow it with: aws status ${answer.run_id}\n`,
      );
      return AWS_EXIT.ok;
    case 'listing':
      if (!json) stdout.write(`${answer.run_id}\n`);
      stderr.write(
        `run ${answer.run_id} started: its campaign listing goes on in plan-campaign from page ${answer.next_page}; follow it with: aws status ${answer.run_id}\n`,
      );
      return AWS_EXIT.ok;
    case 'failed':
      stderr.write(
        `error: run ${answer.run_id} failed at start: ${answer.error} (finish-run closes it as failed within 5 minutes)\n`,
      );
      return AWS_EXIT.failed;
    case 'skipped':
      stderr.write(`error: no run started: ${answer.reason}\n`);
      return AWS_EXIT.notStarted;
    case 'refused':
      stderr.write(`error: no run started: ${answer.reason}\n`);
      return AWS_EXIT.usage;
    case 'duplicate':
      stderr.write(`error: no run started: the scheduled time ${answer.scheduled_time} has had its start\n`);
      return AWS_EXIT.notStarted;
    case 'estimated':
      // Asked only with `estimate: only`, which reportStart is never given.
      stderr.write('error: start-run answered an estimate where a start was asked; no run started\n');
      return AWS_EXIT.failed;
  }
}

/** `status [RUN_ID]`. */
async function showStatus(storage: Storage, runId: string | undefined, out: Out): Promise<number> {
  const now = out.now();
  if (runId !== undefined) {
    const state = await runState(storage, runId);
    if (state.state === 'unknown') {
      out.stderr.write(
        `error: no run ${runId} in ${storage.location}: neither open nor with a manifest (aws runs lists the last runs)\n`,
      );
      return AWS_EXIT.failed;
    }
    out.stdout.write(
      `${out.json ? JSON.stringify(stateJson(state)) : formatState(state, storage.location, now)}\n`,
    );
    return AWS_EXIT.ok;
  }
  const open = await openRunStates(storage);
  const lock = await heldLock(storage, now);
  const [last] = open.length === 0 ? await lastRuns(storage, 1) : [];
  if (out.json) {
    out.stdout.write(
      `${JSON.stringify({ open: open.map(stateJson), lock: lock ?? null, last_run: last?.manifest ?? null })}\n`,
    );
    return AWS_EXIT.ok;
  }
  const blocks = open.map((state) => formatState(state, storage.location, now));
  if (open.length === 0) {
    const rows: [string, string][] = [['open runs', 'none']];
    if (lock) rows.push(['lock', `held by ${lock.run_id} (${lock.owner}) until ${lock.expires_at}`]);
    rows.push([
      'last run',
      last
        ? `${last.manifest.run_id} ${last.manifest.status} (${last.manifest.mode}, dt=${last.manifest.dt}, finished ${last.manifest.finished_at})`
        : 'none',
    ]);
    blocks.push(formatTable(rows));
  }
  out.stdout.write(`${blocks.join('\n\n')}\n`);
  return AWS_EXIT.ok;
}

/** `runs [--limit N]`. */
async function showRuns(storage: Storage, limit: number, out: Out): Promise<number> {
  const runs = await lastRuns(storage, limit);
  if (out.json) {
    out.stdout.write(
      `${JSON.stringify(runs.map(({ manifest, key }) => ({ ...runJson(manifest), manifest: key })))}\n`,
    );
    return AWS_EXIT.ok;
  }
  if (runs.length === 0) {
    out.stdout.write(`no runs yet in ${storage.location}\n`);
    return AWS_EXIT.ok;
  }
  const table = runsTable(runs.map(({ manifest }) => manifest));
  // On a terminal a row never wraps: the columns past its width are cut (--json has them all).
  const width = out.stdout.isTTY ? out.stdout.columns : undefined;
  out.stdout.write(`${table.map((line) => (width ? truncate(line, width) : line)).join('\n')}\n`);
  return AWS_EXIT.ok;
}
