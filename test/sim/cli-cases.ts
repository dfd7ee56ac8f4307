/**
 * The CLI's lock cases (issue 32, item 4): scenario features drawn from streams of their own, so
 * that other seeds' draws stay as they were, and invariant 23 over what the CLIs answered.
 *
 * Features (`drawCliCases`, in a share of the seeds with a CLI run that is not a format switch):
 * - a rerun right after a kill on the same machine: a moment (50 ms-1.5 s) after the CLI took
 *   the lock it is killed (a closed laptop, a SIGKILL), and the same command is typed again
 *   1-20 s later on that machine (its clock, its zombie rule), without `--wait-lock`: the
 *   killed holder is gone to it by its pid (a zombie too), so it must get the lock at once;
 * - a process pause right after the CLI's tombstone (25-90 s: GC, a suspended VM): the first
 *   storage call after it waits that long before it applies, so that a renewal due in the pause
 *   would land between the tombstone and the release (monitor.ts, 24);
 * - a finish-run invocation 0-1.5 s after a CLI creates its closing record: finish-run's sweep
 *   meets a live CLI closing its own run (monitor.ts, 25);
 * - a process pause while the CLI starts (8-16 min, a closed laptop): right before it writes its
 *   whole run record over its `starting` one, every call of it (its lock's renewals too) waits
 *   until it resumes; meanwhile its run is closed as failed (finish-run judges a start that old
 *   dead; or the lock lapses and the next start's recovery closes it), and its record must not
 *   bring the run back (start-run.ts, recordStart's If-Match);
 * - a CLI pair on the two machines: 0.1-3 s after a CLI takes the lock, another CLI starts on
 *   the other machine with `--wait-lock` 2 min, its clock at the other end of the skew in the
 *   seeds with clocks beyond the allowance (ahead: its clock says the live holder's lease is
 *   over; behind: its start comes before the holder's by its clock); it must wait for the
 *   holder (4) and take the lock with a later run id (22).
 *
 * 23. A CLI refused for the lock names a holder that holds by the lock's rules as seen from the
 *     CLI's machine when it last read the lock: its run not closed (no tombstone), and not a CLI
 *     process of the same machine that had ended (a killed CLI, a zombie included, is gone to a
 *     reader on its machine: shared/export/state/process-alive.ts). One-sided: a lease judged
 *     over on the storage's clock is not checked here (4 checks that no live holder is taken
 *     over; a reader whose clock is behind may rightly wait).
 */
import { STATE_KEYS } from '../../shared/layout.js';
import type { Monitor } from './monitor.js';
import type { Prng } from './prng.js';
import type { SimMachines } from './processes.js';
import type { SimS3 } from './s3.js';
import type { Actor } from './scheduler.js';

/** The CLI runs of a scenario, as far as these features need them. */
export interface CliCase {
  at: number;
  killAfterMs?: number;
  machine?: number;
  zombieWhenKilled?: boolean;
  offsetMs?: number;
  waitForLockMs: number;
  /** Killed this long after it takes the lock, and its command typed again this long after. */
  rerunAfterKill?: { killAfterLockMs: number; rerunAfterMs: number } | undefined;
  /** This run is the command of the CLI of this index typed again after its kill. */
  rerunOf?: number;
  /** Another CLI on the other machine, `--wait-lock` 2 min, this long after it takes the lock. */
  pairAfterLockMs?: number | undefined;
  /** This run is the pair of the CLI of this index (on the other machine). */
  pairOf?: number;
  /** The first storage call after its own tombstone waits this long first (a process pause). */
  pauseAfterTombstoneMs?: number;
  /**
   * Its process pauses this long (a closed laptop) right before it writes its whole run record
   * over its `starting` one, every call of it (lock renewals too) waiting until it resumes.
   */
  pauseWhileStartingMs?: number;
  /**
   * With `pauseWhileStartingMs`: whoever closes its run meanwhile dies right after the run's
   * tombstone, before the run's records are deleted (its `starting` record among them, unless
   * deleted before the tombstone), so that the record the CLI writes over must not be there.
   */
  closerDiesWhilePaused?: boolean;
  /** A finish-run invocation this long after it creates its closing record. */
  finisherAtClosingMs?: number;
}

/** Share of the non-switch CLI runs killed and typed again (a larger share reshuffles more seeds). */
const RERUN_SHARE = 0.25;
const PAUSE_SHARE = 0.3;
const FINISHER_SHARE = 0.3;
const PAIR_SHARE = 0.3;
/**
 * Share of the CLI runs (not killed switches) paused before their whole run record, 8-16 minutes: past the lock's
 * minute, past RUN_START_GRACE_MS and the allowance (6 minutes) and one look of finish-run
 * (5), so that the run is closed as failed meanwhile (finish-run's look, or the next start's
 * recovery once the lock lapsed), and the record must not bring it back.
 */
const STARTING_PAUSE_SHARE = 0.6;
/** Share of those whose run's closer dies right after the tombstone while the CLI is paused. */
const CLOSER_DIES_SHARE = 0.5;

/**
 * Draws the features above for the scenario's CLIs, each from its own stream of `rng` (so they
 * take no draw of `rng` itself). Call it after every other draw of `generateScenario`.
 */
export function drawCliCases(rng: Prng, clis: CliCase[]): void {
  const rerun = rng.stream('cli-rerun-after-kill');
  const pause = rng.stream('cli-pause-after-tombstone');
  const finisher = rng.stream('cli-closing-finisher');
  for (const cli of clis) {
    if (rerun.chance(RERUN_SHARE) && cli.killAfterMs === undefined)
      cli.rerunAfterKill = { killAfterLockMs: rerun.int(50, 1_500), rerunAfterMs: rerun.int(1_000, 20_000) };
    if (pause.chance(PAUSE_SHARE)) cli.pauseAfterTombstoneMs = pause.int(25_000, 90_000);
    if (finisher.chance(FINISHER_SHARE)) cli.finisherAtClosingMs = finisher.int(0, 1_500);
  }
  const pair = rng.stream('cli-pair-other-machine');
  for (const cli of clis)
    if (pair.chance(PAIR_SHARE) && cli.killAfterMs === undefined) cli.pairAfterLockMs = pair.int(100, 3_000);
  const starting = rng.stream('cli-pause-while-starting');
  for (const cli of clis)
    if (starting.chance(STARTING_PAUSE_SHARE) && cli.killAfterMs === undefined)
      cli.pauseWhileStartingMs = starting.int(8 * 60_000, 16 * 60_000);
  const closerDies = rng.stream('cli-closer-dies-while-paused');
  for (const cli of clis)
    if (cli.pauseWhileStartingMs !== undefined && closerDies.chance(CLOSER_DIES_SHARE))
      cli.closerDiesWhilePaused = true;
}

/** The pairs' pids: 4200 + the index of the CLI run they pair. */
export const PAIR_PIDS = 200;

/** The reruns' pids: 4100 + the index of the CLI run typed again (processes.ts numbers from 4000). */
export const RERUN_PIDS = 100;

/** What a CLI actor ended with, for invariant 23. */
export interface CliOutcome {
  actor: Actor;
  machine: number;
}

/** The holder an `OutputLockedError` of the lock's acquire names (`lockedError`, lock.ts). */
const REFUSED = /run (\S+) \(([^,]+), since [^)]+\) is writing to/;

/** Invariant 23 (the module comment), after quiescence. */
export function checkCliRefusals(
  s3: SimS3,
  monitor: Monitor,
  machines: SimMachines,
  clis: CliOutcome[],
): number {
  let refusals = 0;
  for (const { actor, machine } of clis) {
    if (actor.result !== 'error') continue;
    const named = REFUSED.exec(String((actor.error as Error | undefined)?.message ?? ''));
    if (!named) continue;
    refusals++;
    const [, run, owner] = named;
    const readAt = s3.events.findLast(
      (e) => e.actor === actor && e.key === STATE_KEYS.lock && e.op === 'get' && e.result.startsWith('ok'),
    )?.t;
    if (readAt === undefined) continue;
    const at = (t: number) => `T+${((t - monitor.epoch) / 1000).toFixed(1)}s`;
    const closed = monitor.closedAt.get(run!);
    if (closed !== undefined && closed.t < readAt) {
      monitor.violate(
        '23 a CLI refused names a live holder',
        `${actor.name} was refused for run ${run} (${owner}), whose tombstone ${closed.by.name} wrote at ${at(closed.t)}, before the CLI last read the lock at ${at(readAt)}: a closed run's lock is free`,
        [run!],
      );
      continue;
    }
    const holder = machines.processOf(owner!);
    if (
      holder !== undefined &&
      holder.machine === machine &&
      holder.actor.endedAt !== undefined &&
      holder.actor.endedAt < readAt
    ) {
      monitor.violate(
        '23 a CLI refused names a live holder',
        `${actor.name} was refused for run ${run} (${owner}), whose process ${holder.actor.name} on the same machine ${holder.actor.result === 'crashed' ? `was killed${holder.zombie ? ' (a zombie)' : ''}` : 'ended'} at ${at(holder.actor.endedAt)}, before the CLI last read the lock at ${at(readAt)}: a holder gone from the reader's machine holds nothing`,
        [run!],
      );
    }
  }
  return refusals;
}
