/**
 * JSON of Iceberg metadata, keeping 64-bit integers exact: snapshot ids written by other
 * engines use all 63 bits, beyond what a JS number holds. Integers beyond 2^53 are read as
 * BigInt (JSON.parse's reviver sees each number's source text) and written back as digits.
 */

type Reviver = (key: string, value: unknown, context?: { source?: string }) => unknown;

const revive: Reviver = (_key, value, context) => {
  if (
    typeof value === 'number' &&
    !Number.isSafeInteger(value) &&
    context?.source &&
    /^-?\d+$/.test(context.source)
  ) {
    return BigInt(context.source);
  }
  return value;
};

/** Parses JSON; integers that a number cannot hold exactly become BigInt. */
export function parseJson(text: string): unknown {
  return JSON.parse(text, revive as Parameters<typeof JSON.parse>[1]);
}

/** Serialises JSON; BigInt values are written as plain integers. */
export function stringifyJson(value: unknown, space?: number): string {
  const raw = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? raw(v.toString()) : v), space);
}
