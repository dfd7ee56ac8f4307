/**
 * The actors' glue, in one file so that it is easy to follow the core when its signatures
 * change. Each handler mirrors its Lambda in functions/aws/*.ts by calling the same core
 * functions (those modules are not imported: they read process.env and build real clients):
 * start-run (claimScheduledStart + startRunStep + plan messages in chunks, or a continuation
 * message when the campaign listing hands on), plan-campaign (runStep + planCampaignStep + unit
 * messages, or the plan message again when the listing hands on; a continuation: continueStart
 * + plan messages), export-reports (runStep + exportUnit with resume, its requests through the real
 * limiterUntil, and the unit's fate by the handler's own unitDelivery), finish-run
 * (closeRuns with announce + heartbeat); and the CLI (runExport).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { takeFetcher } from '../../shared/api/fetcher-slots.js';
import { ExporterError, OutputLockedError } from '../../shared/errors.js';
import { listingTimeUp } from '../../shared/export/run/campaign-listing.js';
import { closeRuns } from '../../shared/export/run/close-runs.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import {
  exportSendMs,
  exportUnit,
  pendingJobs,
  unitDelivery,
  unitWaits,
} from '../../shared/export/run/export-unit.js';
import { recordUnrecordedRequests } from '../../shared/export/run/finish-run.js';
import { sizeOfRun } from '../../shared/export/run/job-counts.js';
import type { ListingDeadline } from '../../shared/export/run/job-listing.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { planCampaignStep } from '../../shared/export/run/plan-campaign.js';
import { finisherLimits, recoveryLimits } from '../../shared/export/run/publish-closing.js';
import { sendPlans } from '../../shared/export/run/run-plans.js';
import {
  continueStart,
  FIRST_RECORD_GRACE_MS,
  type StartStep,
  startRunStep,
} from '../../shared/export/run/start-run.js';
import { runStep } from '../../shared/export/run/step.js';
import { lookBack } from '../../shared/export/state/heartbeat.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import {
  type Mode,
  type PlanMessage,
  PlanQueueMessageSchema,
  type RunRef,
  type StartListingMessage,
  type TableFormat,
  UnitSchema,
} from '../../shared/export/state/records.js';
import { claimScheduledStart } from '../../shared/export/state/scheduled-start.js';
import type { Log } from '../../shared/log.js';
import { S3Storage } from '../../shared/storage/s3.js';
import type { ApiTally, SimApi } from './api.js';
import type { SimFetcherSlots } from './fetcher-slots.js';
import type { SimS3 } from './s3.js';
import { type Actor, describe, type Sim } from './scheduler.js';
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
   * the CDK context `tableFormat` (CONTRACT.md), which functions/aws/start-run.ts does not pass
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

/** functions/aws/start-run.ts: the lock of a queue-carried run outlives its deadline by this. */
const QUEUE_LOCK_MARGIN_MS = 15 * 60_000;
/** functions/aws/start-run.ts: a full run's estimate asks no more after this. */
const ESTIMATE_TIME_MS = 60_000;
/** start-run's timeout (RUN_START_GRACE_MS), which its handler's deadline is taken from. */
const START_TIMEOUT_MS = 300_000;
/** Start invocations, while faults are on, whose time runs out after every page (as plan-campaign's). */
const START_OUT_OF_TIME = 0.3;
/** functions/aws/queue.ts `visibilityBackoff`. */
const BASE_VISIBILITY_SECONDS = 30;
const MAX_VISIBILITY_SECONDS = 900;

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
  /** Told why a start answered `skipped` (the holder the lock named): liveness.ts, 16. */
  onSkipped?: (actor: Actor, reason: string) => void;
}

function logFor(sim: Sim, actor: Actor): Log {
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
  api: { msUntilStop?: () => number; tally?: ApiTally } = {},
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
    log: logFor(world.sim, actor),
    now: () => new Date(world.sim.now + actor.offsetMs),
    random: actor.rng.fn,
    sleep: (ms) => world.sim.sleep(actor, ms),
  };
}

export type StartResult = 'duplicate' | 'skipped' | 'failed' | 'started';

/** functions/aws/start-run.ts `startRunHandler`. */
export async function startRunHandler(
  world: World,
  actor: Actor,
  input: { mode: Mode; scheduledTime?: string; tableFormat?: TableFormat },
): Promise<StartResult> {
  const deps = depsFor(world, actor);
  const invokedAt = world.sim.now;
  let release = async () => {};
  if (input.scheduledTime !== undefined) {
    const claim = await claimScheduledStart(deps.storage, {
      mode: input.mode,
      scheduledTime: input.scheduledTime,
      now: deps.now(),
    });
    if (!claim.claimed) return 'duplicate';
    release = claim.release;
  }
  const giveBack = () => release().catch(() => undefined);
  // A fault: an API so slow that the invocation's time runs out after each page: the campaign
  // listing and the plan messages are handed on, through every interleaving of the seed.
  const deadline = outOfTimeDeadline(world, actor, START_TIMEOUT_MS, START_OUT_OF_TIME);
  const send = (messages: PlanMessage[]) => world.planQueue.sendAll(actor, messages);
  const recovery = recoveryLimits(deps.now().getTime(), invokedAt + START_TIMEOUT_MS - world.sim.now);
  const handsOn = world.sim.faultsOn && actor.rng.chance(world.settings.startHandsOn ?? 0);
  let started: StartStep;
  try {
    started = await startRunStep(deps, {
      mode: input.mode,
      tableFormat: input.tableFormat ?? world.settings.tableFormat,
      driver: 'queues',
      lock: {
        ttlMs: world.settings.deadlineMs + QUEUE_LOCK_MARGIN_MS,
        owner: 'aws-lambda',
        recordGraceMs: FIRST_RECORD_GRACE_MS,
      },
      announce: world.announcer.for(actor),
      // As the handler: a run left open is closed as far as start-run's time allows (its lease
      // held for the invocation's remaining time), the rest handed on to finish-run.
      recovery: handsOn ? { ...recovery, handOnAt: deps.now().getTime() } : recovery,
      listing: { deadline, send },
    });
  } catch (error) {
    await giveBack();
    if (!(error instanceof OutputLockedError)) throw error;
    world.sim.log(actor, `skipped: ${describe(error)}`);
    world.onSkipped?.(actor, error.message);
    return 'skipped';
  }
  const continuation: StartListingMessage = { ...started.run, list: 'campaigns' };
  const lock = started.lock;
  const handBack = async (error: unknown): Promise<never> => {
    await lock?.release();
    await giveBack();
    throw error;
  };
  if (started.kind === 'handed-on') {
    await world.planQueue.sendAll(actor, [continuation]).catch(handBack);
    return 'started';
  }
  if (started.record.fatal) return 'failed';
  if (input.mode === 'full') {
    // Its `estimateFullRun`: counts the campaigns' jobs, keeps the requests for the manifest.
    await sizeOfRun(deps, started.record, {
      stopAt: deps.now().getTime() + ESTIMATE_TIME_MS,
      keep: (requests) => recordUnrecordedRequests(deps, started.run.run_id, requests),
    });
  }
  const { run, record } = started;
  const sent = await sendPlans(deps, run, record.campaign_ids, send, {
    timeUp: () => listingTimeUp(deadline),
  }).catch(handBack);
  if (!sent) await world.planQueue.sendAll(actor, [continuation]).catch(handBack);
  return 'started';
}

/**
 * An invocation's deadline `timeoutMs` after it starts, on the simulation's clock (Lambda's
 * remaining time is not skewed); with the fault's chance, one whose time runs out after each page.
 */
function outOfTimeDeadline(world: World, actor: Actor, timeoutMs: number, chance: number): ListingDeadline {
  const startedAt = world.sim.now;
  const slowApi = world.sim.faultsOn && actor.rng.chance(chance);
  return { remainingMs: () => (slowApi ? 0 : startedAt + timeoutMs - world.sim.now), timeoutMs };
}

/** functions/aws/queue.ts `visibilityBackoff`, with the actor's randomness. */
function visibilityBackoff(actor: Actor, receiveCount: number): number {
  const exp = Math.min(MAX_VISIBILITY_SECONDS, BASE_VISIBILITY_SECONDS * 2 ** Math.max(0, receiveCount - 1));
  return Math.round(exp / 2 + actor.rng.next() * (exp / 2));
}

/** functions/aws/queue.ts `eachMessage` for one record: delete on success, hand back a retryable failure. */
async function eachMessage(
  world: World,
  actor: Actor,
  queue: SimQueue,
  delivery: Delivery,
  work: () => Promise<void>,
): Promise<void> {
  try {
    await work();
  } catch (error) {
    world.sim.log(actor, `message failed: ${describe(error)}`);
    if (error instanceof ExporterError && error.retryable) {
      await queue
        .retryLater(actor, delivery.message, visibilityBackoff(actor, delivery.receiveCount))
        .catch(() => undefined);
    }
    return; // a batch item failure: the message stays
  }
  await queue.delete(actor, delivery.message);
}

/** Plan invocations, while faults are on, whose time runs out after every page. */
const PLAN_OUT_OF_TIME = 0.3;

/**
 * functions/aws/plan-campaign.ts `planCampaignHandler`, one record: its deadline `timeoutMs`
 * after the invocation starts, on the simulation's clock (Lambda's remaining time is not skewed).
 */
export async function planHandler(
  world: World,
  actor: Actor,
  delivery: Delivery,
  timeoutMs: number,
): Promise<void> {
  const deps = depsFor(world, actor);
  // A fault: an API so slow that the invocation's time runs out after each page. The listing
  // is then checkpointed and handed on page by page, through every interleaving of the seed.
  const deadline = outOfTimeDeadline(world, actor, timeoutMs, PLAN_OUT_OF_TIME);
  await eachMessage(world, actor, world.planQueue, delivery, async () => {
    const body = PlanQueueMessageSchema.parse(delivery.message.body);
    if (!('campaign_id' in body)) return continueRunStart(world, actor, deps, body, deadline);
    const message = body;
    const planned = await runStep(deps, message.run_id, (d) =>
      planCampaignStep(d, message, { unitSize: world.settings.unitSize, deadline }),
    );
    if (!planned.ran) return;
    if (planned.value.kind === 'handed-on') {
      // The listing goes on in a new message (the handler's choice, see there).
      await world.planQueue.sendAll(actor, [message]);
      return;
    }
    await world.reportQueue.sendAll(actor, planned.value.units);
  });
}

/** functions/aws/plan-campaign.ts `continueRunStart`: a run's start handed on. */
async function continueRunStart(
  world: World,
  actor: Actor,
  deps: ExportDeps,
  message: StartListingMessage,
  deadline: ListingDeadline,
): Promise<void> {
  const send = (messages: PlanMessage[]) => world.planQueue.sendAll(actor, messages);
  const { list: _list, ...run } = message;
  const ref: RunRef = run;
  const step = await runStep(deps, ref.run_id, (d) => continueStart(d, ref, { deadline, send }));
  if (!step.ran || step.value.kind === 'gone') return;
  const started = step.value;
  if (started.kind === 'recorded') {
    if (started.record.fatal) return;
    const timeUp = () => listingTimeUp(deadline);
    if (await sendPlans(deps, ref, started.record.campaign_ids, send, { timeUp })) return;
  }
  await world.planQueue.sendAll(actor, [message]);
}

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
 * functions/aws/export-reports.ts `exportReportsHandler`, one record: its requests through the
 * real `limiterUntil`, none sent past `exportSendMs` of its timeout on the simulation's clock,
 * and what becomes of the unit by the handler's own rule (`unitDelivery`).
 */
export async function unitHandler(
  world: World,
  actor: Actor,
  delivery: Delivery,
  timeoutMs: number,
): Promise<void> {
  const startedAt = world.sim.now;
  // A fault: an invocation whose time for requests ends early, at a random point (seeded by the
  // actor's randomness, so that a seed replays): a unit cut short after some reports, before
  // any, or reached with no time at all.
  const cut = world.sim.faultsOn && actor.rng.chance(UNIT_OUT_OF_TIME);
  const noTime = cut && actor.rng.chance(UNIT_NO_TIME);
  const sendMs = !cut ? exportSendMs(timeoutMs) : noTime ? 0 : actor.rng.int(1, UNIT_TIME_WITHIN_MS);
  const hold = await takeSlot(world, actor);
  if (hold?.kind === 'busy') {
    // Nothing fetched: the unit waits in a new message (functions/aws/export-reports.ts).
    world.fetcherSlots.cases.waited++;
    await eachMessage(world, actor, world.reportQueue, delivery, async () => {
      const unit = UnitSchema.parse(delivery.message.body);
      const next = unitWaits({ random: actor.rng.fn });
      world.sim.log(actor, `unit ${unit.unit} waits ${next.delaySeconds}s for a fetcher slot`);
      await world.reportQueue.sendAll(actor, [unit], next.delaySeconds);
    });
    return;
  }
  if (hold?.kind === 'open') world.fetcherSlots.cases.open++;
  // A slot lost to another holder ends the time for requests, as in the handler.
  const msUntilStop = () => (hold?.lost() ? 0 : startedAt + sendMs - world.sim.now);
  const tally: ApiTally = { decided: 0, notSent: 0 };
  const deps = depsFor(world, actor, { msUntilStop, tally });
  try {
    await exportOne(world, actor, delivery, { msUntilStop, tally, deps, cut, noTime });
  } finally {
    if (hold?.kind === 'held' && hold.lost()) world.fetcherSlots.cases.lost++;
    await hold?.release();
  }
}

/** functions/aws/fetcher-slots.ts `takeFetcherSlot`: the real `takeFetcher` on the simulated table. */
function takeSlot(world: World, actor: Actor) {
  const slots = world.settings.fetchers;
  if (slots === undefined) return undefined;
  return takeFetcher(world.fetcherSlots.for(actor), {
    slots,
    holder: actor.name,
    random: actor.rng.fn,
    clock: {
      wallNow: () => world.sim.now + actor.offsetMs,
      // An aborted sleep ends at once (the renewal stops when its holder releases).
      sleep: (ms, signal) =>
        Promise.race([
          world.sim.sleep(actor, ms, 'fetcher renewal'),
          new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true })),
        ]),
    },
  });
}

/** One unit delivery by an invocation that may fetch. */
async function exportOne(
  world: World,
  actor: Actor,
  delivery: Delivery,
  at: {
    msUntilStop: () => number;
    tally: ApiTally;
    deps: ExportDeps;
    cut: boolean;
    noTime: boolean;
  },
): Promise<void> {
  const { msUntilStop, tally, deps, cut, noTime } = at;
  await eachMessage(world, actor, world.reportQueue, delivery, async () => {
    const unit = UnitSchema.parse(delivery.message.body);
    // No time also when taking the fetcher slot outlasted the time for requests (a stalled
    // table), or the slot was lost before the unit began.
    const late = msUntilStop() <= 0;
    const facts: UnitDeliveryFacts = {
      ...{
        actor,
        delivery,
        run: unit.run_id,
        unit: unit.unit,
        cut: cut || late,
        noTime: noTime || late,
        tally,
      },
      pending: undefined,
    };
    world.unitDeadlines.record(facts);
    const next = unitDelivery(msUntilStop, {
      receiveCount: delivery.receiveCount,
      maxReceiveCount: world.settings.maxReceiveCount,
    });
    const options = { resume: true, concurrency: world.settings.fetchConcurrency, onReport: next.onReport };
    const exported = await runStep(deps, unit.run_id, (d) => exportUnit(d, unit, options));
    if (!exported.ran) return;
    facts.pending = exported.value.fatal ? 0 : pendingJobs(exported.value);
    const decided = next.next(exported.value);
    if (decided.kind === 'hand-on') {
      world.sim.log(actor, `unit ${unit.unit} handed on before the deadline (${decided.pending} pending)`);
      await world.reportQueue.sendAll(actor, [unit]);
      return;
    }
    if (decided.kind === 'retry') {
      throw new ExporterError(`unit ${unit.unit}: ${decided.pending} report(s) pending, retried later`, {
        retryable: true,
      });
    }
  });
}

/** functions/aws/finish-run.ts `finishRunHandler`. */
export async function finishHandler(
  world: World,
  actor: Actor,
  limits: { timeoutMs: number; handOnShare: number | undefined; lease: boolean },
): Promise<string[]> {
  const deps = depsFor(world, actor);
  const now = deps.now();
  const { closed, failures } = await closeRuns(deps, {
    now: now.getTime(),
    ...finisherLimits(now.getTime(), limits.timeoutMs, limits.handOnShare),
    // Seeds without the lease model finishers that take none (scenario.ts `finishLease`).
    ...(!limits.lease && { leaseMs: undefined }),
    deadlineMs: world.settings.deadlineMs,
    queuesDrained: () =>
      world.sim.call(
        actor,
        world.sim.rng.int(10, 60),
        'GetQueueAttributes',
        () => world.planQueue.inQueue() + world.reportQueue.inQueue() === 0,
      ),
    announce: world.announcer.for(actor),
  });
  await lookBack(
    deps.storage,
    now,
    closed.map((c) => c.manifest),
  );
  if (failures.length > 0) {
    throw new ExporterError(
      `${failures.length} run(s) could not be finished: ${describe(failures[0]?.error)}`,
    );
  }
  return closed.map((c) => c.manifest.run_id);
}

/**
 * The CLI: `runExport` into the same bucket. It renews its lock with a real `setInterval`; the
 * scenario installs a shim (timers.ts) that turns that interval into a virtual one of this actor.
 */
export async function cliRun(
  world: World,
  actor: Actor,
  options: { mode: Mode; waitForLockMs: number; tableFormat?: TableFormat | undefined },
): Promise<Manifest> {
  const deps = depsFor(world, actor);
  return runExport(deps, {
    mode: options.mode,
    tableFormat: options.tableFormat ?? world.settings.tableFormat,
    unitSize: world.settings.unitSize,
    fetchConcurrency: world.settings.fetchConcurrency,
    ...(options.waitForLockMs > 0 ? { waitForLockMs: options.waitForLockMs } : {}),
  });
}
