/**
 * The simulation's `HandlerRuntime` (functions/aws/runtime.ts): what a Lambda container gives
 * the real handlers, made of the simulation's parts. Storage is the real S3Storage over SimS3
 * (`depsFor`), SQS the simulated queues behind the SQSClient surface (`SimSqs`), EventBridge the
 * `Announcer`, the fetcher slots the real `takeFetcher` over the simulated table; the clock is
 * the virtual one (skewed by the actor's offset), identities and jitter come from the actor's
 * randomness. The Lambda context is `lambdaContext`: the invocation's remaining time on the
 * virtual clock, or a fault's.
 *
 * The request budget over the simulated DynamoDB reaches export-reports' API client as its
 * limiter (`budgeted`, `containerServices`); in the Glue seeds `depsFor` gives every actor the
 * real GlueCatalog over the simulated Glue (else the file catalog on the bucket).
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { readEnv } from '../../functions/aws/env.js';
import type { HandlerRuntime } from '../../functions/aws/runtime.js';
import { takeFetcher } from '../../shared/api/fetcher-slots.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { TableFormat } from '../../shared/layout.js';
import type { World } from './actors.js';
import { containerServices, depsFor, logFor } from './actors.js';
import type { ApiTally } from './api.js';
import type { Actor } from './scheduler.js';
import { SimSqs } from './sqs.js';

export interface SimRuntimeOptions {
  /** The stack's table format for this invocation (a redeployed stack's, for a format switch). */
  tableFormat?: TableFormat | undefined;
  /** Counts the API's answers to this invocation's requests (SimApi.client). */
  tally?: ApiTally;
  /** Called when the handler asks for its API dependencies, with its time for requests. */
  onApiDeps?: (msUntilStop: (() => number) | undefined) => void;
  /**
   * Its API requests go through the container's limiter on the request budget over the
   * simulated DynamoDB (export-reports' containers, in the seeds with a budget: budget.ts).
   */
  budgeted?: boolean;
  /** start-run's recovery meets closings larger than it takes on (`recoveryOutputBytes` 0). */

  recoveryHandsOn?: boolean;
}

/** The handlers' runtime for `actor`, an invocation of one of the simulated Lambdas. */
export function simRuntime(world: World, actor: Actor, options: SimRuntimeOptions = {}): HandlerRuntime {
  const { settings } = world;
  const sqs = new SimSqs(world.sim, [world.planQueue, world.reportQueue]);
  const env = {
    ...readEnv({ DATA_BUCKET: 'sim-bucket' }),
    PLAN_QUEUE_URL: SimSqs.urlOf(world.planQueue),
    REPORT_QUEUE_URL: SimSqs.urlOf(world.reportQueue),
    // The seed's small settings, below the stack's bounds (a deadline of minutes, units of a few reports).
    UNIT_SIZE: settings.unitSize,
    REPORT_CONCURRENCY: settings.fetchConcurrency,
    RUN_DEADLINE_MINUTES: settings.deadlineMs / 60_000,
    MAX_RECEIVE_COUNT: settings.maxReceiveCount,
    TABLE_FORMAT: options.tableFormat ?? settings.tableFormat,
    REPORT_FETCHERS: settings.fetchers,
    ...(settings.fetchers !== undefined && { REQUEST_BUDGET_TABLE: 'sim-budget' }),
  };
  const hex = () => actor.rng.int(0, 0xffff_ffff).toString(16).padStart(8, '0');
  return {
    env,
    log: logFor(world.sim, actor),
    logKeys: () => {},
    apiDeps: async (o = {}) => {
      options.onApiDeps?.(o.msUntilStop);
      return depsFor(world, actor, {
        ...(o.msUntilStop && { msUntilStop: o.msUntilStop }),
        ...(options.tally && { tally: options.tally }),
        ...(options.budgeted && containerServices(world, actor)),
      });
    },
    exportDeps: () => depsFor(world, actor),
    // `depsFor` set the seed's catalog: Glue's in the Glue seeds, else the file catalog on the bucket.
    withCatalog: async (deps: ExportDeps) => deps,
    sqs: sqs.clientFor(actor) as SQSClient,
    announce: world.announcer.for(actor),
    addMetric: () => {},
    takeFetcherSlot: (holder) => takeSlot(world, actor, holder),
    // Actor names are unique within a seed: a holder that is nobody else's.
    uuid: () => actor.name,
    token: () => hex() + hex(),
    nowMs: () => world.sim.now + actor.offsetMs,
    random: actor.rng.fn,
    ...(options.recoveryHandsOn && { recoveryOutputBytes: 0 }),
  };
}

/**
 * functions/aws/fetcher-slots.ts `takeFetcherSlot`: the real `takeFetcher` on the simulated
 * table, counting the cases the seed reached (a wait, a table failed open, a slot lost).
 */
async function takeSlot(world: World, actor: Actor, holder: string) {
  const slots = world.settings.fetchers;
  if (slots === undefined) return undefined;
  const hold = await takeFetcher(world.fetcherSlots.for(actor), {
    slots,
    holder,
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
  const { cases } = world.fetcherSlots;
  const left = world.fetcherSlots.lapsedLeft(actor);
  if (hold.kind === 'busy') {
    cases.waited++;
    if (left) world.fetcherSlots.onViolation?.(left);
    return hold;
  }
  if (hold.kind === 'open') cases.open++;
  return {
    ...hold,
    release: async () => {
      if (hold.kind === 'held' && hold.lost()) cases.lost++;
      await hold.release();
    },
  };
}

/**
 * A Lambda context for an invocation of `timeoutMs` started now: its remaining time on the
 * virtual clock (Lambda's is not skewed). `after` replaces the remaining time from the second
 * call on (the handlers take their whole time with the first): a fault's, given the ms elapsed.
 */
export function lambdaContext(
  world: World,
  timeoutMs: number,
  after?: (elapsedMs: number) => number,
): Pick<Context, 'getRemainingTimeInMillis'> {
  const startedAt = world.sim.now;
  let calls = 0;
  return {
    getRemainingTimeInMillis: () => {
      const elapsed = world.sim.now - startedAt;
      return calls++ > 0 && after ? after(elapsed) : timeoutMs - elapsed;
    },
  };
}
