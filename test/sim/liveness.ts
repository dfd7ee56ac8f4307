/**
 * Progress (liveness) invariants, checked after quiescence, and the counted excuses of the
 * safety invariants (issue 32). Each bound below is derived from the deployment's times.
 *
 * 16. Every scheduled time starts exactly one run, or a stated reason says why not. A time's
 *     runs are the runs whose first record an invocation of that time wrote; two are a
 *     violation, but for a run whose start invocation threw after its first record (the
 *     handler hands the output and the time back, and the retry's recovery closes the run),
 *     when Lambda's retry started another (counted). With none, some invocation must have answered with a reason that holds:
 *     - `duplicate`: the time's claim was made by ANOTHER invocation (one that met its own
 *       claim, a write whose answer was lost and whose retry met a 412, has no reason);
 *     - `skipped`: the holder it named, another invocation's, held the output by the lock's
 *       rules when the start last read the lock: not closed (its tombstone not yet written), and recorded, or still at
 *       work, or within `FIRST_RECORD_GRACE_MS` + `MAX_CLOCK_SKEW_MS` of taking the lock by its
 *       clock (a holder that died before its record);
 *     - the invocation crashed or threw (a fault, or the table-format check's refusal), counted.
 * 17. Every started run closes (its tombstone) within `CLOSE_BOUND_MS` of the later of its
 *     deadline and the end of the faults (see there).
 * 18. The lock is free, as the code sees it (`lockHolder` of shared/export/state/lock.ts,
 *     evaluated over the bucket as it was at that moment), once its holder's run is over: at
 *     its tombstone when its closer released it or is gone, and for a run that never wrote its
 *     record, `FIRST_RECORD_GRACE_MS` + `MAX_CLOCK_SKEW_MS` after the take by the holder's
 *     clock. The final start, right after quiescence (and after that bound for a last holder
 *     that never recorded its run), must get the lock: if not, the violation names the holder
 *     and why it still held it (monitor.ts, scenario.ts).
 * 19. A live holder keeps its lock: a holding whose expiry passes while its holder still works
 *     for the run (not released, not taken over, the run not closed) is a violation, unless a
 *     renewal of it met a fault (a lock write answered 503, 409, lost, in flight at the expiry,
 *     or applied more than a third of the lock's life after it was sent), counted. The CLI renews every 20 s for a 60 s lock (local-run.ts).
 * 20. Debris is removed: after the final start's recovery, no run closed before it keeps
 *     anything in `state/runs/<run>/` beside its tombstone and closing marker (recover.ts
 *     `sweepClosedRun`).
 */
import { FIRST_RECORD_GRACE_MS } from '../../shared/export/run/start-run.js';
import { ANNOUNCE_LEASE_MS } from '../../shared/export/state/announcement.js';
import { lockHolder, MAX_CLOCK_SKEW_MS } from '../../shared/export/state/lock.js';
import { STATE_KEYS } from '../../shared/layout.js';
import type { Storage } from '../../shared/storage/storage.js';
import type { Monitor } from './monitor.js';
import type { SimS3 } from './s3.js';
import type { Actor } from './scheduler.js';

/** finish-run's schedule and timeout (infra/constructs/functions.ts), as scenario.ts runs them. */
const FINISH_EVERY_MS = 5 * 60_000;
const FINISH_TIMEOUT_MS = 15 * 60_000;
/**
 * A run closes at most this long after the later of its deadline and the end of the faults:
 * finish-run's next look (5 min); a look that died holding the closing lease (its 15 min);
 * an announcer that died after EventBridge accepted the event (the claim's lease, 15 min, and
 * the clock allowance); and the look that closes it (its 15 min).
 */
export const CLOSE_BOUND_MS =
  FINISH_EVERY_MS + FINISH_TIMEOUT_MS + ANNOUNCE_LEASE_MS + MAX_CLOCK_SKEW_MS + FINISH_TIMEOUT_MS;

/**
 * Counted excuses: each names the fault that earns it and is limited to that fault's effect.
 * The seed's result carries them; `npm run sim -- --seeds N` prints each.
 */
export interface Excuses {
  /**
   * 4b: a write after its run's tombstone, by an actor of the run that was already under way
   * before it (a duplicate delivery, a stalled step, the closer tidying), inside the run's own
   * `state/runs/<run>/` folder only.
   */
  writeAfterTombstone: number;
  /** 4b: a finisher completing a frozen closing record (finish-run holds no lock: the record's work). */
  frozenClosing: number;
  /**
   * 5: an announcement made again because the earlier announcer, after EventBridge accepted its
   * event, crashed or met a fault on both of its records (the claim's done mark and the
   * tombstone): the one window of shared/export/state/announcement.ts.
   */
  repeatedAnnouncement: number;
  /**
   * 16: a second run for a scheduled time, after the first one's start threw after its first
   * record (a storage fault: the handler hands the output and the time back) and Lambda's retry
   * started another, whose recovery closed the first.
   */
  failedStartRetried: number;
  /** 16: a scheduled time that started no run because each invocation that could have crashed or threw. */
  startLostToFault: number;
  /** 16: scheduled times without a run because a live run held the output (start-run answered skipped). */
  startSkippedForHolder: number;
  /** 19: a live holder's lock that lapsed while a renewal of it met a fault. */
  renewalFaulted: number;
}

export const noExcuses = (): Excuses => ({
  writeAfterTombstone: 0,
  frozenClosing: 0,
  repeatedAnnouncement: 0,
  failedStartRetried: 0,
  startLostToFault: 0,
  startSkippedForHolder: 0,
  renewalFaulted: 0,
});

/**
 * The lock's holder as the code sees it at this instant: `lockHolder` over a snapshot of the
 * keys it reads (the lock, the holder's tombstone and run record), on a clock that reads `now`.
 */
export function codeSeesHolder(s3: SimS3, now: number, graceMs: number) {
  const lock = s3.objects.get(STATE_KEYS.lock);
  const snapshot = new Map<string, { body: Uint8Array; etag: string }>();
  if (lock) {
    snapshot.set(STATE_KEYS.lock, { body: lock.body, etag: lock.etag });
    const run = (JSON.parse(Buffer.from(lock.body).toString('utf8')) as { run_id: string }).run_id;
    for (const key of [STATE_KEYS.closed(run), STATE_KEYS.runRecord(run)]) {
      const found = s3.objects.get(key);
      if (found) snapshot.set(key, { body: found.body, etag: found.etag });
    }
  }
  const reader = {
    location: 's3://sim-bucket (snapshot)',
    get: (key: string) => Promise.resolve(snapshot.get(key)),
  } as unknown as Storage;
  return lockHolder(reader, new Date(now), graceMs);
}

/** One invocation of start-run for a scheduled time, and what it answered. */
export interface ScheduledAnswer {
  actor: Actor;
  answer: 'duplicate' | 'skipped' | 'failed' | 'started' | 'crashed' | 'error';
  t: number;
  /** `skipped`: the holder it named; `error`: the error. */
  detail?: string;
}

/** What the liveness check needs of a seed. */
export interface LivenessInput {
  s3: SimS3;
  monitor: Monitor;
  /** Each scheduled time (ISO), its mode, and what each invocation for it answered. */
  scheduled: Array<{ time: string; mode: string; answers: ScheduledAnswer[] }>;
  deadlineMs: number;
  /** When faults ended (the horizon). */
  faultsEnd: number;
  /** When the final start began, if it got the lock (its recovery swept the closed runs). */
  finalStartedAt: number | undefined;
  /** The keys under `state/runs/` as the final start's recovery left them (20 reads them, not the end's). */
  runKeysAfterFinal: readonly string[];
}

/** Invariants 16, 17 and 20 (the module comment), after quiescence. */
export function checkLiveness(input: LivenessInput): void {
  const { s3, monitor } = input;
  const violate = monitor.violate.bind(monitor);
  const excuses = monitor.excuses;
  const at = (t: number) => `T+${((t - monitor.epoch) / 1000).toFixed(1)}s`;

  // 16: each scheduled time, one run or a reason that holds.
  for (const { time, mode, answers } of input.scheduled) {
    const actors = new Set(answers.map((a) => a.actor));
    // (A start refused after its first record deleted it: it never started, monitor.ts.)
    const all = [...monitor.startedBy]
      .filter(([run, by]) => actors.has(by.actor) && monitor.started.has(run))
      .map(([run]) => run);
    // A start that threw after its first record gave the output and the time back (the
    // handler's `handBack`, functions/aws/start-run.ts: a failed send is retried by the
    // schedule, whose next start closes the run as interrupted): its run is a fault's when
    // Lambda's retry started another. Counted.
    const failedStart = (run: string) => monitor.startedBy.get(run)!.actor.result !== 'ok';
    const runs = all.length > 1 ? all.filter((run) => !failedStart(run)) : all;
    excuses.failedStartRetried += all.length - runs.length;
    if (runs.length > 1) {
      violate(
        '16 every scheduled time starts one run',
        `scheduled time ${time} started ${runs.length} runs: ${runs.join(', ')}`,
        runs,
      );
      continue;
    }
    if (runs.length === 1) continue;
    const claimKey = STATE_KEYS.scheduledStart(mode, time);
    const reasons: string[] = [];
    let faulted = false;
    let skipped = false;
    for (const a of answers) {
      if (a.answer === 'crashed' || a.answer === 'error') {
        faulted = true;
        reasons.push(`${a.actor.name} ${a.answer}`);
      } else if (a.answer === 'duplicate') {
        const claimer = s3.events.findLast(
          (e) => e.op === 'put' && e.key === claimKey && e.result.startsWith('ok') && e.t <= a.t,
        )?.actor;
        if (claimer !== undefined && claimer !== a.actor)
          reasons.push(`${a.actor.name} duplicate of ${claimer.name}'s claim`);
      } else if (a.answer === 'skipped') {
        const why = skipHolds(s3, monitor, a);
        if (why) {
          skipped = true;
          reasons.push(why);
        }
      }
    }
    if (reasons.length === 0) {
      violate(
        '16 every scheduled time starts one run',
        `scheduled time ${time} (${mode}) started no run, and no answer says why: ${answers.map((a) => `${a.actor.name} at ${at(a.t)}: ${a.answer}${a.detail ? ` (${a.detail})` : ''}`).join('; ') || 'no invocation answered'}`,
        [],
      );
    } else if (faulted) excuses.startLostToFault++;
    else if (skipped) excuses.startSkippedForHolder++;
  }

  // 17: every started run closes within the bound after its deadline (or the faults' end).
  for (const [run, { t }] of monitor.startedBy) {
    const closed = monitor.closedAt.get(run);
    if (!closed || !monitor.started.has(run)) continue; // 1 reports a run that never closes
    const due = Math.max(t + input.deadlineMs, input.faultsEnd) + CLOSE_BOUND_MS;
    if (closed.t > due) {
      violate(
        '17 every run closes in time',
        `run ${run}, recorded at ${at(t)}, closed at ${at(closed.t)}: ${((closed.t - due) / 1000).toFixed(0)}s past its bound (${CLOSE_BOUND_MS / 60_000} min after the later of its deadline and the faults' end)`,
        [run],
      );
    }
  }

  // 20: after the final start's recovery, closed runs keep only their tombstone and marker.
  if (input.finalStartedAt !== undefined) {
    for (const [run, closed] of monitor.closedAt) {
      // A tombstone of the instant the final start began came before its recovery listed the runs.
      if (closed.t > input.finalStartedAt) continue;
      const prefix = STATE_KEYS.runPrefix(run);
      const left = input.runKeysAfterFinal.filter(
        (k) => k.startsWith(prefix) && k !== STATE_KEYS.closed(run) && k !== STATE_KEYS.closing(run),
      );
      if (left.length > 0) {
        violate(
          '20 closed runs are swept',
          `run ${run}, closed at ${at(closed.t)}, still had ${left.length} key(s) beside its tombstone after the final start's recovery: ${left.slice(0, 3).join(', ')}`,
          [run],
        );
      }
    }
  }
}

/** Why a `skipped` answer holds (16), or undefined when the holder it named was gone by the lock's rules. */
function skipHolds(s3: SimS3, monitor: Monitor, a: ScheduledAnswer): string | undefined {
  const holder = /run (\S+) \(/.exec(a.detail ?? '')?.[1];
  if (holder === undefined) return `${a.actor.name} skipped for another run`;
  // The start's last look at the lock: what it judged by.
  const readAt =
    s3.events.findLast((e) => e.actor === a.actor && e.key === STATE_KEYS.lock && e.op === 'get')?.t ?? a.t;
  const closed = monitor.closedAt.get(holder);
  if (closed !== undefined && closed.t <= readAt) return undefined;
  // A lock this start took itself (a take whose answer was lost, met again as another's) is no holder.
  const holding = monitor.holdings.find((h) => h.run === holder);
  if (holding?.holder === a.actor) return undefined;
  const recorded = monitor.startedBy.get(holder);
  if (recorded !== undefined && recorded.t <= readAt)
    return `${a.actor.name} skipped for run ${holder}, open`;
  if (
    holding &&
    readAt <= holding.start + holding.holder.offsetMs + FIRST_RECORD_GRACE_MS + MAX_CLOCK_SKEW_MS
  )
    return `${a.actor.name} skipped for run ${holder}, within its first record's grace`;
  return undefined;
}
