/**
 * export-reports' time for requests (`exportSendMs`, the real `limiterUntil` around the
 * simulated client): what each unit delivery got, what it did with its message, the cases a
 * seed reached, and invariant 12, checked after quiescence from facts the simulation gathers
 * itself (the API's answers to the delivery, the deadline it drew, the queue operations it
 * applied), not from the handler's decision:
 * 12a. a delivery that sends its unit on in a new message got an answer that decides a report,
 *      or had no time at all: each message of a chain gets reports or meets a fresh invocation,
 *      so the chain ends;
 * 12b. a delivery cut short by its time (a request not sent, or no time at all) that got such an
 *      answer (or had no time), its unit's summary still holding pending jobs, sends the unit on
 *      in a new message and deletes its own: the cut counts no delivery towards
 *      maxReceiveCount and leaves no job behind.
 * Deliveries that crashed, were killed, or ended before their unit's summary was written are
 * not judged (the queue delivers them again).
 */
import type { ApiTally } from './api.js';
import type { Monitor } from './monitor.js';
import type { Actor } from './scheduler.js';
import type { Delivery, SimQueue } from './sqs.js';

/** One unit delivery, as the simulation saw it. */
export interface UnitDeliveryFacts {
  actor: Actor;
  delivery: Delivery;
  run: string;
  unit: string;
  /** The deadline fault: its time for requests ends early; `noTime`: before it began. */
  cut: boolean;
  noTime: boolean;
  tally: ApiTally;
  /** Pending jobs in the summary its export returned (undefined: it returned none). */
  pending: number | undefined;
}

/** How often a seed reached each case (summed by `npm run sim -- --seeds N`). */
export interface UnitDeadlineCases {
  /** Deliveries the fault cut: their time for requests ended early. */
  cut: number;
  /** Of those, with no time at all (a unit its batch reached late). */
  noTime: number;
  /** Requests not sent because the time for them was up (the fault's and the 100 s one). */
  notSent: number;
  /** Units sent on in a new message after a cut with reports got. */
  handedOnAfterProgress: number;
  /** Units sent on in a new message by a delivery with no time. */
  handedOnWithoutTime: number;
  /** Cut short before any report was decided, with time: retried, the delivery counted. */
  retriedWithoutProgress: number;
  /** Deliveries that found every fetcher slot taken: the unit waits in a delayed message. */
  waitedForFetcher: number;
  /** Holders that outlived their lease and found their slot taken at a renewal (they stop). */
  fetcherLost: number;
  /** Invocations that fetched without a slot because the slot table failed (fail open). */
  fetcherOpen: number;
}

export const noUnitDeadlineCases = (): UnitDeadlineCases => ({
  cut: 0,
  noTime: 0,
  notSent: 0,
  handedOnAfterProgress: 0,
  handedOnWithoutTime: 0,
  retriedWithoutProgress: 0,
  waitedForFetcher: 0,
  fetcherLost: 0,
  fetcherOpen: 0,
});

export class UnitDeadlines {
  readonly deliveries: UnitDeliveryFacts[] = [];

  record(facts: UnitDeliveryFacts): void {
    this.deliveries.push(facts);
  }

  /** Checks invariant 12 and counts the cases (the fetcher slots' aside), once every actor has ended. */
  check(
    queue: SimQueue,
    monitor: Monitor,
  ): Omit<UnitDeadlineCases, 'waitedForFetcher' | 'fetcherLost' | 'fetcherOpen'> {
    const cases = noUnitDeadlineCases();
    const opsOf = new Map<Actor, Array<SimQueue['ops'][number]>>();
    for (const op of queue.ops) opsOf.set(op.actor, [...(opsOf.get(op.actor) ?? []), op]);
    for (const d of this.deliveries) {
      if (d.cut) cases.cut++;
      if (d.noTime) cases.noTime++;
      cases.notSent += d.tally.notSent;
      if (d.actor.result !== 'ok' || d.pending === undefined) continue;
      const ops = opsOf.get(d.actor) ?? [];
      const sentOn = ops.some((o) => o.op === 'send');
      const deleted = ops.some((o) => o.op === 'delete' && o.messageId === d.delivery.message.id);
      const handedBack = ops.some((o) => o.op === 'visibility' && o.messageId === d.delivery.message.id);
      const progress = d.tally.decided > 0;
      const cutShort = d.tally.notSent > 0 || d.noTime;
      const what = `${d.actor.name} (unit ${d.unit}, delivery ${d.delivery.receiveCount}, ${d.tally.decided} report(s) decided, ${d.tally.notSent} request(s) not sent${d.noTime ? ', no time' : ''}, ${d.pending} pending)`;
      if (sentOn) {
        if (progress) cases.handedOnAfterProgress++;
        else if (d.noTime) cases.handedOnWithoutTime++;
        else {
          monitor.violate('12 a hand-on made progress', `${what} sent its unit on without progress`, [d.run]);
        }
      }
      if (cutShort && !progress && !d.noTime && d.pending > 0 && handedBack) cases.retriedWithoutProgress++;
      if (cutShort && (progress || d.noTime) && d.pending > 0 && !(sentOn && deleted && !handedBack)) {
        const did = handedBack
          ? 'handed its message back (a delivery counted)'
          : sentOn
            ? 'kept its message'
            : 'sent no new message';
        monitor.violate('12 a cut counts no delivery', `${what} was cut short and ${did}`, [d.run]);
      }
    }
    return cases;
  }
}
