import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonTextOf, stringifyIterative } from '../../../../shared/export/format/json-text.js';

/** `levels` nested arrays (or objects, as `{"k": …}`) around `inner`, built without recursion. */
function nested(levels: number, kind: 'array' | 'object', inner: unknown = 1): unknown {
  let value = inner;
  for (let i = 0; i < levels; i++) value = kind === 'array' ? [value] : { k: value };
  return value;
}

/** JSON.stringify's own limit on this stack, found rather than assumed. */
function stringifyOverflows(value: unknown): boolean {
  try {
    JSON.stringify(value);
    return false;
  } catch (error) {
    return error instanceof RangeError;
  }
}

describe('stringifyIterative', () => {
  it('writes the very text JSON.stringify writes for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(stringifyIterative(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: 500 },
    );
  });

  it('round-trips any JSON value through JSON.parse, lone surrogates and prototype keys included', () => {
    const keys = fc.constantFrom('__proto__', 'constructor', 'toString', 'k', '', '\ud800');
    const strings = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('\ud800', '\udfff x \ud83d'));
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.oneof(
          strings,
          fc.double({ noDefaultInfinity: true, noNaN: true }).filter((n) => !Object.is(n, -0)),
          fc.boolean(),
          fc.constant(null),
        ),
        fc.array(tie('tree')),
        // Parsed from text, so that `__proto__` is an own key as JSON.parse makes it.
        fc
          .array(fc.tuple(keys, tie('tree')))
          .map((entries) =>
            JSON.parse(`{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`),
          ),
      ),
    }));
    fc.assert(
      fc.property(tree, (value) => {
        // node's comparison: vitest's is misled by an own `constructor` key.
        expect(isDeepStrictEqual(JSON.parse(stringifyIterative(value)), value)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it.each(['array', 'object'] as const)('writes %s nesting far deeper than JSON.stringify can', (kind) => {
    const deep = nested(20_000, kind, 'bottom');
    expect(stringifyOverflows(deep)).toBe(true);
    const text = stringifyIterative(deep);
    const open = kind === 'array' ? '[' : '{"k":';
    const close = kind === 'array' ? ']' : '}';
    expect(text).toBe(`${open.repeat(20_000)}"bottom"${close.repeat(20_000)}`);
  });

  it('leaves out what JSON.stringify leaves out, and writes null where it does', () => {
    const value = { a: undefined, b: () => 1, c: [undefined, () => 1, Symbol('s')], d: Number.NaN, e: -0 };
    expect(stringifyIterative(value)).toBe(JSON.stringify(value));
    expect(stringifyIterative(value)).toBe('{"c":[null,null,null],"d":null,"e":0}');
  });
});

describe('jsonTextOf', () => {
  it('is JSON.stringify where that works', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(jsonTextOf(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: 200 },
    );
  });

  it('falls back to the iterative text for a value too deep for JSON.stringify', () => {
    const deep = nested(10_000, 'object', null);
    const text = `${'{"k":'.repeat(10_000)}null${'}'.repeat(10_000)}`;
    expect(jsonTextOf(deep)).toBe(text);
    expect(jsonTextOf(JSON.parse(text))).toBe(text);
  });

  it('still refuses what is not JSON at all', () => {
    expect(() => jsonTextOf({ n: 10n })).toThrow(TypeError);
  });
});
