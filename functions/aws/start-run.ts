/**
 * start-run (EventBridge Scheduler, or by hand): a new run — verify, list campaigns, one plan
 * message per campaign. Input: shared/aws/payloads.ts `StartRunEventSchema`. A schedule's
 * invocation carries its `scheduled_time`, and each scheduled time starts at most one run. A
 * backfill `date` before the partition projection's start (PROJECTION_START_DATE) is refused.
 * A campaign listing (or a sending of plan messages) too long for half the timeout is
 * checkpointed and handed on to a continuation message on the plan queue (plan-campaign goes on
 * with it); the run holds the output meanwhile.
 */

import type { Context } from 'aws-lambda';
import {
  backfillBeforeProjection,
  type FullRunEstimate,
  StartRunEventSchema,
} from '../../shared/aws/payloads.js';
import { describeError, OutputLockedError } from '../../shared/errors.js';
import { listingTimeUp } from '../../shared/export/run/campaign-listing.js';
import type { ExportDeps } from '../../shared/export/run/context.js';
import type { SizeEstimate } from '../../shared/export/run/estimate.js';
import { estimateTime } from '../../shared/export/run/estimate.js';
import { recordUnrecordedRequests } from '../../shared/export/run/finish-run.js';
import { sizeBeforeStart, sizeOfRun } from '../../shared/export/run/job-counts.js';
import { recoveryLimits } from '../../shared/export/run/publish-closing.js';
import { sendPlans } from '../../shared/export/run/run-plans.js';
import {
  FIRST_RECORD_GRACE_MS,
  RUN_START_GRACE_MS,
  type StartStep,
  startRunStep,
} from '../../shared/export/run/start-run.js';
import { REQUEST_WORST_MS, stopStartingAfter } from '../../shared/export/run/time-budget.js';
import { lockedError, lockHolder } from '../../shared/export/state/lock.js';
import type { RunRecord, StartListingMessage } from '../../shared/export/state/records.js';
import { claimScheduledStart } from '../../shared/export/state/scheduled-start.js';
import { required } from './env.js';
import { sendAll } from './queue.js';
import { deploymentRate } from './request-budget.js';
import { countFatal, type HandlerRuntime, lambdaHandler, lambdaRuntime } from './runtime.js';

/** The lock of a queue-carried run outlives its deadline by this much (finish-run looks every 5 minutes). */
export const QUEUE_LOCK_MARGIN_MINUTES = 15;
/**
 * What start-run does after its estimate: sends a chunk of plan messages (1,000 campaigns, ten a
 * request, a few seconds: `run-plans.ts`) and hands the rest on.
 */
const START_WRAP_UP_MS = 10_000;
/** The lock's owner for runs the Lambdas carry (a CLI writes `pid@host`). */
const LOCK_OWNER = 'aws-lambda';

/** What start-run answers (its invocation's result: `aws start` reads it). */
export type StartRunAnswer = Awaited<ReturnType<typeof startRunHandler>>;

export async function startRunHandler(
  rt: HandlerRuntime,
  event: unknown,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
) {
  const { env, log: logger } = rt;
  const startedAt = rt.nowMs();
  // The invocation's whole time (start-run's timeout is RUN_START_GRACE_MS): a full run's
  // estimate starts no request past the point that keeps the invocation within half of it.
  const timeoutMs = context?.getRemainingTimeInMillis() ?? RUN_START_GRACE_MS;
  const estimateStopAt = startedAt + stopStartingAfter(timeoutMs, REQUEST_WORST_MS + START_WRAP_UP_MS);
  // The listing and the plan messages stop starting pages and chunks in time to end within half
  // of it too (campaign-listing.ts `startListingStopMs`), and hand on.
  const deadline = context && { remainingMs: () => context.getRemainingTimeInMillis(), timeoutMs };
  const input = StartRunEventSchema.parse(event ?? {});
  const refused = backfillBeforeProjection(input.date, env.PROJECTION_START_DATE);
  if (refused !== undefined) {
    // Before any lock, claim or API request: nothing to release.
    logger.error('run not started: the backfill date is outside the partition projection', {
      reason: refused,
    });
    return { status: 'refused', reason: refused };
  }
  if (input.estimate === 'only') return estimateOnly(rt, await rt.apiDeps(), estimateStopAt);
  const deps = await rt.withCatalog(await rt.apiDeps());
  // A start that starts no run gives its scheduled time back: a later delivery may start one.
  let release = async () => {};
  if (input.scheduled_time !== undefined) {
    const scheduled = {
      mode: input.mode,
      scheduledTime: input.scheduled_time,
      now: deps.now(),
      token: rt.token(),
    };
    const claim = await claimScheduledStart(deps.storage, scheduled);
    if (!claim.claimed) {
      // Scheduler delivers at least once: this time has had its start.
      logger.info('scheduled start delivered again: no run started', {
        mode: input.mode,
        scheduled_time: input.scheduled_time,
        claimed_at: claim.claimedAt,
      });
      return { status: 'duplicate', scheduled_time: input.scheduled_time, claimed_at: claim.claimedAt };
    }
    release = claim.release;
  }
  const giveBack = () =>
    release().catch((error: unknown) =>
      logger.warn('could not release the scheduled start', { error: describeError(error) }),
    );
  const planQueueUrl = required(env, 'PLAN_QUEUE_URL');
  const send = async (messages: readonly unknown[]) => {
    await sendAll(rt.sqs, planQueueUrl, messages);
  };
  let started: StartStep;
  try {
    started = await startRunStep(deps, {
      mode: input.mode,
      dt: input.date,
      tableFormat: env.TABLE_FORMAT,
      schemaContract: env.SCHEMA_CONTRACT,
      driver: 'queues',
      // Held until finish-run closes the run; it closes overdue runs at the deadline, so the lock
      // outlives the run by the finisher's interval at most.
      lock: {
        ttlMs: (env.RUN_DEADLINE_MINUTES + QUEUE_LOCK_MARGIN_MINUTES) * 60_000,
        owner: LOCK_OWNER,
        // A start that died between the lock and its first record frees the output after this.
        recordGraceMs: FIRST_RECORD_GRACE_MS,
      },
      announce: rt.announce,
      // A run left open is closed only as far as start-run's time allows (small outputs, for
      // RECOVERY_STOP_MS); finish-run's next look publishes the rest.
      ...(context && {
        recovery: recoveryLimits(
          deps.now().getTime(),
          context.getRemainingTimeInMillis(),
          rt.recoveryOutputBytes,
        ),
      }),
      listing: { deadline, send },
    });
  } catch (error) {
    await giveBack();
    if (!(error instanceof OutputLockedError)) throw error;
    // Another run (a CLI run into the same bucket, or a run still open) holds the output: this
    // schedule starts nothing; NoFinishedRun alarms if that goes on.
    logger.warn('run not started: the output is locked by another run', { reason: describeError(error) });
    return { status: 'skipped', reason: describeError(error) };
  }
  const { run_id: runId } = started.run;
  rt.logKeys({ run_id: runId });
  const continuation: StartListingMessage = { ...started.run, list: 'campaigns' };
  /** A failed send: the schedule retries the invocation, which must find neither the output locked nor the time claimed. */
  const handBack = async (error: unknown): Promise<never> => {
    await started.lock?.release();
    await giveBack();
    throw error;
  };
  if (started.kind === 'handed-on') {
    // The rest of the listing goes on in plan-campaign; the run holds the output meanwhile (the
    // schedule's next start finds it locked), and stays `starting` (finish-run waits for it).
    await send([continuation]).catch(handBack);
    logger.info('run started; its campaign listing goes on', {
      next_page: started.nextPage,
      mode: input.mode,
    });
    return { run_id: runId, status: 'listing', next_page: started.nextPage };
  }
  if (started.record.fatal) {
    countFatal(rt, started.record.fatal);
    // finish-run closes it on its next look (a fatal run is complete): one finisher, one
    // manifest, one ExportRunFinished event.
    logger.error('run failed at start', { ...started.record.fatal });
    return { run_id: runId, status: 'failed', error: started.record.fatal.message };
  }
  // A full run says how long it takes, before its campaigns are planned (logged; `aws start`
  // asked for it before the start, and skips it here).
  const estimate =
    input.mode === 'full' && input.estimate !== 'skip'
      ? await estimateFullRun(rt, deps, started.record, estimateStopAt)
      : undefined;
  const campaigns = started.record.campaign_ids.length;
  // Those of stored pieces went as the listing went (`campaign-listing.ts`); the rest a chunk at
  // a time, and what the time leaves goes on in plan-campaign. A failed send: the next start
  // closes this run instead (campaigns whose plan was never sent end it unlisted).
  const sent = await sendPlans(deps, started.run, started.record.campaign_ids, send, {
    timeUp: () => listingTimeUp(deadline),
  }).catch(handBack);
  if (!sent) await send([continuation]).catch(handBack);
  logger.info('run started', { campaigns, mode: input.mode, ...(!sent && { plans_handed_on: true }) });
  return { run_id: runId, status: 'started', campaigns, ...(estimate && { estimate }) };
}

/**
 * A full run's size (its campaigns' job totals, requests recorded for the manifest) at the
 * stack's rate and deadline; logged, and answered for `aws start`. None when it could not count.
 */
async function estimateFullRun(
  rt: HandlerRuntime,
  deps: ExportDeps,
  record: RunRecord,
  stopAt: number,
): Promise<FullRunEstimate | undefined> {
  const size = await sizeOfRun(deps, record, {
    stopAt,
    keep: (requests) => recordUnrecordedRequests(deps, record.run_id, requests),
  });
  if (!size) return undefined;
  return logEstimate(rt, size);
}

/** The stack's pace for a run of `size`, logged as `full run estimated`. */
function logEstimate({ env, log: logger }: HandlerRuntime, size: SizeEstimate): FullRunEstimate {
  const estimate: FullRunEstimate = {
    size,
    rate: deploymentRate(env),
    rate_ceiling: env.RATE_CEILING,
    deadline_minutes: env.RUN_DEADLINE_MINUTES,
  };
  const time = estimateTime(size, { rate: estimate.rate, deadlineMinutes: estimate.deadline_minutes });
  logger.info('full run estimated', {
    ...estimate,
    hours: Number((time.seconds / 3600).toFixed(1)),
    share_by_deadline: Number(time.shareByDeadline.toFixed(2)),
    runs: Number.isFinite(time.runs) ? time.runs : null,
  });
  return estimate;
}

/**
 * `{"estimate": "only"}`: a full run's size and the stack's pace, and no run started (no lock,
 * nothing written): `aws start --full` says it before it starts the run. An output another run
 * holds is answered `skipped` before any request, as the start would be. A key or an API that
 * fails is answered as `error`: the start that follows meets it and says it.
 */
async function estimateOnly(rt: HandlerRuntime, deps: ExportDeps, stopAt: number) {
  const held = await lockHolder(deps.storage, deps.now(), FIRST_RECORD_GRACE_MS);
  if (held) return { status: 'skipped', reason: describeError(lockedError(deps.storage, held)) };
  try {
    const size = await sizeBeforeStart(deps, { stopAt });
    return { status: 'estimated', estimate: logEstimate(rt, size) };
  } catch (error) {
    rt.log.warn('could not estimate the full run', { error: describeError(error) });
    return { status: 'estimated', error: describeError(error) };
  }
}

export const handler = lambdaHandler((event: unknown, context: Context) =>
  startRunHandler(lambdaRuntime(), event, context),
);
