import { describe, expect, it } from 'vitest';
import { parseJson, stringifyJson } from '../../../shared/iceberg/json.js';

describe('Iceberg JSON', () => {
  it('reads an integer beyond 2^53 as the exact bigint', () => {
    const parsed = parseJson('{"snapshot-id": 9007199254740993, "neg": -9223372036854775808}');
    expect(parsed).toEqual({ 'snapshot-id': 9007199254740993n, neg: -9223372036854775808n });
  });

  it('keeps safe integers, fractions and exponents as numbers', () => {
    expect(parseJson('[9007199254740991, 1.5, 1e20, -3]')).toEqual([9007199254740991, 1.5, 1e20, -3]);
  });

  it('writes a bigint as its digits, and round-trips', () => {
    const text = '{"a":[9223372036854775807,1],"b":"x"}';
    const value = parseJson(text);
    expect(stringifyJson(value)).toBe(text);
    expect(stringifyJson({ id: 5n })).toBe('{"id":5}');
  });

  it('indents like JSON.stringify', () => {
    expect(stringifyJson({ a: 1 }, 2)).toBe(JSON.stringify({ a: 1 }, null, 2));
  });
});
