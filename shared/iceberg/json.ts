/**
 * JSON for Iceberg metadata: 64-bit integers kept exact. Snapshot ids are random longs, and
 * metadata written by other engines (Spark, Athena's OPTIMIZE) holds ids beyond 2^53, which
 * `JSON.parse` would round. Integers outside the safe range are read as `bigint` and written
 * back digit for digit.
 */

/** `JSON.parse`'s reviver context (Node ≥ 21): the literal text of a primitive value. */
interface ReviverContext {
  readonly source?: string;
}
type Reviver = (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown;

const INTEGER_LITERAL = /^-?\d+$/;

const exactIntegers: Reviver = (_key, value, context) =>
  typeof value === 'number' &&
  !Number.isSafeInteger(value) &&
  context?.source !== undefined &&
  INTEGER_LITERAL.test(context.source)
    ? BigInt(context.source)
    : value;

/**
 * Parses JSON, reading an integer literal beyond ±(2^53 − 1) as a `bigint` (safe integers stay
 * numbers; `1e20` and fractions stay numbers).
 * @example parseJson('{"snapshot-id": 9007199254740993}') // { 'snapshot-id': 9007199254740993n }
 */
export function parseJson(text: string): unknown {
  return JSON.parse(text, exactIntegers as Parameters<typeof JSON.parse>[1]);
}

/** `JSON.rawJSON` (Node ≥ 21): a value serialized as the given text. */
const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/**
 * Serializes to JSON, writing a `bigint` as its digits (plain `JSON.stringify` throws on one).
 * @param space indentation, as `JSON.stringify`'s.
 */
export function stringifyJson(value: unknown, space?: number): string {
  return JSON.stringify(
    value,
    (_key, v: unknown) => (typeof v === 'bigint' ? rawJSON(v.toString()) : v),
    space,
  );
}
