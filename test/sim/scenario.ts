/**
 * One seed: a scenario drawn from the seed (dataset, fault mix, clock skew, scheduled starts and
 * their duplicates, overlapping finishers, CLI runs, redrives), run in three phases:
 * 1. until the horizon, with faults;
 * 2. without faults and without new work, until quiescence: no actor at work but the queues'
 *    pollers and finish-run's schedule, no message queued, every started run closed (or, at the
 *    latest, every deadline and lease long past);
 * 3. right after quiescence (or, when the last holder of the lock never recorded its run, once
 *    the lock's rules free it: liveness.ts, 18), one fault-free start-run, which must get the
 *    lock, carried to its manifest by the queues and finish-run.
 * Then the invariants are read from the bucket, the progress invariants among them (liveness.ts).
 */

import { FIRST_RECORD_GRACE_MS } from '../../shared/export/run/start-run.js';
import type { LockRecord } from '../../shared/export/state/lock.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { type Mode, type TableFormat, tableFormatOf } from '../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS, STATE_ROOT } from '../../shared/layout.js';
import {
  Announcer,
  cliRun,
  depsFor,
  FINISH_TIME_UP_MS,
  finishHandler,
  planHandler,
  type Settings,
  type StartResult,
  startRunHandler,
  unitHandler,
  type World,
} from './actors.js';
import { addBacklogCampaign, generateDataset, SimApi } from './api.js';
import { type BudgetSettings, SimBudget } from './budget.js';
import {
  type CliCase,
  type CliOutcome,
  checkCliRefusals,
  drawCliCases,
  PAIR_PIDS,
  RERUN_PIDS,
} from './cli-cases.js';
import { type CloserCases, type CloserPlan, Closers, drawCloserPlan } from './closer-cases.js';
import { installAvroTypeCache, installFastZstd, installSyncAvroCodecs } from './codec.js';
import {
  type CommitRaceCases,
  CommitRacer,
  type CommitRaces,
  drawCommitRaces,
  noCommitRaceCases,
} from './commit-races.js';
import { type DynamoCases, type DynamoFaults, SimDynamo } from './dynamo.js';
import { SimFetcherSlots } from './fetcher-slots.js';
import { type GlueCases, type GlueFaults, noGlueCases, SimGlue } from './glue.js';
import { commitsAfterCompaction, type IcebergCases, icebergCases } from './iceberg-cases.js';
import { lateRuns } from './iceberg-current.js';
import { icebergTables } from './iceberg-invariants.js';
import { checkInvariants } from './invariants.js';
import { checkLiveness, codeSeesHolder, type Excuses, type ScheduledAnswer } from './liveness.js';
import { Monitor, runOfKey, type Violation } from './monitor.js';
import { OtherEngine } from './other-engine.js';
import { Prng } from './prng.js';
import { SimMachines } from './processes.js';
import { RefetchWatch } from './refetch.js';
import { type FaultRates, SimS3 } from './s3.js';
import { type Actor, describe, Sim, type TraceLine } from './scheduler.js';
import { type Delivery, SimQueue } from './sqs.js';
import { installTimerShim } from './timers.js';
import { type UnitDeadlineCases, UnitDeadlines } from './unit-deadline.js';

const MINUTE = 60_000;
/** Invariant 16 (budget.ts). */
const BUDGET_INVARIANT = '21 the request budget holds';
export const EPOCH = Date.parse('2026-11-22T03:00:00.000Z');
/** Lambda timeouts (infra/constructs/functions.ts) and the queues' visibility (6 ×). */
const LAMBDA_TIMEOUT_MS = 5 * MINUTE;
const FINISH_TIMEOUT_MS = 15 * MINUTE;
const VISIBILITY_MS = 6 * LAMBDA_TIMEOUT_MS;
const FINISH_EVERY_MS = 5 * MINUTE;
/** A seed that takes more steps than this has not quiesced: a livelock, reported as such. */
const MAX_STEPS = 400_000;
/** A run's record (`STATE_KEYS.runRecord`). */
const RUN_RECORD = /^state\/runs\/[^/]+\/run\.json$/;

export interface Scenario {
  settings: Settings;
  profile: string;
  faults: FaultRates;
  announceFails: number;
  /** Each actor's clock is off by up to ± this. */
  skewMs: number;
  /** `recoveryHandsOn`: its recovery hands every closing it finds open on (a late closing's start). */
  starts: Array<{
    at: number;
    mode: Mode;
    duplicate: 'none' | 'together' | number;
    recoveryHandsOn?: boolean;
  }>;
  /** CLI runs; one with a `tableFormat` other than the seed's is a format switch (`formatSwitch`). */
  clis: Array<
    {
      at: number;
      mode: Mode;
      waitForLockMs: number;
      tableFormat?: TableFormat;
      killAfterMs?: number;
      /** Which of the two machines of hostname `runner` it runs on (processes.ts). */
      machine?: number;
      /** Killed, it stays a zombie (a container without an init process to reap it). */
      zombieWhenKilled?: boolean;
      /** Its clock's offset, where the seed sets it (clocks beyond the allowance); else drawn at its start. */
      offsetMs?: number;
      /** The CLI's lock cases (cli-cases.ts): a rerun after a kill, a pause after the tombstone, a finisher at its closing. */
    } & Pick<
      CliCase,
      | 'rerunAfterKill'
      | 'rerunOf'
      | 'pauseAfterTombstoneMs'
      | 'pauseWhileStartingMs'
      | 'closerDiesWhilePaused'
      | 'finisherAtClosingMs'
      | 'pairAfterLockMs'
      | 'pairOf'
    >
  >;
  /** Per finish-run tick: a second, overlapping invocation. */
  finishOverlap: number;
  /**
   * The second invocation comes up to this long after the first: a minute, or so soon that the
   * two publish and commit side by side (two committers of one run's snapshots at once).
   */
  finishOverlapWithinMs: number;
  /**
   * Per finish-run invocation: its time is up at once, so it publishes one output of a closing
   * and hands the rest on (a closing larger than one invocation, worked on by several).
   */
  finishHandsOn: number;
  /** Per receive: the message goes to a second consumer at once. */
  duplicateDelivery: number;
  redriveAt: number[];
  concurrency: { plan: number; report: number };
  horizon: number;
  /**
   * Another engine's changes to the Iceberg tables (other-engine.ts), at these times (until a
   * run deadline past the horizon, while the last closings commit); empty but in a share of the
   * Iceberg seeds. `triggered`: changes more, each set off by an exporter's write to a table
   * (an S3 event notification starting a job), on that table, so that they meet the exporter's
   * commits. `compactShare`: of them all, compactions.
   */
  others: { at: number[]; triggered: number; compactShare: number };
  /**
   * The deployment's request budget (budget.ts) over the simulated DynamoDB table (dynamo.ts):
   * its ceiling, API_CONTAINERS, the budget clocks' extra skew, and the table's faults.
   */
  budget: BudgetSettings & { faults: DynamoFaults };
  /**
   * The Iceberg tables are in Glue (glue.ts; the stack's catalog, recorded in
   * state/table-format.json) with these faults, in half the Iceberg seeds without another
   * engine (it writes the file catalog's versions); undefined: the file catalog.
   */
  glue?: GlueFaults | undefined;
  /** Crashes at the writes of the lock and of tombstones ten times likelier (s3.ts). */
  crashAtLockAndTombstone: boolean;
  /**
   * Late closings meeting a newer run (Iceberg seeds, `lateClosings`): after each of the first
   * `starts` finish-runs that hand a closing on while faults are on, finish-run's schedule stalls
   * (no invocation: a throttled or broken function) until `resumeAfterMs` after one more
   * scheduled start, which comes `afterMs` after the lock of the closing's run has run out; that
   * start's recovery meets the closing open and hands it on, and its newer run drains while the
   * older closing waits. When finish-run resumes, the two closings are taken up each under its
   * own lease: the older run commits its tables late, or at once with the newer (finishers side
   * by side). Zero starts: none.
   */
  lateClosings: { starts: number; afterMs: number; resumeAfterMs: number };
  /** Per call on a `state/` key while faults are on: the chance it starts the key's outage (s3.ts). */
  storageOutages: number;
  /** Closers that come late, and the last closer's crash after its tombstone (closer-cases.ts). */
  closers: CloserPlan;
  /** Commit races of the late closings (commit-races.ts); undefined: none. */
  commitRaces?: CommitRaces | undefined;
  /** A backlog at the request budget's ceiling (`budgetBacklog`): the jobs of its campaign; 0: none. */
  budgetBacklog: number;
  /**
   * Conditional writes refused at one step (`drawRefusals`): per conditional manifest put while
   * faults are on, the chance it starts a spell of 409s at that key (s3.ts); and per duplicate
   * delivery of a plan message, the chance that the campaign's listing changes between the two
   * deliveries' listings (a job goes away right after the first one's page: api.ts). Zero: none.
   */
  refusals: { manifestConflicts: number; planListingChanges: number };
}

const PROFILES: Record<string, FaultRates> = {
  calm: { crash: 0, lost: 0, conflict: 0, slowDown: 0, slowCalls: 0, pause: 0 },
  slow: { crash: 0, lost: 0, conflict: 0, slowDown: 0, slowCalls: 0.02, pause: 0.03 },
  crashes: { crash: 0.01, lost: 0, conflict: 0, slowDown: 0, slowCalls: 0.005, pause: 0 },
  ambiguous: { crash: 0, lost: 0.06, conflict: 0.06, slowDown: 0, slowCalls: 0, pause: 0 },
  flaky: { crash: 0, lost: 0.02, conflict: 0.02, slowDown: 0.03, slowCalls: 0.005, pause: 0 },
  mixed: { crash: 0.004, lost: 0.02, conflict: 0.02, slowDown: 0.01, slowCalls: 0.01, pause: 0.005 },
};

export function generateScenario(rng: Prng): Scenario {
  const profile = rng.pick(Object.keys(PROFILES));
  const starts: Scenario['starts'] = [];
  let at = EPOCH + rng.int(0, 5 * MINUTE);
  const n = rng.int(1, 3);
  for (let i = 0; i < n; i++) {
    const duplicate = rng.chance(0.3) ? (rng.chance(0.5) ? 'together' : rng.int(1_000, 10 * MINUTE)) : 'none';
    starts.push({ at, mode: rng.chance(0.8) ? 'incremental' : 'full', duplicate });
    at += rng.int(10, 40) * MINUTE;
  }
  const lastStart = starts[starts.length - 1]!.at;
  const clis: Scenario['clis'] = [];
  const cliCount = rng.pick([0, 0, 1, 1, 2]);
  for (let i = 0; i < cliCount; i++) {
    // A second CLI run often comes right after the first (a cron overlap, a retry by hand),
    // waiting for its lock: it takes the lock the moment the first one's expires.
    const near = i > 0 && rng.chance(0.6);
    clis.push({
      at: near ? clis[i - 1]!.at + rng.int(0, 90_000) : EPOCH + rng.int(0, lastStart - EPOCH + 20 * MINUTE),
      mode: rng.chance(0.8) ? 'incremental' : 'full',
      waitForLockMs: near ? 2 * MINUTE : rng.pick([0, 0, 2 * MINUTE]),
    });
  }
  const horizon = Math.max(lastStart, ...clis.map((c) => c.at)) + 25 * MINUTE;
  const scenario: Scenario = {
    settings: {
      deadlineMs: 20 * MINUTE,
      unitSize: rng.int(1, 3),
      listPageSize: rng.pick([5, 1000, 1000]),
      maxReceiveCount: 3,
      fetchConcurrency: rng.int(1, 3),
      tableFormat: 'hive',
    },
    profile,
    faults: PROFILES[profile]!,
    announceFails: rng.pick([0, 0.05]),
    skewMs: rng.pick([0, 0, 1_000, 30_000]),
    starts,
    clis,
    finishOverlap: rng.pick([0, 0.2, 0.5]),
    finishOverlapWithinMs: MINUTE,
    finishHandsOn: 0,
    duplicateDelivery: rng.pick([0, 0.1, 0.3]),
    redriveAt: rng.chance(0.3) ? [EPOCH + rng.int(0, horizon - EPOCH)] : [],
    concurrency: { plan: rng.int(1, 3), report: rng.int(1, 4) },
    horizon,
    others: { at: [], triggered: 0, compactShare: 0 },
    budget: { ceiling: 0, containers: 1, skewMs: 0, faults: NO_DYNAMO_FAULTS },
    crashAtLockAndTombstone: false,
    lateClosings: { starts: 0, afterMs: 0, resumeAfterMs: 0 },
    storageOutages: 0,
    closers: { crashAtLastTombstone: false, lateFinishers: [] },
    budgetBacklog: 0,
    refusals: { manifestConflicts: 0, planListingChanges: 0 },
  };
  // Drawn last, so that a seed's other choices are those it made before Iceberg runs existed.
  scenario.settings.tableFormat = pickTableFormat(rng);
  scenario.finishOverlapWithinMs = rng.pick([MINUTE, MINUTE, 2_000, 200]);
  scenario.finishHandsOn = rng.pick([0, 0.5, 1]);
  // Fetcher slots (REPORT_FETCHERS): none in a quarter of the seeds (every invocation fetches).
  scenario.settings.fetchers = rng.pick([undefined, 1, 1, 2]);
  // Drawn still (it chose finishers without the closing lease, before the simulation called the
  // real finish-run, which always takes it), so that the seeds keep their other choices.
  rng.chance(0.5);
  // A format switch in half the seeds with a CLI run: its first is a full run in the other
  // format (a `--full --table-format` by hand). The stack's incremental runs are refused once it
  // is recorded, its full runs switch back: both directions, crashes at every step included.
  // (`chance(p)` is one draw whatever p: a larger share adds seeds, it keeps the earlier ones.)
  const cli = scenario.clis[0];
  if (rng.chance(0.5) && cli) {
    cli.mode = 'full';
    cli.tableFormat = scenario.settings.tableFormat === 'hive' ? 'iceberg' : 'hive';
    // 80% of them killed (a closed laptop, a SIGKILL) at any point of the run, its publish,
    // commit, manifest, format record and state included: the next run completes the switch,
    // or meets it open (a start its recovery closes, or hands on to finish-run).
    const kill = rng.int(0, 4 * MINUTE);
    if (rng.chance(0.8)) cli.killAfterMs = kill;
  }
  // Another engine (Athena, Spark) writing the Iceberg tables in 40% of the Iceberg seeds: a few
  // changes at random times while runs go on, racing their commits (other-engine.ts).
  if (scenario.settings.tableFormat === 'iceberg' && rng.chance(0.4)) {
    const count = rng.int(2, 6);
    scenario.others = {
      at: Array.from(
        { length: count },
        () => EPOCH + rng.int(5 * MINUTE, horizon - EPOCH + scenario.settings.deadlineMs),
      ).sort((a, b) => a - b),
      triggered: rng.int(0, 4),
      compactShare: rng.pick([0.5, 0.8]),
    };
  }
  // A killed switch met by one more of the stack's starts 2-8 minutes after the kill (once the
  // CLI's lock, renewed each minute, has lapsed): its recovery closes the switch, or (in half of
  // these seeds, at every start) hands it on to finish-run, and its format check must come after
  // that recovery and refuse while the switch is still open. Drawn last: other seeds keep theirs.
  if (cli?.killAfterMs !== undefined) {
    scenario.starts.push({
      at: cli.at + cli.killAfterMs + rng.int(2 * MINUTE, 8 * MINUTE),
      mode: 'incremental',
      duplicate: 'none',
    });
    scenario.settings.startHandsOn = rng.pick([0, 1]);
  }
  // The request budget's DynamoDB item, in every seed: a ceiling the units' requests meet (a
  // unit sends up to 3 at once, 20-400 ms each), API_CONTAINERS as the report poller's
  // concurrency allows, clocks apart beyond the seed's skew (past the budget's 60 s allowance in
  // a third of the seeds), and the table's faults while faults are on. Drawn last.
  const tableFaults = rng.pick(['none', 'lost', 'throttled', 'mixed'] as const);
  scenario.budget = {
    ceiling: rng.pick([1, 2, 4]),
    containers: scenario.concurrency.report + 1,
    skewMs: rng.pick([0, 30_000, 90_000, 300_000]),
    faults: DYNAMO_PROFILES[tableFaults],
  };
  // Glue in half the Iceberg seeds without another engine. Drawn last.
  if (rng.chance(0.5) && scenario.settings.tableFormat === 'iceberg' && scenario.others.at.length === 0) {
    scenario.glue = rng.pick([GLUE_CALM, GLUE_FAULTS, GLUE_FAULTS]);
    // Finishers side by side in most of them (each takes the closing lease, as the real
    // finish-run does): commits of one Glue table meet when a holder outlives its lease.
    if (rng.chance(0.7)) {
      scenario.finishOverlap = 0.5;
      scenario.finishOverlapWithinMs = rng.pick([200, 2_000]);
    }
  }
  // Clocks up to ±5 minutes apart in 30% of the seeds (beyond the lock's 60 s allowance: the
  // lease is judged on the storage's clock, and a live holder must never be taken over), and
  // each CLI on one of two machines of one hostname, a killed one left a zombie in half the
  // seeds (processes.ts). Drawn last: other seeds keep their choices (a seed at 0 stays there
  // unless drawn here).
  if (rng.chance(0.3)) scenario.skewMs = rng.int(MINUTE + 1_000, 5 * MINUTE);
  const zombies = rng.chance(0.5);
  for (const each of scenario.clis) {
    each.machine = rng.int(0, 1);
    each.zombieWhenKilled = zombies;
  }
  // With clocks beyond the allowance, consecutive CLIs at opposite ends of the skew (2-10 min
  // apart): the later one ahead (a waiting CLI whose clock says a live holder's lease is over)
  // or behind (a start whose clock says it came before the run it follows), half the seeds each.
  const laterAhead = rng.chance(0.5);
  if (scenario.skewMs > MINUTE) {
    for (const [i, each] of scenario.clis.entries())
      each.offsetMs = (i % 2 === 0) === laterAhead ? -scenario.skewMs : scenario.skewMs;
  }
  // Crashes at the lock's and the tombstones' writes ten times likelier in a third of the seeds
  // (those whose profile crashes): a lock left by a start that died before its record, or by a
  // closer that died after the tombstone, which the lock's rules must free (18), and a closed
  // run's leftovers, which the next recovery must sweep (20). Drawn last: other seeds keep theirs.
  scenario.crashAtLockAndTombstone = rng.chance(1 / 3);
  lateClosings(rng.stream('late closings'), scenario, cli);
  // The CLI's lock cases (cli-cases.ts), each from a stream of its own: a rerun right after a
  // kill on the same machine, a pause after the tombstone, a finisher at the CLI's closing.
  drawCliCases(rng, scenario.clis);
  // Per-key outages of the storage (s3.ts) in 30% of the seeds: a `state/` key answering
  // 503 for 5-30 s, longer than one caller's retries (a claim's done mark, a lock's renewal).
  // From a stream of its own: no other draw moves.
  const outages = rng.stream('storage-outages');
  scenario.storageOutages = outages.chance(0.3) ? outages.pick([0.05, 0.1]) : 0;
  // Closers that come late, and the last closer's crash after its tombstone (closer-cases.ts),
  // from streams of their own.
  scenario.closers = drawCloserPlan(rng);
  // An older run's committer paused at its swap while a newer run commits (commit-races.ts).
  scenario.commitRaces = drawCommitRaces(rng, scenario.lateClosings.starts > 0);
  budgetBacklog(rng.stream('budget-backlog'), scenario);
  drawRefusals(rng, scenario);
  return scenario;
}

/**
 * A backlog at the request budget's ceiling (issue 32: several containers leasing at once, their
 * conditional writes losing to each other's while the schedule is booked past MAX_QUEUE_MS).
 * Elsewhere a seed's requests are few (about ten in all, over its runs) and its containers
 * rarely lease together (fetcher slots let one or two fetch), so a write lost to another
 * container's seldom meets a schedule full for 5 s: a lost write's lease kept
 * (`budget-lease-of-lost-write-kept`) broke invariant 21 at one seed of 600. In 20% of the
 * seeds: one more campaign of 4-7 jobs listed from the start (the first run fetches them at
 * once: api.ts `addBacklogCampaign`), RATE_CEILING 1 req/s, the report poller at its widest
 * (4 at once, API_CONTAINERS 5) and no fetcher slots (every invocation fetches), so that a
 * plan's units start together and lease from one item for longer than the window. From a
 * stream of its own: no other draw moves (the seeds drawn change their whole course).
 */
function budgetBacklog(rng: Prng, scenario: Scenario): void {
  if (!rng.chance(BUDGET_BACKLOG_SHARE)) return;
  scenario.budgetBacklog = rng.int(4, 7);
  scenario.budget.ceiling = 1;
  scenario.concurrency.report = 4;
  scenario.budget.containers = scenario.concurrency.report + 1;
  scenario.settings.fetchers = undefined;
}

/**
 * Conditional writes refused, or two writers meeting, at the one step where each matters (the
 * mutants `manifest-refused-counted-written`, `plan-not-claimed`), each from a stream of its
 * own so that no other draw of the seed moves:
 * - in 30% of the seeds, a manifest's create-if-absent meets a spell of 409s (half the puts
 *   start one) longer than the adapter's tries: the closer must fail, not count it written;
 * - in 40% of the seeds, half the duplicate deliveries of a plan message (two at once) meet a
 *   campaign whose first listed job goes away between their listings: their plans differ, and
 *   only the claim keeps one of them.
 */
function drawRefusals(rng: Prng, scenario: Scenario): void {
  const manifest = rng.stream('manifest-conflicts');
  const plans = rng.stream('plan-listing-changes');
  scenario.refusals = {
    manifestConflicts: manifest.chance(0.3) ? 0.5 : 0,
    planListingChanges: plans.chance(0.4) ? 0.5 : 0,
  };
}

/**
 * Older closings that meet newer runs (issue 32: "two runs commit one table at once where the
 * design allows it"). The lock serialises runs, but a run's closing outlives it: a start's
 * recovery that hands a closing on to finish-run starts the next run at once, and finish-run
 * takes the two closings up each under its own lease, in any order and side by side. From its
 * own stream, so that no other draw of the seed moves.
 * - A killed format switch meets one more start 2-4 minutes after its kill (beside the one at
 *   2-8), while the switch is likelier still open, and in a third of the killed-switch seeds that
 *   drew no hand-on every start's recovery hands on: the start must refuse while the switch's
 *   closing is open, and its format check comes after that recovery.
 * - In half the Iceberg seeds: every start's recovery hands on, finish-runs hand on at least half
 *   the time, a second finisher comes side by side (200 ms or 2 s) on half the ticks, and after
 *   each of the first 1-2 hand-ons of a finish-run, finish-run stalls while one more scheduled
 *   start comes 1-3 minutes after the closing's lock ran out, and resumes 3-8 minutes after it
 *   (`Scenario.lateClosings`, run by `simulate`).
 */
function lateClosings(rng: Prng, scenario: Scenario, cli: Scenario['clis'][number] | undefined): void {
  if (cli?.killAfterMs !== undefined) {
    scenario.starts.push({
      at: cli.at + cli.killAfterMs + rng.int(2 * MINUTE, 4 * MINUTE),
      mode: 'incremental',
      duplicate: 'none',
    });
    if (rng.chance(1 / 3) && scenario.settings.startHandsOn === 0) scenario.settings.startHandsOn = 1;
  }
  const late = rng.chance(0.5) && scenario.settings.tableFormat === 'iceberg';
  const starts = rng.int(1, 2);
  const afterMs = rng.int(MINUTE, 3 * MINUTE);
  const within = rng.pick([200, 2_000]);
  const resumeAfterMs = rng.int(3 * MINUTE, 8 * MINUTE);
  if (!late) return;
  scenario.lateClosings = { starts, afterMs, resumeAfterMs };
  scenario.settings.startHandsOn = 1;
  scenario.finishHandsOn = Math.max(scenario.finishHandsOn, 0.5);
  if (scenario.finishOverlap < 0.5 || scenario.finishOverlapWithinMs > 2_000) {
    scenario.finishOverlap = 0.5;
    scenario.finishOverlapWithinMs = within;
  }
}

/** The share of the seeds with a backlog at the budget's ceiling (`budgetBacklog`). */
const BUDGET_BACKLOG_SHARE = 0.2;

const GLUE_CALM: GlueFaults = { crash: 0, lostAfter: 0, lostBefore: 0, throttled: 0 };
/** Crashes at Glue's swap are ten times likelier than at a storage call, as at the file catalog's. */
const GLUE_FAULTS: GlueFaults = { crash: 0.05, lostAfter: 0.1, lostBefore: 0.05, throttled: 0.05 };

const NO_DYNAMO_FAULTS: DynamoFaults = { crash: 0, lost: 0, throttled: 0, failed: 0, slow: 0, stall: 0 };
const DYNAMO_PROFILES: Record<'none' | 'lost' | 'throttled' | 'mixed', DynamoFaults> = {
  none: NO_DYNAMO_FAULTS,
  lost: { crash: 0, lost: 0.1, throttled: 0, failed: 0, slow: 0.02, stall: 0 },
  throttled: { crash: 0, lost: 0, throttled: 0.05, failed: 0.02, slow: 0.02, stall: 0.005 },
  mixed: { crash: 0.003, lost: 0.05, throttled: 0.02, failed: 0.01, slow: 0.02, stall: 0.005 },
};

/** The format `state/table-format.json` records, if any. */
function recordedFormat(s3: SimS3): TableFormat | undefined {
  const body = s3.peek(STATE_KEYS.tableFormat);
  return body
    ? (JSON.parse(Buffer.from(body).toString('utf8')) as { table_format: TableFormat }).table_format
    : undefined;
}

/** Half the seeds write Iceberg tables: every start and CLI run of the seed, so they share them. */
function pickTableFormat(rng: Prng): TableFormat {
  return rng.chance(0.5) ? 'iceberg' : 'hive';
}

export interface SeedResult {
  seed: number;
  violations: Violation[];
  trace: TraceLine[];
  scenario: Scenario;
  steps: number;
  runsStarted: number;
  manifests: number;
  /** The faults of the Iceberg commit this seed reached (all zero for a Hive seed). */
  iceberg: IcebergCases;
  /** export-reports' time for requests: the cases this seed reached (unit-deadline.ts). */
  unitDeadline: UnitDeadlineCases;
  /** Format switches: the cases this seed reached. */
  formatSwitch: FormatSwitchCases;
  /** The counted excuses of the invariants (liveness.ts). */
  excuses: Excuses;
  /**
   * The request budget: what its table's calls met (dynamo.ts), the units' requests granted,
   * containers that fell back, and the most granted in a window over what the ceiling allows.
   */
  budget: DynamoCases & { grants: number; fallbacks: number; peakShare: number; racesAtCeiling: number };
  /** What the seed's Glue calls met (all zero but in the Glue seeds). */
  glue: GlueCases;
  /** The lock's cases of issue 32 this seed reached. */
  lock: LockCases;
  /** Closers that came late, and the last closer's crash after its tombstone (closer-cases.ts). */
  closers: CloserCases;
  /** The commit races this seed reached (commit-races.ts; all zero without them). */
  commitRaces: CommitRaceCases;
  /** Conditional writes refused, or writers meeting, at one step (`drawRefusals`, cli-cases.ts). */
  refused: RefusedCases;
}

/** Conditional writes refused at the one step where each matters: what a seed reached. */
export interface RefusedCases {
  /** Conditional puts of a manifest that met a spell of 409s (s3.ts `manifestConflicts`). */
  manifestConflicts: number;
  /** Jobs gone between the listings of two deliveries of one plan message at once (api.ts). */
  planListingChanges: number;
  /** CLI runs paused before their whole run record (cli-cases.ts `pauseWhileStartingMs`). */
  startsPaused: number;
  /** Of those, runs closed (their tombstone written) while the CLI was paused. */
  startsClosedWhilePaused: number;
  /** Of those, runs whose closer died right after the tombstone (cli-cases.ts `closerDiesWhilePaused`). */
  closersDiedWhilePaused: number;
}

export const noRefusedCases = (): RefusedCases => ({
  manifestConflicts: 0,
  planListingChanges: 0,
  startsPaused: 0,
  startsClosedWhilePaused: 0,
  closersDiedWhilePaused: 0,
});

/** The lock's cases of issue 32: holders judged by their process, leases judged on the bucket's clock. */
export interface LockCases {
  /** Lock holders (killed CLIs, zombies among them) a CLI on their machine judged gone. */
  holdersGone: number;
  /** Reads of the bucket's clock (`state/lock-clock.json` written): a lease that looked over. */
  storageClockReads: number;
  /** CLIs refused for the lock (23 checks the holder each named). */
  cliRefusals: number;
  /** CLI runs typed again right after a kill on the same machine (cli-cases.ts). */
  cliReruns: number;
  /** CLIs started on the other machine while a CLI held the lock (cli-cases.ts). */
  cliPairs: number;
}

/** What a seed's format switches came to (zero but in the seeds that draw one: `generateScenario`). */
export interface FormatSwitchCases {
  /** Published full runs in another format than the published run before them: to Iceberg, to Hive. */
  toIceberg: number;
  toHive: number;
  /**
   * Of those, CLI runs killed before their manifest and closed by another actor (the next run's
   * recovery, or finish-run when start-run's recovery handed it on).
   */
  switchesClosedByOthers: number;
  /** Crashes at the write of the format record, before or after it applied. */
  crashesAtFormatRecord: number;
  /** Starts refused by the table-format check after their recovery. */
  startsRefused: number;
}

export const noFormatSwitchCases = (): FormatSwitchCases => ({
  toIceberg: 0,
  toHive: 0,
  switchesClosedByOthers: 0,
  crashesAtFormatRecord: 0,
  startsRefused: 0,
});

function formatSwitchCases(s3: SimS3, monitor: Monitor): FormatSwitchCases {
  const cases = noFormatSwitchCases();
  const published = s3
    .keys('runs/')
    .map((key) => JSON.parse(Buffer.from(s3.peek(key)!).toString('utf8')) as Manifest)
    .filter((m) => m.status !== 'failed')
    .sort((a, b) => (a.run_id < b.run_id ? -1 : 1));
  published.forEach((m, i) => {
    const before = published[i - 1];
    if (!before || m.mode !== 'full' || tableFormatOf(m) === tableFormatOf(before)) return;
    if (tableFormatOf(m) === 'iceberg') cases.toIceberg++;
    else cases.toHive++;
    const written = s3.events.find(
      (e) =>
        e.op === 'put' &&
        e.key === manifestKey(m.dt, m.run_id) &&
        (e.result.startsWith('ok') || e.result === 'crash-after'),
    );
    if (monitor.started.get(m.run_id) === 'local' && written && written.actor.kind !== 'cli')
      cases.switchesClosedByOthers++;
  });
  cases.crashesAtFormatRecord = s3.events.filter(
    (e) => e.key === STATE_KEYS.tableFormat && e.result.startsWith('crash'),
  ).length;
  cases.startsRefused = monitor.refusedStarts;
  return cases;
}

export interface SeedOptions {
  trace?: boolean;
}

export async function runSeed(seed: number, options: SeedOptions = {}): Promise<SeedResult> {
  const root = new Prng(seed);
  const scenario = generateScenario(root.fork());
  const hotTimes = [...scenario.starts.map((s) => s.at), ...scenario.clis.map((c) => c.at)];
  const dataset = generateDataset(root.fork(), EPOCH, scenario.horizon - EPOCH, hotTimes);
  if (scenario.budgetBacklog > 0) addBacklogCampaign(dataset, EPOCH, scenario.budgetBacklog);
  const sim = new Sim(root.fork(), EPOCH, options.trace ?? false);
  const restoreTimers = installTimerShim(sim);
  const restoreZstd = installFastZstd();
  const restoreAvro = installSyncAvroCodecs();
  const restoreAvroTypes = installAvroTypeCache();
  try {
    return await simulate(seed, scenario, sim, dataset);
  } finally {
    restoreAvroTypes();
    restoreAvro();
    restoreZstd();
    restoreTimers();
  }
}

async function simulate(
  seed: number,
  scenario: Scenario,
  sim: Sim,
  dataset: ReturnType<typeof generateDataset>,
): Promise<SeedResult> {
  const s3 = new SimS3(sim, scenario.faults);
  s3.crashAtLockAndTombstone = scenario.crashAtLockAndTombstone;
  if (scenario.storageOutages > 0) {
    s3.outages = { chance: scenario.storageOutages, rng: new Prng(seed).stream('storage-outage-calls') };
  }
  if (scenario.refusals.manifestConflicts > 0) {
    s3.manifestConflicts = {
      chance: scenario.refusals.manifestConflicts,
      rng: new Prng(seed).stream('manifest-conflict-calls'),
      met: 0,
    };
  }
  const world: World = {
    sim,
    s3,
    api: new SimApi(sim, dataset),
    planQueue: new SimQueue(
      sim,
      'plan',
      VISIBILITY_MS,
      scenario.settings.maxReceiveCount,
      scenario.faults.crash,
    ),
    reportQueue: new SimQueue(
      sim,
      'report',
      VISIBILITY_MS,
      scenario.settings.maxReceiveCount,
      scenario.faults.crash,
    ),
    announcer: new Announcer(sim, scenario.announceFails),
    settings: scenario.settings,
    unitDeadlines: new UnitDeadlines(),
    fetcherSlots: new SimFetcherSlots(sim, scenario.faults.crash),
  };
  const dynamo = new SimDynamo(sim, scenario.budget.faults);
  world.budget = new SimBudget(sim, dynamo, scenario.budget);
  if (scenario.glue) world.glue = new SimGlue(sim, scenario.glue, s3);
  const monitor = new Monitor(sim, s3, [world.planQueue, world.reportQueue]);
  const refetch = new RefetchWatch(s3, monitor, () => sim.now);
  world.api.onReportAsked = (actor, jobId) => refetch.asked(actor, jobId);
  world.fetcherSlots.onViolation = (message) =>
    monitor.violate('27 a lapsed fetcher slot is taken', message, []);
  const offset = () => (scenario.skewMs > 0 ? sim.rng.int(-scenario.skewMs, scenario.skewMs) : 0);
  const stop = { ticks: false, pollers: false };

  const lambda = (
    kind: 'start-run' | 'plan' | 'unit' | 'finish',
    timeoutMs: number,
    fn: (actor: Actor) => Promise<unknown>,
    run?: string,
  ): Actor => sim.spawn(kind, kind, { offsetMs: offset(), killAfterMs: timeoutMs, run }, fn);

  const startRunOnce = (
    mode: Mode,
    scheduledTime: string | undefined,
    onResult?: (r: StartResult) => void,
    tableFormat?: TableFormat,
    recoveryHandsOn?: boolean,
  ) =>
    lambda('start-run', LAMBDA_TIMEOUT_MS, async (actor) => {
      const result = await startRunHandler(world, actor, {
        mode,
        ...(scheduledTime ? { scheduledTime } : {}),
        ...(tableFormat ? { tableFormat } : {}),
        ...(recoveryHandsOn && { recoveryHandsOn }),
      });
      sim.log(actor, `start-run: ${result}`);
      onResult?.(result);
    });

  // EventBridge Scheduler: each scheduled time delivered once or twice; a failed or killed
  // invocation is retried twice (Lambda's asynchronous retries). What each invocation answered
  // is recorded for invariant 16 (liveness.ts).
  const scheduled: Array<{ time: string; mode: string; answers: ScheduledAnswer[] }> = [];
  const skips = new Map<Actor, string>();
  world.onSkipped = (actor, reason) => skips.set(actor, reason);
  const schedule = (start: Scenario['starts'][number]) => {
    const scheduledTime = new Date(start.at).toISOString();
    const answers: ScheduledAnswer[] = [];
    scheduled.push({ time: scheduledTime, mode: start.mode, answers });
    sim.spawn('invoker', 'schedule', { canCrash: false }, async (self) => {
      await sim.sleep(self, start.at - sim.now);
      const deliver = async () => {
        for (let attempt = 0; attempt < 3; attempt++) {
          const invocation: { actor?: Actor } = {};
          invocation.actor = startRunOnce(
            start.mode,
            scheduledTime,
            (answer) => {
              const actor = invocation.actor!;
              answers.push({
                actor,
                answer,
                t: sim.now,
                ...(skips.has(actor) && { detail: skips.get(actor) }),
              });
            },
            undefined,
            start.recoveryHandsOn,
          );
          const done = await sim.join(invocation.actor);
          if (done.result === 'ok') return;
          answers.push({
            actor: done,
            answer: done.result === 'crashed' ? 'crashed' : 'error',
            t: sim.now,
            detail: describe(done.error),
          });
          await sim.sleep(self, MINUTE * (attempt + 1));
        }
      };
      const again = async (delay: number) => {
        await sim.sleep(self, delay);
        await deliver();
      };
      if (start.duplicate === 'none') await deliver();
      else await Promise.all([deliver(), again(start.duplicate === 'together' ? 0 : start.duplicate)]);
    });
  };
  for (const start of scenario.starts) schedule(start);
  // Late closings meeting a newer run (`Scenario.lateClosings`): a scheduled start a little
  // after a finish-run handed a closing on, while faults are on.
  // after a finish-run handed a closing on, while faults are on: once the lock its run holds
  // has run out (a closing keeps its run's lock until the tombstone), so that the start's
  // recovery meets the closing open, hands it on and starts a newer run beside it.
  // Meanwhile finish-run stalls, until a few minutes after that start (its run drains).
  let lateStarts = scenario.lateClosings.starts;
  let nextLate = 0;
  let finishStalledUntil = 0;
  world.onHandedOn = () => {
    if (lateStarts === 0 || !sim.faultsOn || sim.now < nextLate) return;
    lateStarts--;
    const lock = s3.peek(STATE_KEYS.lock);
    const expires = lock
      ? Date.parse((JSON.parse(Buffer.from(lock).toString('utf8')) as LockRecord).expires_at)
      : 0;
    nextLate = Math.max(sim.now, expires) + scenario.lateClosings.afterMs;
    finishStalledUntil = nextLate + scenario.lateClosings.resumeAfterMs;
    schedule({ at: nextLate, mode: 'incremental', duplicate: 'none', recoveryHandsOn: true });
  };

  const machines = new SimMachines();
  monitor.sameMachine = (a, b) => machines.sameMachine(a, b);
  const cliOutcomes: CliOutcome[] = [];
  const cliOf = new Map<Actor, Scenario['clis'][number]>();
  // A process pause after a CLI's own tombstone, before its next call (cli-cases.ts).
  const pauseNext = new Map<Actor, number>();
  // An older run's committer paused at its swap while a newer run commits (commit-races.ts).
  let racer: CommitRacer | undefined;
  // A process pause while a CLI starts (cli-cases.ts): every call of the CLI waits until it
  // ends, its lock's renewals included; which runs were closed meanwhile is counted.
  const pausedUntil = new Map<Actor, number>();
  const startingRecordOf = new Map<Actor, string>();
  const startPauses: Array<{ run: string; from: number; until: number; closerDies: boolean }> = [];
  s3.pauseBefore = (actor, command, key, body) => {
    const until = pausedUntil.get(actor);
    if (until !== undefined && until > sim.now) return until - sim.now;
    const whileStarting = cliOf.get(actor)?.pauseWhileStartingMs;
    if (
      whileStarting !== undefined &&
      until === undefined &&
      sim.faultsOn &&
      command === 'PutObjectCommand' &&
      RUN_RECORD.test(key)
    ) {
      // Its first record is its `starting` one; the second, the whole record after its listing.
      const first = startingRecordOf.get(actor);
      if (first === undefined) startingRecordOf.set(actor, key);
      else if (first === key) {
        pausedUntil.set(actor, sim.now + whileStarting);
        startPauses.push({
          run: runOfKey(key)!,
          from: sim.now,
          until: sim.now + whileStarting,
          closerDies: cliOf.get(actor)?.closerDiesWhilePaused === true,
        });
        sim.log(actor, `process paused ${(whileStarting / 1000).toFixed(0)}s before ${command} ${key}`);
        return whileStarting;
      }
    }
    const pause = pauseNext.get(actor);
    if (pause === undefined) {
      const closerPause = closers.pauseBefore(actor, command, key);
      return closerPause > 0 ? closerPause : (racer?.pauseAt(actor, command, key, body) ?? 0);
    }
    pauseNext.delete(actor);
    sim.log(actor, `process paused ${(pause / 1000).toFixed(0)}s before ${command} ${key}`);
    return pause;
  };
  const finisherAtClosing = new Set<Actor>();
  const killedForRerun = new Set<Actor>();
  const paired = new Set<Actor>();
  s3.listeners.push((actor, op, key, body) => {
    const cli = cliOf.get(actor);
    if (!cli || op !== 'put' || !body) return;
    // A rerun right after a kill on the same machine: killed a moment after it took the lock.
    const rerun = cli.rerunAfterKill;
    if (key === STATE_KEYS.lock && rerun && sim.faultsOn && !killedForRerun.has(actor)) {
      if (Buffer.from(body).toString('utf8').includes('"released_at"')) return;
      killedForRerun.add(actor);
      const index = scenario.clis.indexOf(cli);
      sim.spawn('invoker', 'cli-rerun', { canCrash: false }, async (self) => {
        await sim.sleep(self, rerun.killAfterLockMs);
        sim.kill(actor, 'killed, its command typed again next');
        await sim.sleep(self, rerun.rerunAfterMs);
        const again = { ...cli, at: sim.now, waitForLockMs: 0, offsetMs: actor.offsetMs, rerunOf: index };
        launchCli({ ...again, rerunAfterKill: undefined, killAfterMs: undefined }, RERUN_PIDS + index);
      });
      return;
    }
    // A CLI pair on the two machines: another CLI a moment after this one took the lock.
    const pairAfter = cli.pairAfterLockMs;
    if (key === STATE_KEYS.lock && pairAfter !== undefined && sim.faultsOn && !paired.has(actor)) {
      if (Buffer.from(body).toString('utf8').includes('"released_at"')) return;
      paired.add(actor);
      const index = scenario.clis.indexOf(cli);
      sim.spawn('invoker', 'cli-pair', { canCrash: false }, async (self) => {
        await sim.sleep(self, pairAfter);
        const wide = scenario.skewMs > MINUTE && actor.offsetMs !== 0;
        launchCli(
          {
            ...cli,
            at: sim.now,
            waitForLockMs: 2 * MINUTE,
            machine: 1 - (cli.machine ?? 0),
            offsetMs: wide ? -actor.offsetMs : undefined,
            pairOf: index,
            pairAfterLockMs: undefined,
            rerunAfterKill: undefined,
            pauseAfterTombstoneMs: undefined,
            pauseWhileStartingMs: undefined,
            closerDiesWhilePaused: undefined,
            finisherAtClosingMs: undefined,
          },
          PAIR_PIDS + index,
        );
      });
      return;
    }
    const run = runOfKey(key);
    if (!run) return;
    if (key === STATE_KEYS.closed(run) && cli.pauseAfterTombstoneMs !== undefined && sim.faultsOn)
      pauseNext.set(actor, cli.pauseAfterTombstoneMs);
    const delay = cli.finisherAtClosingMs;
    if (key !== STATE_KEYS.closing(run) || delay === undefined || finisherAtClosing.has(actor)) return;
    if ('closed' in JSON.parse(Buffer.from(body).toString('utf8'))) return;
    finisherAtClosing.add(actor);
    sim.spawn('invoker', 'finish-at-cli-closing', { canCrash: false }, async (self) => {
      await sim.sleep(self, delay);
      finish();
    });
  });
  const launchCli = (cli: Scenario['clis'][number], index: number) => {
    const kill = cli.killAfterMs === undefined ? {} : { killAfterMs: cli.killAfterMs };
    sim.spawn('cli', 'cli', { offsetMs: cli.offsetMs ?? offset(), ...kill }, async (actor) => {
      cliOf.set(actor, cli);
      cliOutcomes.push({ actor, machine: cli.machine ?? 0 });
      if (cli.rerunOf !== undefined)
        sim.log(actor, `cli: the command of CLI run ${cli.rerunOf}, typed again after its kill`);
      if (cli.pairOf !== undefined)
        sim.log(actor, `cli: a pair of CLI run ${cli.pairOf}, on the other machine`);
      const process = machines.cli(index, actor, cli.machine ?? 0, cli.zombieWhenKilled ?? false);
      const summary = await cliRun(world, actor, cli, process);
      sim.log(actor, `cli: exited 0 ${summary.trim().split('\n')[0] ?? ''}`);
    });
  };
  for (const [index, cli] of scenario.clis.entries()) {
    sim.spawn('invoker', 'cli-launch', { canCrash: false }, async (self) => {
      await sim.sleep(self, cli.at - sim.now);
      launchCli(cli, index);
    });
  }

  // Another engine's changes to the Iceberg tables, racing the runs' commits: at random times,
  // and set off by an exporter's write to a table (a commit under way), within 120 ms.
  const others = new OtherEngine();
  const otherChange = (tables: () => string[], delayMs = 0, compactShare = scenario.others.compactShare) =>
    sim.spawn('other', 'other-engine', { offsetMs: offset() }, async (actor) => {
      if (delayMs > 0) await sim.sleep(actor, delayMs);
      const { storage } = depsFor(world, actor);
      await others.act(actor, storage, tables(), () => sim.now + actor.offsetMs, compactShare);
    });
  for (const at of scenario.others.at) {
    sim.spawn('invoker', 'other-engine-launch', { canCrash: false }, async (self) => {
      await sim.sleep(self, at - sim.now);
      otherChange(() => icebergTables(s3).tables);
    });
  }
  if (scenario.commitRaces) {
    // With another engine, a newer run's swap of `reports` in a pause sets off its compaction.
    const compact =
      scenario.others.at.length > 0
        ? (table: string) => otherChange(() => [table], sim.rng.int(0, 120), 1)
        : undefined;
    const commitRacer = new CommitRacer(sim, s3, scenario.commitRaces, world.glue !== undefined, compact);
    racer = commitRacer;
    s3.listeners.push((actor, op, key, body) => {
      if (op === 'put') commitRacer.written(actor, key, body);
    });
  }
  let triggers = scenario.others.triggered;
  const lastTrigger = scenario.horizon + scenario.settings.deadlineMs;
  s3.listeners.push((actor, op, key) => {
    const table = /^iceberg\/([^/]+)\/(?:data|metadata)\/.*\.(?:parquet|avro)$/.exec(key)?.[1];
    if (op !== 'put' || !table || actor.kind === 'other' || triggers === 0 || sim.now > lastTrigger) return;
    // A table that exists already (the exporter's first commit of it has nothing to race).
    if (!s3.peek(`iceberg/${table}/metadata/v1.metadata.json`) || !sim.rng.chance(0.2)) return;
    triggers--;
    otherChange(() => [table], sim.rng.int(0, 120));
  });

  for (const at of scenario.redriveAt) {
    sim.spawn('redrive', 'redrive', { canCrash: false }, async (self) => {
      await sim.sleep(self, at - sim.now);
      const moved = world.planQueue.redrive() + world.reportQueue.redrive();
      sim.log(self, `redrove ${moved} dead letters`);
    });
  }

  // finish-run's invocation: its timeout, or a time up at once when the scenario makes a
  // closing outlast an invocation (the handler's own limits follow from its remaining time).
  const finish = (wholeTime = false) => {
    const limits = {
      timeoutMs: FINISH_TIMEOUT_MS,
      timeUp: !wholeTime && sim.faultsOn && sim.rng.chance(scenario.finishHandsOn),
    };
    return lambda('finish', limits.timeUp ? FINISH_TIME_UP_MS : FINISH_TIMEOUT_MS, (actor) =>
      finishHandler(world, actor, limits),
    );
  };
  const closers = new Closers(sim, s3, monitor, scenario.closers, finish);
  // A closer of a run whose CLI is paused before its whole record dies right after the run's
  // tombstone (cli-cases.ts `closerDiesWhilePaused`): the records it leaves are the run's to sweep.
  const diedClosing = new Set<string>();
  s3.crashAfter = (actor, command, key) => {
    if (closers.crashAfter(actor, command, key)) return true;
    const run = runOfKey(key);
    if (run === undefined || command !== 'PutObjectCommand' || key !== STATE_KEYS.closed(run)) return false;
    if (diedClosing.has(run) || cliOf.has(actor)) return false;
    const paused = startPauses.find((p) => p.run === run && p.from <= sim.now && sim.now < p.until);
    if (!paused?.closerDies) return false;
    diedClosing.add(run);
    return true;
  };

  const startTicks = () =>
    sim.spawn('driver', 'finish-schedule', { canCrash: false }, async (self) => {
      await sim.sleep(self, sim.rng.int(0, FINISH_EVERY_MS));
      let stalledBefore = false;
      while (!stop.ticks) {
        const stalled = sim.now < finishStalledUntil || closers.finishStalled;
        if (!stalled) finish();
        // Resumed after a stall: two invocations at once (the backlog's), which take the
        // closings waiting each under its own lease, side by side.
        if (stalledBefore && !stalled) finish();
        stalledBefore = stalled;
        if (sim.faultsOn && sim.rng.chance(scenario.finishOverlap)) {
          await sim.sleep(self, sim.rng.int(0, scenario.finishOverlapWithinMs));
          if (!stalled) finish();
        }
        await sim.sleep(self, FINISH_EVERY_MS);
      }
    });

  // Plan deliveries duplicated whose campaign's listing changes between them (`drawRefusals`).
  const planChangeShare = scenario.refusals.planListingChanges;
  const planChanges = planChangeShare > 0 ? new Prng(seed).stream('plan-listing-change-calls') : undefined;
  const startPoller = (
    queue: SimQueue,
    concurrency: number,
    handler: typeof planHandler,
    kind: 'plan' | 'unit',
  ) =>
    sim.spawn('poller', `${queue.name}-poller`, { canCrash: false }, async (self) => {
      const active = new Set<Actor>();
      while (!stop.pollers) {
        await queue.nextWork(self);
        if (stop.pollers) break;
        for (const a of active) if (!a.alive) active.delete(a);
        const room = concurrency - active.size;
        if (room <= 0) continue;
        for (const delivery of queue.receive(room)) {
          const spawn = (d: Delivery) =>
            active.add(
              lambda(
                kind,
                LAMBDA_TIMEOUT_MS,
                (actor) => handler(world, actor, d, LAMBDA_TIMEOUT_MS),
                d.message.body.run_id,
              ),
            );
          spawn(delivery);
          if (sim.faultsOn && sim.rng.chance(scenario.duplicateDelivery)) {
            // Two deliveries of one plan at once whose listings differ (`drawRefusals`).
            const campaign = (delivery.message.body as { campaign_id?: unknown }).campaign_id;
            if (kind === 'plan' && typeof campaign === 'number' && planChanges?.chance(planChangeShare)) {
              world.api.changeAfterListing.add(campaign);
            }
            spawn(delivery);
          }
        }
      }
    });

  const startConsumers = () => {
    startTicks();
    startPoller(world.planQueue, scenario.concurrency.plan, planHandler, 'plan');
    startPoller(world.reportQueue, scenario.concurrency.report, unitHandler, 'unit');
  };
  const stopConsumers = async (): Promise<boolean> => {
    stop.ticks = true;
    stop.pollers = true;
    world.planQueue.wake();
    world.reportQueue.wake();
    await sim.runUntil(() => sim.steps > MAX_STEPS);
    stop.ticks = false;
    stop.pollers = false;
    return sim.steps <= MAX_STEPS;
  };

  // Phase 1: faults, until the horizon.
  startConsumers();
  await sim.runUntil(() => sim.now >= scenario.horizon || sim.steps > MAX_STEPS);
  // Phase 2: no faults, no new work, until quiescence: nothing at work but the pollers and
  // finish-run's schedule, no message left, every started run closed; at the latest when every
  // deadline and lease has long passed.
  sim.faultsOn = false;
  const settled = scenario.horizon + scenario.settings.deadlineMs + 25 * MINUTE;
  const quiet = () =>
    sim.now >= scenario.horizon &&
    [...sim.live].every((a) => a.kind === 'poller' || a.kind === 'driver') &&
    world.planQueue.inQueue() + world.reportQueue.inQueue() === 0 &&
    monitor.noOpenRun();
  await sim.runUntil(() => sim.now >= settled || sim.steps > MAX_STEPS || quiet());
  let quiesced = sim.steps <= MAX_STEPS;
  const quiescence = sim.now;

  // Phase 3: the final start-run, right after quiescence (after a holder that never recorded
  // its run, once the lock's rules free it), must get the lock.
  let finalResult: StartResult | 'crashed' | 'error' | undefined;
  let finalAt: number | undefined;
  let finalStartedAt: number | undefined;
  // The closed runs' folders as the final start's recovery left them (liveness.ts, 20).
  let runKeysAfterFinal: string[] = [];
  if (quiesced) {
    sim.log('sim', 'quiescence: the final start-run comes next');
    sim.spawn('invoker', 'final', { canCrash: false }, async (self) => {
      await sim.sleep(self, monitor.lockFreeFrom(sim.now) - sim.now);
      finalAt = sim.now;
      // In the format the output holds (after a switch, the one deployed for it).
      const actor = startRunOnce(
        'incremental',
        undefined,
        (r) => {
          finalResult = r;
          runKeysAfterFinal = s3.keys(`${STATE_ROOT}/runs/`);
          closers.finishStalled = false;
        },
        recordedFormat(s3),
      );
      const done = await sim.join(actor);
      closers.finishStalled = false;
      if (done.result !== 'ok') {
        finalResult = done.result === 'crashed' ? 'crashed' : 'error';
        sim.log(self, `final start-run ended: ${describe(done.error)}`);
      }
      // A start whose API answered fatally holds the lock too (it records its run, failed).
      if (finalResult === 'started' || finalResult === 'failed') finalStartedAt = finalAt;
    });
    const finalEnd = monitor.lockFreeFrom(sim.now) + scenario.settings.deadlineMs + 25 * MINUTE;
    await sim.runUntil(() => sim.now >= finalEnd || sim.steps > MAX_STEPS);
  }
  quiesced = (await stopConsumers()) && quiesced;
  await monitor.settle();
  monitor.finish();

  if (!quiesced) {
    monitor.violate('0 quiescence', `the simulation did not quiesce within ${MAX_STEPS} steps`, []);
  } else if (finalStartedAt === undefined) {
    monitor.violate(
      '18 the lock is freed by its rules',
      `the final start-run, at T+${(((finalAt ?? sim.now) - EPOCH) / 1000).toFixed(0)}s (quiescence at T+${((quiescence - EPOCH) / 1000).toFixed(0)}s), ended ${finalResult ?? 'without an answer'}: ${await whyHeld(s3, monitor, finalAt ?? sim.now)}`,
      monitor.current ? [monitor.current.run] : [],
    );
  }
  const unitDeadline = {
    ...world.unitDeadlines.check(world.reportQueue, monitor),
    waitedForFetcher: world.fetcherSlots.cases.waited,
    fetcherLost: world.fetcherSlots.cases.lost,
    fetcherOpen: world.fetcherSlots.cases.open,
  };
  for (const problem of world.budget.check()) monitor.violate(BUDGET_INVARIANT, problem, []);
  await checkInvariants(s3, world.api, monitor, world.announcer, others.committed);
  const cliRefusals = checkCliRefusals(s3, monitor, machines, cliOutcomes);
  checkLiveness({
    s3,
    monitor,
    scheduled,
    deadlineMs: scenario.settings.deadlineMs,
    faultsEnd: scenario.horizon,
    finalStartedAt,
    runKeysAfterFinal,
  });
  return {
    seed,
    violations: monitor.violations,
    trace: sim.trace,
    scenario,
    steps: sim.steps,
    runsStarted: monitor.started.size,
    manifests: s3.keys('runs/').length,
    iceberg: {
      ...icebergCases(s3.events),
      lateCommits: lateRuns(s3),
      ...others.cases,
      commitsAfterCompaction: commitsAfterCompaction(s3),
    },
    unitDeadline,
    formatSwitch: formatSwitchCases(s3, monitor),
    glue: world.glue?.cases ?? noGlueCases(),
    budget: {
      ...dynamo.cases,
      grants: world.budget.grants.length,
      fallbacks: world.budget.fallbackFrom.size,
      peakShare: world.budget.peakShare(),
      racesAtCeiling: world.budget.racesAtCeiling(),
    },
    commitRaces: racer ? racer.met(s3) : noCommitRaceCases(),
    lock: {
      holdersGone: machines.judgedGone,
      cliRefusals,
      cliReruns: killedForRerun.size,
      cliPairs: paired.size,
      storageClockReads: s3.events.filter(
        (e) => e.op === 'put' && e.key === STATE_KEYS.lockClock && e.result === 'ok',
      ).length,
    },
    excuses: { ...monitor.excuses },
    closers: closers.cases,
    refused: {
      manifestConflicts: s3.manifestConflicts?.met ?? 0,
      planListingChanges: world.api.listingChanges,
      startsPaused: startPauses.length,
      startsClosedWhilePaused: startPauses.filter(({ run, from, until }) => {
        const closed = monitor.closedAt.get(run)?.t;
        return closed !== undefined && closed >= from && closed < until;
      }).length,
      closersDiedWhilePaused: diedClosing.size,
    },
  };
}

/** Which holder the code saw holding the lock at `t`, and what the bucket says of its run. */
async function whyHeld(s3: SimS3, monitor: Monitor, t: number): Promise<string> {
  const held = await codeSeesHolder(s3, t, FIRST_RECORD_GRACE_MS);
  if (!held) return 'the code sees the lock free now';
  const run = held.run_id;
  const holding = monitor.holdings.findLast((h) => h.run === run);
  const facts = [
    monitor.closedAt.has(run) ? 'closed' : 'not closed',
    monitor.started.has(run) ? 'recorded' : 'never recorded',
    monitor.alive(run) ? 'something still acts for it' : 'nothing acts for it',
  ];
  return `run ${run} (${held.owner}${holding ? `, taken by ${holding.holder.name}` : ''}) held it since ${held.acquired_at} until ${held.expires_at}${held.released_at ? '' : ', not released'}; the run is ${facts.join(', ')}`;
}
