/**
 * The fetcher slots on a local DynamoDB (dynalite over HTTP): one holder per slot, a lease that
 * lapses after a crash, a holder that outlives its lease and loses the slot, and a table that
 * fails (open: the invocation fetches).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoFetcherSlots } from '../../../functions/aws/fetcher-slots.js';
import {
  FETCHER_LEASE_MS,
  FETCHER_RENEW_MS,
  type FetcherHold,
  takeFetcher,
} from '../../../shared/api/fetcher-slots.js';
import { type LocalDynamo, startDynalite } from '../../helpers/dynalite.js';

const TABLE = 'fetcher-slots';

/** A wall clock moved by hand; sleeps resolve as it passes them (or when aborted). */
function manualClock(start = 1_000_000) {
  let now = start;
  const sleepers: { at: number; wake: () => void }[] = [];
  return {
    wallNow: () => now,
    sleep: (ms: number, signal?: AbortSignal) =>
      new Promise<void>((resolve) => {
        sleepers.push({ at: now + ms, wake: resolve });
        signal?.addEventListener('abort', () => resolve(), { once: true });
      }),
    /** Moves the clock and lets due sleepers (and what they await) run. */
    async advance(ms: number) {
      now += ms;
      for (const s of sleepers.splice(0)) {
        if (s.at <= now) s.wake();
        else sleepers.push(s);
      }
      // The renewal's write goes to dynalite over HTTP: wait for it.
      await new Promise((r) => setTimeout(r, 100));
    },
  };
}

describe('fetcher slots on DynamoDB', () => {
  let dynamo: LocalDynamo;

  beforeAll(async () => {
    dynamo = await startDynalite();
    await dynamo.createBudgetTable(TABLE);
  });

  afterAll(async () => {
    await dynamo?.close();
  });

  const store = (stage: string, table = TABLE) =>
    new DynamoFetcherSlots({ tableName: table, stage, client: async () => dynamo.client() });

  const held = (hold: FetcherHold) => {
    if (hold.kind !== 'held') throw new Error(`expected a held slot, got ${hold.kind}`);
    return hold;
  };

  it('lets one invocation hold a slot at a time, and the next take it once released', async () => {
    const clock = manualClock();
    const slots = store('one');
    const a = held(await takeFetcher(slots, { slots: 1, holder: 'a', clock }));

    expect((await takeFetcher(slots, { slots: 1, holder: 'b', clock })).kind).toBe('busy');
    await a.release();
    const b = held(await takeFetcher(slots, { slots: 1, holder: 'b', clock }));
    expect(b.slot).toBe(0);
    await b.release();
  });

  it('finds a held slot busy by a read, without the conditional write a busy invocation would pay for', async () => {
    const clock = manualClock();
    const client = dynamo.client();
    const commands: string[] = [];
    client.middlewareStack.add(
      (next, context) => (args) => {
        commands.push(context.commandName ?? '?');
        return next(args);
      },
      { step: 'initialize' },
    );
    const slots = new DynamoFetcherSlots({ tableName: TABLE, stage: 'look', client: async () => client });
    const a = held(await takeFetcher(slots, { slots: 1, holder: 'a', clock }));
    expect(commands).toEqual(['GetItemCommand', 'PutItemCommand']);

    commands.length = 0;
    expect((await takeFetcher(slots, { slots: 1, holder: 'b', clock })).kind).toBe('busy');
    expect(commands).toEqual(['GetItemCommand']);
    await a.release();
  });

  it('gives each of `slots` holders a slot of its own, and the next one none', async () => {
    const clock = manualClock();
    const slots = store('three');
    const holds = [];
    for (const holder of ['a', 'b', 'c'])
      holds.push(held(await takeFetcher(slots, { slots: 3, holder, clock })));

    expect(new Set(holds.map((h) => h.slot))).toEqual(new Set([0, 1, 2]));
    expect((await takeFetcher(slots, { slots: 3, holder: 'd', clock })).kind).toBe('busy');
    for (const h of holds) await h.release();
  });

  it('lets a crashed holder’s slot lapse after its lease, not before', async () => {
    const clock = manualClock();
    const slots = store('crash');
    // Taken and never renewed nor released: the invocation died.
    expect(await slots.take(0, 'dead', clock.wallNow() + FETCHER_LEASE_MS, clock.wallNow())).toBe(true);

    await clock.advance(FETCHER_LEASE_MS - 1_000);
    expect((await takeFetcher(slots, { slots: 1, holder: 'b', clock })).kind).toBe('busy');
    await clock.advance(2_000);
    const b = held(await takeFetcher(slots, { slots: 1, holder: 'b', clock }));
    await b.release();
  });

  it('renews the slot while the holder works, so that it does not lapse', async () => {
    const clock = manualClock();
    const slots = store('renew');
    const a = held(await takeFetcher(slots, { slots: 1, holder: 'a', clock }));

    // Three leases long, renewed every FETCHER_RENEW_MS.
    for (let t = 0; t < 3 * FETCHER_LEASE_MS; t += FETCHER_RENEW_MS) await clock.advance(FETCHER_RENEW_MS);
    expect((await takeFetcher(slots, { slots: 1, holder: 'b', clock })).kind).toBe('busy');
    expect(a.lost()).toBe(false);
    await a.release();
  });

  it('tells a holder that outlived its lease that it lost the slot, and its release leaves the new holder’s item', async () => {
    const clock = manualClock();
    const slots = store('outlived');
    // a's renewals do not get through for a while (the table throttles it, or it is frozen).
    let failing = false;
    const errors: string[] = [];
    const flaky = {
      holderOf: (slot: number) => slots.holderOf(slot),
      take: (...args: Parameters<typeof slots.take>) =>
        failing ? Promise.reject(new Error('throttled')) : slots.take(...args),
      release: (...args: Parameters<typeof slots.release>) => slots.release(...args),
    };
    const a = held(
      await takeFetcher(flaky, {
        slots: 1,
        holder: 'a',
        clock,
        onStoreError: (_, during) => errors.push(during),
      }),
    );
    failing = true;
    for (let t = 0; t < FETCHER_LEASE_MS; t += FETCHER_RENEW_MS) await clock.advance(FETCHER_RENEW_MS);
    await clock.advance(1_000);
    // Its lease has lapsed: b takes the slot, and a still believes it holds it.
    const b = held(await takeFetcher(slots, { slots: 1, holder: 'b', clock }));
    expect(a.lost()).toBe(false);
    expect(errors).toEqual(['renew', 'renew', 'renew']);

    failing = false;
    await clock.advance(FETCHER_RENEW_MS);
    expect(a.lost()).toBe(true);
    await a.release();
    // a's release deleted nothing of b's.
    expect((await takeFetcher(slots, { slots: 1, holder: 'c', clock })).kind).toBe('busy');
    expect(b.lost()).toBe(false);
    await b.release();
    await held(await takeFetcher(slots, { slots: 1, holder: 'c', clock })).release();
  });

  it('fails open when the table fails: the invocation fetches, and says so', async () => {
    const clock = manualClock();
    const errors: string[] = [];
    const hold = await takeFetcher(store('missing', 'no-such-table'), {
      slots: 1,
      holder: 'a',
      clock,
      onStoreError: (error, during) => errors.push(`${during}: ${(error as Error).name}`),
    });

    expect(hold.kind).toBe('open');
    expect(errors).toEqual(['take: ResourceNotFoundException']);
  });
});
