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
    // Some room above the one sample: the step, at most 0.2% of the window.
    expect(learner.plan()).toEqual({ from: 4_950 + 9.9, step: 0 });
    // Met at the first request: nothing new. Refused there: past the first let through, by as
    // much again as the plan was off (at most 0.2%).
    learner.afterPlanned({ early: undefined, admitted: 4_959.9 });
    expect(learner.plan()?.from).toBeCloseTo(4_959.9);
    learner.afterPlanned({ early: 4_961, admitted: 4_963.9 });
    expect(learner.plan()?.from).toBeCloseTo(4_963.9 + 4);
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
    const at = learner.plan()?.from ?? Number.NaN;
    expect(learner.refusedTooLate(at + RELEARN_MS)).toBe(false);
    expect(learner.refusedTooLate(at + RELEARN_MS + 1)).toBe(true);
    learner.afterPlanned({ early: at + RELEARN_MS + 1, admitted: at + RELEARN_MS + 5 });
    expect(learner.plan()).toBeUndefined();
    expect(learner.fineStepMs).toBe(COARSE_STEP_MS);

    const idle = new TurnLearner();
    idle.afterNamedReset({ early: 900, admitted: 1_000 }, false);
    idle.afterPlanned({ early: 960, admitted: 970 });
    idle.afterPlanned({ early: undefined, admitted: (idle.plan()?.from ?? Number.NaN) + RELEARN_MS + 1 });
    expect(idle.plan()).toBeUndefined();
  });
});

describe('TurnLearner: whole-second guesses', () => {
  it('a turn met at a guess is the offset at once; a guard above 1% of the window is scanned away first', () => {
    const learner = new TurnLearner();
    expect(learner.guessWholeSeconds).toBe(true);
    learner.afterGuess({ early: undefined, admitted: 5_040 }, 40);
    expect(learner.plan()).toEqual({ from: 5_040, step: 0 });
    expect(learner.learnt()).toEqual({ turn: 'first-request', offsetMs: 5_040 });
    expect(learner.guessWholeSeconds).toBe(false);

    const short = new TurnLearner();
    short.afterGuess({ early: undefined, admitted: 1_040 }, 40);
    expect(short.plan()).toEqual({ from: 1_005, step: 5 });
    short.afterPlanned({ early: 1_020, admitted: 1_025 });
    expect(short.learnt()?.offsetMs).toBeCloseTo(1_025 + 2.05);
  });

  it('a turn no guess met: the guesses are not tried again until the windows change', () => {
    const learner = new TurnLearner();
    learner.guessesMissedTurn();
    expect(learner.guessWholeSeconds).toBe(false);
    learner.forget();
    expect(learner.guessWholeSeconds).toBe(true);
  });

  it('restores what an earlier run learnt: the offset of windows counted from their first request, only exactness of whole-second ones', () => {
    const counted = new TurnLearner();
    counted.restore({ turn: 'first-request', offsetMs: 5_040 });
    expect(counted.plan()).toEqual({ from: 5_040, step: 0 });

    const whole = new TurnLearner();
    whole.restore({ turn: 'named', offsetMs: 5_000 });
    expect(whole.plan()).toBeUndefined();
    expect(whole.namedResetsExact).toBe(true);
    whole.afterNamedReset({ early: undefined, admitted: 5_000 }, true);
    expect(whole.learnt()).toEqual({ turn: 'named', offsetMs: 5_000 });
  });
});
