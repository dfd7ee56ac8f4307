import { describe, expect, it } from 'vitest';
import { unitDelivery, unitNext } from '../../../../shared/export/run/export-unit.js';
import type { UnitSummary } from '../../../../shared/export/state/records.js';

/** A summary of a unit of three jobs, `pending` of them still pending. */
const summaryWith = (pending: number, fatal?: UnitSummary['fatal']): UnitSummary =>
  ({
    unit: 'u1',
    campaign_id: 1,
    attempt: 1,
    jobs: Object.fromEntries(
      [1, 2, 3].map((id, i) => [id, { fp: `f${id}`, outcome: i < pending ? 'pending' : 'exported' }]),
    ),
    staged: [],
    requests: { total: 0, retried: 0, by_status: {} },
    ...(fatal ? { fatal } : {}),
  }) as UnitSummary;

const facts = { decided: 0, reachedLate: false, timeUp: false, receiveCount: 1, maxReceiveCount: 5 };

describe('unitNext: what becomes of a unit after a delivery', () => {
  it('hands on a unit cut short by its time after it got some reports, or reached with no time', () => {
    expect(unitNext({ ...facts, summary: summaryWith(2), decided: 1, timeUp: true })).toEqual({
      kind: 'hand-on',
      pending: 2,
    });
    expect(unitNext({ ...facts, summary: summaryWith(3), reachedLate: true, timeUp: true }).kind).toBe(
      'hand-on',
    );
  });

  it('retries a unit cut short before any report was decided, so that the delivery counts', () => {
    expect(unitNext({ ...facts, summary: summaryWith(3), timeUp: true }).kind).toBe('retry');
  });

  it('retries pending jobs until the last delivery, then is done with them', () => {
    expect(unitNext({ ...facts, summary: summaryWith(1), decided: 2 }).kind).toBe('retry');
    expect(unitNext({ ...facts, summary: summaryWith(1), decided: 2, receiveCount: 5 }).kind).toBe('done');
  });

  it('is done with a unit that has nothing pending, or stopped on a fatal answer', () => {
    expect(unitNext({ ...facts, summary: summaryWith(0), timeUp: true, decided: 3 }).kind).toBe('done');
    const fatal = { error_code: 'API_KEY_EXPIRED', message: 'expired' } as UnitSummary['fatal'];
    expect(unitNext({ ...facts, summary: summaryWith(2, fatal), timeUp: true, decided: 1 }).kind).toBe(
      'done',
    );
  });

  it('counts as progress only reports that got an outcome, and sees a delivery begun late as late', () => {
    let left = 10;
    const delivery = unitDelivery(() => left, { receiveCount: 1, maxReceiveCount: 5 });
    delivery.onReport({ fp: 'f1', outcome: 'pending' });
    left = 0;
    expect(delivery.next(summaryWith(3)).kind).toBe('retry');
    delivery.onReport({ fp: 'f2', outcome: 'not_found' });
    expect(delivery.next(summaryWith(2)).kind).toBe('hand-on');
    expect(unitDelivery(() => 0, { receiveCount: 1, maxReceiveCount: 5 }).next(summaryWith(3)).kind).toBe(
      'hand-on',
    );
  });
});
