/**
 * The fetcher slots (shared/api/fetcher-slots.ts) as export-reports meets them in DynamoDB: a
 * slot per item, taken when absent, lapsed or the taker's, deleted by its holder only. Per call:
 * the caller dies before or after it (the storage's crash rate: a holder that dies keeps its
 * item until it lapses), or the table fails (the invocation then fetches: fail open).
 */
import type { FetcherSlotStore } from '../../shared/api/fetcher-slots.js';
import { FETCHER_LEASE_MS } from '../../shared/api/fetcher-slots.js';
import type { Actor, Sim } from './scheduler.js';

/** Calls that fail (a 500 after the SDK's retries), while faults are on. */
const TABLE_FAILS = 0.03;
/** Calls that take longer than a lease, while faults are on. */
const STALLS = 0.03;

/** How often the cases were met, for the checks' counts. */
export interface FetcherSlotCases {
  /** Deliveries handed on to wait because every slot was taken. */
  waited: number;
  /** Holders that found their slot taken by another at a renewal (they outlived their lease). */
  lost: number;
  /** Invocations that fetched without a slot because the table failed. */
  open: number;
}

export class SimFetcherSlots {
  readonly items = new Map<number, { holder: string; until: number }>();
  readonly cases: FetcherSlotCases = { waited: 0, lost: 0, open: 0 };

  constructor(
    private readonly sim: Sim,
    /** Per call: the caller dies before or after it. */
    private readonly crashRate: number,
  ) {}

  #delay(): number {
    if (this.sim.faultsOn && this.sim.rng.chance(STALLS))
      return this.sim.rng.int(FETCHER_LEASE_MS, 2 * FETCHER_LEASE_MS);
    return this.sim.rng.int(3, 20);
  }

  /** The store as `actor` calls it. */
  for(actor: Actor): FetcherSlotStore {
    const op = <T>(label: string, apply: () => T): Promise<T> =>
      this.sim.call(actor, this.#delay(), `fetcher ${label}`, (control) => {
        const faulty = this.sim.faultsOn && actor.canCrash;
        if (faulty && this.sim.rng.chance(this.crashRate / 2)) {
          control.kill(`before fetcher ${label}`);
          return undefined as T;
        }
        if (this.sim.faultsOn && this.sim.rng.chance(TABLE_FAILS))
          throw new Error('fetcher slot table failed (500)');
        const value = apply();
        if (faulty && this.sim.rng.chance(this.crashRate / 2)) control.kill(`after fetcher ${label}`);
        return value;
      });
    return {
      holderOf: (slot) =>
        op(`look ${slot}`, () => {
          const item = this.items.get(slot);
          return item && { ...item };
        }),
      take: (slot, holder, until, now) =>
        op(`take ${slot}`, () => {
          const item = this.items.get(slot);
          if (item && item.until >= now && item.holder !== holder) return false;
          this.items.set(slot, { holder, until });
          return true;
        }),
      release: (slot, holder) =>
        op(`release ${slot}`, () => {
          if (this.items.get(slot)?.holder === holder) this.items.delete(slot);
        }),
    };
  }
}
