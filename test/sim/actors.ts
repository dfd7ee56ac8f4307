/**
 * The actors' glue, in one file so that it is easy to follow when the handlers' signatures
 * change. The Lambda actors call the real handlers of functions/aws/*.ts through their seam
 * (`HandlerRuntime`, made of the simulation's parts in runtime.ts): start-run
 * (`startRunHandler`), plan-campaign and export-reports (`planCampaignHandler`,
 * `exportReportsHandler`, given their delivery as an SQSEvent by `invokeWithBatch`, Lambda's
 * event source mapping: the partial batch response's successes are deleted), finish-run
 * (`finishRunHandler`). Faults the handlers cannot see reach them as the world would: an
 * invocation whose remaining time runs out (its Lambda context), a closing larger than
 * start-run's recovery takes on. The CLI runs its `export` command's entry (`exportCommand`)
 * through the command's seam.
 */
import type { GlueClient } from '@aws-sdk/client-glue';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { exportReportsHandler } from '../../functions/aws/export-reports.js';
import { finishRunHandler } from '../../functions/aws/finish-run.js';
import { planCampaignHandler } from '../../functions/aws/plan-campaign.js';
import { type StartRunAnswer, startRunHandler as startRun } from '../../functions/aws/start-run.js';
import { EXIT } from '../../functions/cli/config.js';
import { exportCommand } from '../../functions/cli/export-command.js';
import type { RateLimiter } from '../../shared/api/limiter.js';
import { ExporterError } from '../../shared/errors.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import { exportSendMs, pendingJobs } from '../../shared/export/run/export-unit.js';
import { RUN_START_GRACE_MS } from '../../shared/export/run/start-run.js';
import type { LockProcess } from '../../shared/export/state/lock.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import {
  type Mode,
  parseRecord,
  type TableFormat,
  UnitSchema,
  UnitSummarySchema,
} from '../../shared/export/state/records.js';
import { GlueCatalog } from '../../shared/iceberg/glue-catalog.js';
import { STATE_KEYS } from '../../shared/layout.js';
import type { Log } from '../../shared/log.js';
import { S3Storage } from '../../shared/storage/s3.js';
import type { ApiTally, SimApi } from './api.js';
import type { SimBudget } from './budget.js';
import type { SimFetcherSlots } from './fetcher-slots.js';
import { GLUE_DATABASE, type SimGlue } from './glue.js';
import { lambdaContext, simRuntime } from './runtime.js';
import type { SimS3 } from './s3.js';
import type { Actor, Sim } from './scheduler.js';
import type { Delivery, SimQueue } from './sqs.js';
import type { UnitDeadlines, UnitDeliveryFacts } from './unit-deadline.js';

/** The deployment's settings, small so that deadlines and leases pass within a seed. */
export interface Settings {
  deadlineMs: number;
  unitSize: number;
  listPageSize: number;
  maxReceiveCount: number;
  /** Reports fetched at once within a unit. */
  fetchConcurrency: number;
  /** export-reports invocations that fetch at once (REPORT_FETCHERS); undefined: every one, no slot. */
  fetchers?: number | undefined;
  /**
   * How every run of the seed writes its tables: the CLI's `--table-format`, and for start-run
   * the CDK context `tableFormat` (docs/iceberg.md), which functions/aws/start-run.ts does not pass
   * yet. Iceberg runs commit through the file catalog on the same bucket (`deps.catalog` unset);
   * the Glue catalog is not simulated.
   */
  tableFormat: TableFormat;
  /**
   * Per start-run invocation while faults are on: its recovery hands a run left open on to
   * finish-run at once (a closing larger than start-run's recovery takes on, RECOVERY_OUTPUT_BYTES),
   * so that the start goes on while the older run's closing is still open.
   */
  startHandsOn?: number;
}

/** Start invocations, while faults are on, whose time runs out after every page (as plan-campaign's). */
const START_OUT_OF_TIME = 0.3;

/** Counts ExportRunFinished events per run (the event bus's consumers). */
export class Announcer {
  readonly events = new Map<string, number>();
  /** Who put each event, and when, in order. */
  readonly announcers = new Map<string, Array<{ actor: Actor; t: number }>>();
  constructor(
    private readonly sim: Sim,
    /** Per call: EventBridge refuses the entry (FailedEntryCount). */
    private readonly failRate: number,
  ) {}

  /** functions/aws/announce.ts for `actor`. */
  for(actor: Actor): (manifest: Manifest) => Promise<void> {
    return (manifest) =>
      this.sim.call(actor, this.sim.rng.int(10, 80), `announce ${manifest.run_id}`, () => {
        if (this.sim.faultsOn && this.sim.rng.chance(this.failRate)) {
          throw new ExporterError(`EventBridge refused the ExportRunFinished event of ${manifest.run_id}`, {
            retryable: true,
          });
        }
        this.events.set(manifest.run_id, (this.events.get(manifest.run_id) ?? 0) + 1);
        this.announcers.set(manifest.run_id, [
          ...(this.announcers.get(manifest.run_id) ?? []),
          { actor, t: this.sim.now },
        ]);
        this.sim.log(actor, `ExportRunFinished ${manifest.run_id} (${manifest.status})`);
      });
  }
}

export interface World {
  sim: Sim;
  s3: SimS3;
  api: SimApi;
  planQueue: SimQueue;
  reportQueue: SimQueue;
  announcer: Announcer;
  settings: Settings;
  unitDeadlines: UnitDeadlines;
  fetcherSlots: SimFetcherSlots;
  /** The deployment's request budget over the simulated DynamoDB (budget.ts); unset: none. */
  budget?: SimBudget | undefined;
  /** The Glue catalog the seed's Iceberg tables are in (glue.ts); unset: the file catalog. */
  glue?: SimGlue | undefined;
  /** Told why a start answered `skipped` (the holder the lock named): liveness.ts, 16. */
  onSkipped?: (actor: Actor, reason: string) => void;
  /** A finish-run that handed closings on (its answer's `handed_on`): the scenario may start a run after it. */
  onHandedOn?: (actor: Actor) => void;
}

export function logFor(sim: Sim, actor: Actor): Log {
  const line =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (!sim.traceOn && level !== 'error') return;
      const detail = fields ? ` ${JSON.stringify(fields).slice(0, level === 'error' ? 800 : 240)}` : '';
      sim.log(actor, `${level}: ${message}${detail}`);
    };
  return { debug: () => {}, info: line('info'), warn: line('warn'), error: line('error') };
}

/**
 * An actor's ExportDeps: its own storage client, API clients, clock, randomness and sleep;
 * `api` sets its API clients' time for requests and tally (SimApi.client).
 */
export function depsFor(
  world: World,
  actor: Actor,
  api: { msUntilStop?: () => number; tally?: ApiTally; limiter?: RateLimiter } = {},
): ExportDeps {
  const storage = new S3Storage({
    bucket: 'sim-bucket',
    client: world.s3.clientFor(actor) as S3Client,
    listPageSize: world.settings.listPageSize,
    // Its 409 backoff on the simulation's clock.
    sleep: (ms) => world.sim.sleep(actor, ms),
  });
  return {
    api: () => world.api.client(actor, api),
    storage,
    ...catalogFor(world, actor, storage),
    log: logFor(world.sim, actor),
    now: () => new Date(world.sim.now + actor.offsetMs),
    random: actor.rng.fn,
    sleep: (ms) => world.sim.sleep(actor, ms),
  };
}

/**
 * What a container gets from the deployment's services beside S3 and SQS (the one place the
 * simulated DynamoDB is wired in): the container's limiter on the request budget
 * (functions/aws/request-budget.ts `containerLimiter`, budget.ts).
 */
export function containerServices(world: World, actor: Actor): { limiter?: RateLimiter } {
  return world.budget ? { limiter: world.budget.limiterFor(actor) } : {};
}

/**
 * The catalog of an actor's Iceberg commits: in the Glue seeds, the real `GlueCatalog` over the
 * simulated Glue (new metadata files named from the actor's randomness: a seed replays).
 */
function catalogFor(world: World, actor: Actor, storage: S3Storage): { catalog?: GlueCatalog } {
  if (!world.glue) return {};
  const hex = () => actor.rng.int(0, 0xffff).toString(16).padStart(4, '0');
  return {
    catalog: new GlueCatalog({
      client: world.glue.clientFor(actor) as GlueClient,
      databaseName: GLUE_DATABASE,
      storage,
      uuid: () => `${hex()}${hex()}-${hex()}-4${hex().slice(1)}-8${hex().slice(1)}-${hex()}${hex()}${hex()}`,
    }),
  };
}

export type StartResult = 'duplicate' | 'skipped' | 'failed' | 'started';

/** functions/aws/start-run.ts `startRunHandler`, invoked by the schedule (or by hand). */
export async function startRunHandler(
  world: World,
  actor: Actor,
  input: { mode: Mode; scheduledTime?: string; tableFormat?: TableFormat; recoveryHandsOn?: boolean },
): Promise<StartResult> {
  // A fault: an API so slow that the invocation's time runs out after each page: the campaign
  // listing and the plan messages are handed on, through every interleaving of the seed.
  const context = outOfTime(world, actor, RUN_START_GRACE_MS, START_OUT_OF_TIME);
  // A fault: the recovery meets a closing larger than it takes on (RECOVERY_OUTPUT_BYTES), and
  // hands it on to finish-run at once, so that the start goes on while it is still open.
  // (A late closing's start, scenario.ts `lateClosings`, always meets one: `recoveryHandsOn`.)
  const handsOn =
    (world.sim.faultsOn && actor.rng.chance(world.settings.startHandsOn ?? 0)) ||
    input.recoveryHandsOn === true;
  const rt = simRuntime(world, actor, { tableFormat: input.tableFormat, recoveryHandsOn: handsOn });
  const event = { mode: input.mode, ...(input.scheduledTime && { scheduled_time: input.scheduledTime }) };
  const answer: StartRunAnswer = await startRun(rt, event, context);
  world.sim.log(actor, `start-run answered ${JSON.stringify(answer).slice(0, 200)}`);
  switch (answer.status) {
    case 'skipped':
      world.onSkipped?.(actor, answer.reason ?? '');
      return answer.status;
    case 'duplicate':
    case 'failed':
      return answer.status;
    case 'started':
    case 'listing':
      return 'started';
    default:
      throw new Error(`start-run answered ${answer.status}`);
  }
}

/**
 * The Lambda context of an invocation of `timeoutMs`; with the fault's chance (while faults are
 * on), one whose time runs out after the handler took it: an API so slow that no further page
 * starts.
 */
function outOfTime(world: World, actor: Actor, timeoutMs: number, chance: number) {
  const slowApi = world.sim.faultsOn && actor.rng.chance(chance);
  // Half its time gone at once: past every point where a listing starts no further page
  // (`stopStartingAfter` keeps within half), while what it leases for its remaining time (a
  // recovery's closing) still ends before the invocation does.
  const slow = (elapsed: number) => Math.min(timeoutMs - elapsed, timeoutMs / 2);
  return lambdaContext(world, timeoutMs, slowApi ? slow : undefined);
}

/**
 * Lambda's event source mapping for one delivery: the record as an SQSEvent, the handler's
 * partial batch response, and the message deleted unless it failed. An invocation that throws
 * or dies leaves its message to come back after the visibility timeout.
 */
async function invokeWithBatch(
  actor: Actor,
  queue: SimQueue,
  delivery: Delivery,
  handler: (event: SQSEvent) => Promise<SQSBatchResponse>,
): Promise<void> {
  const { message } = delivery;
  const event: SQSEvent = {
    Records: [
      {
        messageId: message.id,
        // The simulated queue takes a message's id as its receipt handle.
        receiptHandle: message.id,
        body: JSON.stringify(message.body),
        attributes: {
          ApproximateReceiveCount: String(delivery.receiveCount),
          SentTimestamp: '0',
          SenderId: 'sim',
          ApproximateFirstReceiveTimestamp: '0',
        },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: `arn:aws:sqs:sim:000000000000:${queue.name}`,
        awsRegion: 'sim',
      },
    ],
  };
  const { batchItemFailures } = await handler(event);
  const failed = new Set(batchItemFailures.map((f) => f.itemIdentifier));
  if (!failed.has(message.id)) await queue.delete(actor, message);
}

/** Plan invocations, while faults are on, whose time runs out after every page. */
const PLAN_OUT_OF_TIME = 0.3;

/** functions/aws/plan-campaign.ts `planCampaignHandler`, one delivery. */
export async function planHandler(
  world: World,
  actor: Actor,
  delivery: Delivery,
  timeoutMs: number,
): Promise<void> {
  // A fault: an API so slow that the invocation's time runs out after each page. The listing
  // is then checkpointed and handed on page by page, through every interleaving of the seed.
  const context = outOfTime(world, actor, timeoutMs, PLAN_OUT_OF_TIME);
  const rt = simRuntime(world, actor);
  await invokeWithBatch(actor, world.planQueue, delivery, (event) => planCampaignHandler(rt, event, context));
}

/** What export-reports' error says when its delivery decided to retry the unit (`unitNext`). */
const RETRY_DECIDED = 'report(s) pending, retried later';

/** Unit invocations, while faults are on, whose time for requests ends early. */
const UNIT_OUT_OF_TIME = 0.3;
/** Of those, the share with no time at all (a unit its batch reached late). */
const UNIT_NO_TIME = 0.3;
/**
 * The others' time for requests ends within this of their start: before the first request
 * (its summary and run record read first, 5-60 ms each), or after some (20-400 ms each).
 */
const UNIT_TIME_WITHIN_MS = 600;

/**
 * functions/aws/export-reports.ts `exportReportsHandler`, one delivery: its requests through the
 * real `limiterUntil`, none sent past `exportSendMs` of its timeout on the simulation's clock,
 * and what becomes of the unit by the handler's own rule. The facts of invariant 12 are
 * gathered beside it (unit-deadline.ts): the deadline drawn, the API's answers, and the unit's
 * summary as the delivery left it.
 */
export async function unitHandler(
  world: World,
  actor: Actor,
  delivery: Delivery,
  timeoutMs: number,
): Promise<void> {
  // A fault: an invocation whose time for requests ends early, at a random point (seeded by the
  // actor's randomness, so that a seed replays): a unit cut short after some reports, before
  // any, or reached with no time at all. The context's remaining time after the handler took
  // its timeout says so: exportSendMs(timeoutMs) of it is used up `sendMs` after the start.
  const cut = world.sim.faultsOn && actor.rng.chance(UNIT_OUT_OF_TIME);
  const noTime = cut && actor.rng.chance(UNIT_NO_TIME);
  const sendMs = !cut ? 0 : noTime ? 0 : actor.rng.int(1, UNIT_TIME_WITHIN_MS);
  const used = exportSendMs(timeoutMs);
  const context = lambdaContext(
    world,
    timeoutMs,
    cut ? (elapsed) => timeoutMs - used + sendMs - elapsed : undefined,
  );
  const unit = UnitSchema.parse(delivery.message.body);
  const tally: ApiTally = { decided: 0, notSent: 0 };
  let facts: UnitDeliveryFacts | undefined;
  // A delivery that failed otherwise than by its decision to retry (a storage error) is not
  // judged, as one that crashed: it returned no summary.
  let failed = false;
  const judged = simRuntime(world, actor, {
    tally,
    budgeted: true,
    // Asked once the invocation may fetch (it took a slot, or there are none): no time also when
    // taking the slot outlasted the time for requests (a stalled table), or the slot was lost.
    onApiDeps: (msUntilStop) => {
      const late = msUntilStop !== undefined && msUntilStop() <= 0;
      const base = { actor, delivery, run: unit.run_id, unit: unit.unit, tally, pending: undefined };
      facts = { ...base, cut: cut || late, noTime: noTime || late };
      world.unitDeadlines.record(facts);
    },
  });
  const rt = {
    ...judged,
    log: {
      ...judged.log,
      error: (message: string, fields?: Record<string, unknown>) => {
        if (message === 'message failed' && !String(fields?.error).includes(RETRY_DECIDED)) failed = true;
        judged.log.error(message, fields);
      },
    },
  };
  await invokeWithBatch(actor, world.reportQueue, delivery, (event) =>
    exportReportsHandler(rt, event, context),
  );
  if (facts && !failed) facts.pending = pendingOf(world, unit.run_id, unit.unit);
}

/**
 * Pending jobs of a unit's summary as a delivery left it, read directly; undefined when it has
 * none, or its run is not open (as `runIsOpen` says: the delivery dropped the unit, or its run
 * began closing meanwhile).
 */
function pendingOf(world: World, runId: string, unit: string): number | undefined {
  const { s3 } = world;
  const open =
    s3.peek(STATE_KEYS.runRecord(runId)) !== undefined &&
    s3.peek(STATE_KEYS.closing(runId)) === undefined &&
    s3.peek(STATE_KEYS.closed(runId)) === undefined;
  if (!open) return undefined;
  const key = STATE_KEYS.unit(runId, unit);
  const body = world.s3.peek(key);
  if (body === undefined) return undefined;
  const summary = parseRecord(UnitSummarySchema, body, key);
  return summary.fatal ? 0 : pendingJobs(summary);
}

/**
 * A finish-run invocation whose time is up at once lives this long (the scenario spawns it so):
 * `finisherLimits` makes it publish one output and hand on, its lease ending with it.
 */
export const FINISH_TIME_UP_MS = 20_000;

/** functions/aws/finish-run.ts `finishRunHandler`. */
export async function finishHandler(
  world: World,
  actor: Actor,
  limits: { timeoutMs: number; timeUp: boolean },
): Promise<string[]> {
  // A finisher whose time is up at once publishes one output of a closing and hands the rest on
  // (`finisherLimits`), so that a closing is worked on by several invocations.
  const context = lambdaContext(world, limits.timeUp ? FINISH_TIME_UP_MS : limits.timeoutMs);
  const answer = await finishRunHandler(simRuntime(world, actor), {}, context);
  if (answer.handed_on) world.onHandedOn?.(actor);
  return answer.finished;
}

/** The CLI's environment: its API is the simulated one whatever the URL and key say. */
const CLI_ENV = { INTEGRATION_API_BASE_URL: 'https://api.sim', INTEGRATION_API_KEY: 'sim-key' };

/**
 * The CLI: the `export` command's entry (functions/cli/export-command.ts `exportCommand`) with
 * the flags a person would type, into the same bucket: its flag parsing, the write check, the
 * catalog it settles, `runExport` and its exit code. Its dependencies are the actor's (the
 * command's `deps` seam); no signal comes. It renews its lock with a real `setInterval`; the
 * scenario installs a shim (timers.ts) that turns that interval into a virtual one of this
 * actor. Resolves to the command's stdout; a run that failed or could not start throws its
 * stderr, as the process's exit code would say.
 */
export async function cliRun(
  world: World,
  actor: Actor,
  options: { mode: Mode; waitForLockMs: number; tableFormat?: TableFormat | undefined },
  process?: LockProcess,
): Promise<string> {
  const { settings } = world;
  const argv = [
    ...['--out', 's3://sim-bucket', '--quiet'],
    ...['--table-format', options.tableFormat ?? settings.tableFormat],
    ...['--unit-size', String(settings.unitSize), '--concurrency', String(settings.fetchConcurrency)],
    ...(options.mode === 'full' ? ['--full'] : []),
    ...(options.waitForLockMs > 0 ? ['--wait-lock', String(Math.ceil(options.waitForLockMs / 1000))] : []),
  ];
  const out = { stdout: '', stderr: '' };
  const code = await exportCommand(argv, CLI_ENV, {
    stdout: { write: (text: string) => (out.stdout += text) },
    stderr: { write: (text: string) => (out.stderr += text) },
    cwd: '/',
    signals: { on: () => undefined, off: () => undefined, exit: () => undefined },
    // Its own process (pid, machine): the lock records it and judges other holders by it.
    deps: () => ({ ...depsFor(world, actor), ...(process ? { process } : {}) }),
    uniqueId: () => actor.name,
  });
  if (code !== EXIT.ok) throw new ExporterError(`the CLI exited ${code}: ${out.stderr.trim()}`);
  return out.stdout;
}
