/**
 * The deployment's request budget in the simulation: every export-reports invocation is a
 * container with its own limiter, built as functions/aws/request-budget.ts `containerLimiter`
 * builds it (the real `DynamoBudgetStore`, `SharedBudget` and `BudgetLimiter`, the fallback an
 * `AdaptiveRateLimiter` at `fallbackRate`), over the simulated DynamoDB table (dynamo.ts), on
 * the container's clock: virtual time plus its skew. Its requests go through it (under the real
 * `limiterUntil`), so containers lease from one item through lost answers, conflicts, throttling
 * and clocks apart.
 *
 * Invariant 16, the budget holds (checked after quiescence, from the grants the simulation saw,
 * on virtual time):
 * - the ceiling: in every window of WINDOW_MS, the requests granted to all containers together
 *   are at most what the rules of shared/api/request-budget.ts allow:
 *     leasingCeiling × W                      (the leasers share the ceiling less the headroom)
 *     + fallbackRate × W per container that was in fallback in the window (its table failed:
 *       it keeps to its share of the headroom, FALLBACK_HEADROOM of the ceiling shared by the
 *       API_CONTAINERS − 1 others), plus its own limiter's first second (it starts at that rate)
 *     + one lease slice and MAX_QUEUE_MS of slots at the ceiling per jump of the item's time,
 *       plus BURST_MS of them: where a faster clock first writes, the slots leased just before
 *       may overlap the first lease after the jump (once per jump). A jump is read from the
 *       item's writes (dynamo.ts `budgetWrites`): a write that moved its stamp further than
 *       virtual time moved (a faster clock), or set its `tat` back (a repair of times written
 *       by a clock beyond MAX_SKEW_MS ahead: each such repair is a jump);
 *   with the ceiling taken at leasingCeiling (the rate never grows past it: no 429 reaches the
 *   simulated limiters, so the shared rate never falls either);
 * - the wait: no caller waits longer than its bound: MAX_QUEUE_MS and a slice at the lowest rate
 *   (`maxGrantWaitMs`), once per caller ahead of it in its container, plus the time its
 *   container's store calls took meanwhile (the store's answers, slow or not, are not the
 *   item's doing), or the fallback's wait at its own rate; plus a slot at the leasers' ceiling
 *   per request granted to another leasing container while it waited (several containers
 *   with callers beyond what the rate serves: theirs are ahead too, and the schedule serves
 *   them first, in no order of asking). A wait the item makes for nothing (a time no honest
 *   writer wrote) is still beyond the bound: nobody else is granted meanwhile.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoBudgetStore } from '../../functions/aws/request-budget.js';
import { BudgetLimiter } from '../../shared/api/budget-limiter.js';
import { AdaptiveRateLimiter, type RateLimiter, type Release } from '../../shared/api/limiter.js';
import {
  type BudgetPolicy,
  fallbackRate,
  leasingCeiling,
  MAX_QUEUE_MS,
  maxGrantWaitMs,
  SharedBudget,
  STEADY_LEASE_MS,
} from '../../shared/api/request-budget.js';
import type { SimDynamo } from './dynamo.js';
import type { Actor, Sim } from './scheduler.js';

/** The table functions/aws/env.ts names REQUEST_BUDGET_TABLE, and the deployment's stage. */
export const BUDGET_TABLE = 'sim-request-budget';
export const STAGE = 'sim';
/** The window of invariant 21's ceiling. */
const WINDOW_MS = 5_000;
/** request-budget.ts BURST_MS (not exported): an idle deployment may spend this much at once. */
const BURST_MS = 100;
/** The item's stamp moving this much further than virtual time is not a jump (latency of the writes). */
const JUMP_TOLERANCE_MS = 100;
/** Slots leased before a jump are spent at most this long after it (MAX_QUEUE_MS and a slice at the ceiling, and their grace). */
const JUMP_REACH_MS = MAX_QUEUE_MS + STEADY_LEASE_MS + 100;

/** The deployment's settings the budget reads (functions/aws/env.ts). */
export interface BudgetSettings {
  /** RATE_CEILING, req/s for all containers together. */
  ceiling: number;
  /** API_CONTAINERS: the most containers that call the API at once. */
  containers: number;
  /** Containers' clocks (for the budget) are off by up to ± this beyond the seed's skew. */
  skewMs: number;
}

interface Grant {
  at: number;
  container: Actor;
  waitedMs: number;
  boundMs: number;
}

/** The budget's facts in one seed: grants, waits, store time and fallbacks per container. */
export class SimBudget {
  readonly grants: Grant[] = [];
  /** Per container: when its store first failed (it then keeps to its fallback share). */
  readonly fallbackFrom = new Map<Actor, number>();
  /** Per container: its clock offset, and when it first leased. */
  readonly clocks = new Map<Actor, { offsetMs: number; firstAt: number }>();
  /** Per container: the store calls' time so far, ms. */
  readonly storeMs = new Map<Actor, number>();
  readonly policy: BudgetPolicy;

  constructor(
    private readonly sim: Sim,
    private readonly dynamo: SimDynamo,
    readonly settings: BudgetSettings,
  ) {
    this.policy = { ceiling: settings.ceiling, containers: settings.containers };
  }

  /**
   * A container's clock offset: the seed's skew for the actor, and beyond it a share of the
   * budget's own skew (from the actor's id: no draw, so other seeds' choices stay).
   */
  offsetOf(actor: Actor): number {
    const share = ((actor.id * 7919) % 11) / 5 - 1; // -1 .. 1 in steps of 0.2
    return actor.offsetMs + Math.round(share * this.settings.skewMs);
  }

  /** functions/aws/request-budget.ts `containerLimiter` for `actor`, on its clock and the simulated table. */
  limiterFor(actor: Actor): RateLimiter {
    const offsetMs = this.offsetOf(actor);
    const clock = {
      now: () => this.sim.now,
      wallNow: () => this.sim.now + offsetMs,
      sleep: (ms: number, signal?: AbortSignal) =>
        signal
          ? Promise.race([
              this.sim.sleep(actor, ms, 'budget wait'),
              new Promise<void>((resolve) =>
                signal.addEventListener('abort', () => resolve(), { once: true }),
              ),
            ])
          : this.sim.sleep(actor, ms, 'budget wait'),
    };
    const client = this.dynamo.clientFor(actor, offsetMs) as { send: (c: unknown) => Promise<unknown> };
    const timed = {
      send: async (command: unknown) => {
        const from = this.sim.now;
        try {
          return await client.send(command);
        } finally {
          this.storeMs.set(actor, (this.storeMs.get(actor) ?? 0) + this.sim.now - from);
        }
      },
    } as unknown as DynamoDBClient;
    const store = new DynamoBudgetStore({ tableName: BUDGET_TABLE, stage: STAGE, client: async () => timed });
    const concurrency = 8;
    const share = fallbackRate(this.policy);
    const limiter = new BudgetLimiter({
      budget: new SharedBudget(store, this.policy, { clock, random: actor.rng.fn }),
      fallback: () => new AdaptiveRateLimiter({ maxRate: share, concurrency, clock }),
      concurrency,
      clock,
      onStoreError: () => {
        if (!this.fallbackFrom.has(actor)) this.fallbackFrom.set(actor, this.sim.now);
      },
    });
    return this.#watched(actor, limiter, offsetMs);
  }

  /** `inner`, each grant recorded with its wait and its bound. */
  #watched(actor: Actor, inner: RateLimiter, offsetMs: number): RateLimiter {
    let waiting = 0;
    return {
      acquire: async (maxWaitMs?: number): Promise<Release> => {
        const askedAt = this.sim.now;
        const ahead = waiting++;
        const storeBefore = this.storeMs.get(actor) ?? 0;
        try {
          const release = await inner.acquire(maxWaitMs);
          if (!this.clocks.has(actor)) this.clocks.set(actor, { offsetMs, firstAt: this.sim.now });
          const storeMs = (this.storeMs.get(actor) ?? 0) - storeBefore;
          const perCaller = this.fallbackFrom.has(actor)
            ? Math.max(maxGrantWaitMs(this.policy), 1000 / fallbackRate(this.policy))
            : maxGrantWaitMs(this.policy);
          const othersMs = (this.#leasedByOthersSince(actor, askedAt) * 1000) / leasingCeiling(this.policy);
          if (this.sim.traceOn)
            this.sim.log(actor, `budget: request granted after ${this.sim.now - askedAt} ms`);
          this.grants.push({
            at: this.sim.now,
            container: actor,
            waitedMs: this.sim.now - askedAt,
            boundMs: (ahead + 1) * perCaller + storeMs + othersMs,
          });
          return release;
        } finally {
          waiting--;
        }
      },
      onSuccess: (info, sentAt) => inner.onSuccess(info, sentAt),
      onThrottle: (retryAfterMs, info, sentAt) => inner.onThrottle(retryAfterMs, info, sentAt),
      currentRate: () => inner.currentRate(),
    };
  }

  /**
   * Requests granted since `from` to containers other than `actor` that were leasing (not in
   * fallback: a fallback's grants take no slot of the schedule).
   */
  #leasedByOthersSince(actor: Actor, from: number): number {
    let count = 0;
    for (let i = this.grants.length - 1; i >= 0 && this.grants[i]!.at >= from; i--) {
      const { at, container } = this.grants[i]!;
      const fellBack = this.fallbackFrom.get(container);
      if (container !== actor && (fellBack === undefined || at < fellBack)) count++;
    }
    return count;
  }

  /** Invariant 16's violations, as messages (empty: the budget held). */
  check(): string[] {
    const problems: string[] = [];
    for (const g of this.grants) {
      if (g.waitedMs > g.boundMs) {
        problems.push(
          `${g.container.name} waited ${g.waitedMs} ms for a request at T+${((g.at - this.sim.epoch) / 1000).toFixed(1)}s (bound ${g.boundMs} ms)`,
        );
        break;
      }
    }
    const rate = leasingCeiling(this.policy);
    const share = fallbackRate(this.policy);
    const jumpSlots = ((STEADY_LEASE_MS + MAX_QUEUE_MS) * this.settings.ceiling) / 1000;
    const burst = Math.ceil((BURST_MS * this.settings.ceiling) / 1000) + 1;
    // Jumps of the item's time, from the item's writes: its stamp moved further than virtual time
    // did (a faster clock wrote), or its `tat` went back (a repair of times no honest writer could
    // have written: a clock beyond MAX_SKEW_MS ahead wrote them).
    const jumps = this.dynamo.budgetWrites
      .filter(
        ({ at, before, after }) =>
          before !== undefined &&
          (after.grownAt - before.grownAt > at - before.at + JUMP_TOLERANCE_MS || after.tat < before.tat),
      )
      .map(({ at }) => at);
    const grants = [...this.grants].sort((a, b) => a.at - b.at);
    let end = 0;
    for (let start = 0; start < grants.length; start++) {
      const from = grants[start]!.at;
      while (end < grants.length && grants[end]!.at < from + WINDOW_MS) end++;
      const sent = end - start;
      const inFallback = [...this.fallbackFrom.values()].filter((t) => t < from + WINDOW_MS).length;
      const jumped = jumps.filter((t) => t >= from - JUMP_REACH_MS && t < from + WINDOW_MS).length;
      const allowed =
        (rate * WINDOW_MS) / 1000 +
        burst +
        inFallback * (share * (WINDOW_MS / 1000 + 1)) +
        jumped * jumpSlots;
      if (sent > allowed) {
        problems.push(
          `${sent} requests granted in the ${WINDOW_MS / 1000}s from T+${((from - this.sim.epoch) / 1000).toFixed(1)}s, ` +
            `above the ${allowed.toFixed(1)} the budget allows (${rate.toFixed(2)} req/s leased, ${inFallback} container(s) in fallback at ${share.toFixed(2)} req/s, ${jumped} clock jump(s))`,
        );
        break;
      }
    }
    return problems;
  }

  /**
   * Budget writes lost to a write that booked the schedule past MAX_QUEUE_MS (dynamo.ts
   * `lostToBooked`) in a backlog at the ceiling: the grants of the WINDOW_MS from the loss
   * reach the leasers' ceiling. Where two containers could take the same slots, were a lost
   * write's lease kept; elsewhere the extra requests have room under the ceiling.
   */
  racesAtCeiling(): number {
    const full = Math.floor((leasingCeiling(this.policy) * WINDOW_MS) / 1000);
    const times = this.grants.map((g) => g.at);
    return this.dynamo.budgetRacesLost.filter(
      (t) => times.filter((at) => at >= t && at < t + WINDOW_MS).length >= full,
    ).length;
  }

  /** The most requests granted in any window, per second of the window, over the ceiling (for the summary). */
  peakShare(): number {
    const times = this.grants.map((g) => g.at).sort((a, b) => a - b);
    let end = 0;
    let peak = 0;
    for (let start = 0; start < times.length; start++) {
      while (end < times.length && times[end]! < times[start]! + WINDOW_MS) end++;
      peak = Math.max(peak, end - start);
    }
    return peak / ((this.settings.ceiling * WINDOW_MS) / 1000);
  }
}
