/** The run defaults themselves: in range, explained, frozen, each surfacing somewhere. */
import { describe, expect, it } from 'vitest';
import { describeRange, RUN_DEFAULTS, type RunDefault } from '../../shared/run-defaults.js';

const ENTRIES = Object.entries(RUN_DEFAULTS as Readonly<Record<string, RunDefault>>);

describe('RUN_DEFAULTS', () => {
  it.each(ENTRIES)('%s is a whole number within its range, with a one-sentence reason', (_name, entry) => {
    for (const n of [entry.value, entry.min, entry.max]) expect(Number.isInteger(n)).toBe(true);
    expect(entry.min).toBeLessThanOrEqual(entry.value);
    expect(entry.value).toBeLessThanOrEqual(entry.max);
    expect(entry.reason).toMatch(/^[A-Z].*\.$/s);
    expect(entry.reason.slice(0, -1)).not.toMatch(/\.\s+[A-Z]/);
    expect(entry.flag ?? entry.context ?? entry.env).toBeDefined();
  });

  it('is frozen, entries included', () => {
    expect(Object.isFrozen(RUN_DEFAULTS)).toBe(true);
    for (const [, entry] of ENTRIES) expect(Object.isFrozen(entry)).toBe(true);
  });

  it('carries the values of issue 10', () => {
    expect(RUN_DEFAULTS.unitSize).toMatchObject({ value: 100, min: 1, max: 500 });
    expect(RUN_DEFAULTS.concurrency).toMatchObject({ value: 128, min: 1, max: 256 });
    expect(RUN_DEFAULTS.maxRate).toMatchObject({ value: 50, min: 1, max: 1000 });
    expect(RUN_DEFAULTS.lambdaRateCeiling).toMatchObject({ value: 20, min: 1, max: 1000 });
  });

  it('describes a range in words', () => {
    expect(describeRange(RUN_DEFAULTS.unitSize)).toBe('1 to 500');
  });
});
