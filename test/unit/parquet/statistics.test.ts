import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lowerBound, STATISTICS_BYTES, upperBound } from '../../../shared/parquet/statistics.js';

const text = (bytes: Uint8Array | undefined) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);
const utf8 = new TextDecoder('utf-8', { fatal: true });

describe('string statistics bounds', () => {
  it('keeps a value of up to 64 bytes whole and exact', () => {
    for (const value of ['', '20261122T031500Z-a1b2c3', 'x'.repeat(64), 'é'.repeat(32)]) {
      expect(lowerBound(value)).toEqual({ bytes: Buffer.from(value), exact: true });
      expect(upperBound(value)).toEqual({ bytes: Buffer.from(value), exact: true });
    }
  });

  it('cuts a longer value to a prefix below it and a rounded-up prefix above it', () => {
    const long = `${'a'.repeat(63)}bc`;
    expect(text(lowerBound(long).bytes)).toBe(`${'a'.repeat(63)}b`);
    expect(text(upperBound(long)?.bytes)).toBe(`${'a'.repeat(63)}c`);
    expect(lowerBound(long).exact).toBe(false);
    expect(upperBound(long)?.exact).toBe(false);
  });

  it('cuts on a character boundary', () => {
    const value = `a${'é'.repeat(40)}`; // 81 bytes: byte 64 is in the middle of an é
    expect(text(lowerBound(value).bytes)).toBe(`a${'é'.repeat(31)}`);
    expect(text(upperBound(value)?.bytes)).toBe(`a${'é'.repeat(30)}ê`);
  });

  it('skips the surrogates and characters whose successor does not fit', () => {
    expect(text(upperBound(`${'a'.repeat(61)}\uD7FFzz`)?.bytes)).toBe(`${'a'.repeat(61)}\uE000`);
    // U+007F + 1 takes two bytes: the last character that can grow within 64 bytes is rounded.
    expect(text(upperBound(`${'\u007f'.repeat(70)}`)?.bytes)).toBe(`${'\u007f'.repeat(62)}\u0080`);
  });

  it('gives no upper bound when every character is the last code point', () => {
    expect(upperBound('\u{10FFFF}'.repeat(17))).toBeUndefined();
  });

  it('bounds any string: lower ≤ value ≤ upper in byte order, at most 64 bytes of valid UTF-8', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 90 }), (value) => {
        const bytes = Buffer.from(value);
        const lower = lowerBound(value);
        const upper = upperBound(value);
        expect(Buffer.compare(lower.bytes, bytes)).toBeLessThanOrEqual(0);
        expect(lower.bytes.length).toBeLessThanOrEqual(STATISTICS_BYTES);
        expect(() => utf8.decode(lower.bytes)).not.toThrow();
        expect(lower.exact).toBe(bytes.length <= STATISTICS_BYTES);
        if (upper) {
          expect(Buffer.compare(upper.bytes, bytes)).toBeGreaterThanOrEqual(0);
          expect(upper.bytes.length).toBeLessThanOrEqual(STATISTICS_BYTES);
          expect(() => utf8.decode(upper.bytes)).not.toThrow();
          expect(upper.exact).toBe(bytes.length <= STATISTICS_BYTES);
        }
      }),
      { numRuns: 500 },
    );
  });
});
