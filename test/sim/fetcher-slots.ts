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
  /** Per actor, its looks since its last take: the item it saw lapsed by its own clock, per slot. */
  /** Told when a delivery breaks 24 (scenario.ts reports it as the monitor's violation). */
  onViolation: ((message: string) => void) | undefined;
  readonly #lapsedSeen = new Map<Actor, Map<number, { holder: string; until: number }>>();

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

  /**
   * 24 a lapsed fetcher slot is taken: a delivery that waits for a slot (every slot busy) must
   * not leave untaken a slot whose item it saw lapsed, by its own clock, when it looked (a
   * holder that crashed, timed out or failed to release: fetcher-slots.ts, "taken when absent,
   * lapsed or the taker's"). A slot taken by another meanwhile is no violation (the item is
   * then not the one it saw). Returns what breaks it, if anything; the looks are forgotten.
   */
  lapsedLeft(actor: Actor): string | undefined {
    const seen = this.#lapsedSeen.get(actor);
    this.#lapsedSeen.delete(actor);
    for (const [slot, item] of seen ?? []) {
      if (this.items.get(slot) !== item) continue;
      return `${actor.name} waited for a fetcher slot while slot ${slot}, held by ${item.holder} until ${new Date(item.until).toISOString()} (lapsed by its clock when it looked), stood untaken`;
    }
    return undefined;
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
          const seen = this.#lapsedSeen.get(actor) ?? new Map<number, { holder: string; until: number }>();
          this.#lapsedSeen.set(actor, seen);
          if (item && item.until < this.sim.now + actor.offsetMs) seen.set(slot, item);
          else seen.delete(slot);
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
