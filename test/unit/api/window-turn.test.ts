import { describe, expect, it } from 'vitest';
import { COARSE_STEP_MS, RELEARN_MS, TurnLearner } from '../../../shared/api/window-turn.js';

describe('TurnLearner', () => {
  it('follows named resets until a turn says how they stand', () => {
    expect(new TurnLearner().plan()).toBeUndefined();
  });

  it('a named reset that came early: scans its bracket in eighths, then meets the turn at the offset found', () => {
    const learner = new TurnLearner();
    learner.afterNamedReset({ early: 4_900, admitted: 5_000 }, false);
    expect(learner.plan()).toEqual({ from: 4_912.5, step: 12.5 });
    learner.afterPlanned({ early: 4_937.5, admitted: 4_950 });
    expect(learner.plan()).toEqual({ from: 4_950, step: 0 });
    // Met at the first request: nothing new. Refused there: the offset moves to the first let through.
    learner.afterPlanned({ early: undefined, admitted: 4_950 });
    learner.afterPlanned({ early: 4_951, admitted: 4_960 });
    expect(learner.plan()).toEqual({ from: 4_960, step: 0 });
  });

  it('exact named resets: two in a row give the offset', () => {
    const learner = new TurnLearner();
    learner.afterNamedReset({ early: undefined, admitted: 4_300 }, true);
    expect(learner.plan()).toBeUndefined(); // the first window did not open at a named reset
    learner.afterNamedReset({ early: undefined, admitted: 5_000 }, true);
    expect(learner.plan()).toEqual({ from: 5_000, step: 0 });
  });

  it('learns afresh when refused far past the learnt turn, or when the first request went far later', () => {
    const learner = new TurnLearner();
    learner.afterNamedReset({ early: 900, admitted: 1_000 }, false);
    learner.afterPlanned({ early: 960, admitted: 970 });
    expect(learner.refusedTooLate(970 + RELEARN_MS + 1)).toBe(true);
    learner.afterPlanned({ early: 970 + RELEARN_MS + 1, admitted: 2_000 });
    expect(learner.plan()).toBeUndefined();
    expect(learner.fineStepMs).toBe(COARSE_STEP_MS);

    const idle = new TurnLearner();
    idle.afterNamedReset({ early: 900, admitted: 1_000 }, false);
    idle.afterPlanned({ early: 960, admitted: 970 });
    idle.afterPlanned({ early: undefined, admitted: 970 + RELEARN_MS + 1 });
    expect(idle.plan()).toBeUndefined();
  });
});
