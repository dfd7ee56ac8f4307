/**
 * Column chunk statistics: null counts and min/max bounds that let readers skip row groups.
 * String bounds are cut to {@link STATISTICS_BYTES} UTF-8 bytes (parquet-mr's and Arrow's
 * default): a prefix is still a lower bound; an upper bound is cut and its last character
 * incremented. Cut bounds are flagged inexact (`is_min_value_exact` / `is_max_value_exact`).
 */
import type { Statistics } from 'hyparquet';
import type { Leaf } from './leaf.js';

/**
 * Most UTF-8 bytes of a string min/max in the footer. 64 keeps every key we filter on exact
 * (run ids, section ids, codes) and the footer small when a column holds long text.
 */
export const STATISTICS_BYTES = 64;

/** Code unit → a key whose order is code point order (surrogates above U+E000..U+FFFF). */
const fixup = (c: number) => (c < 0xd800 ? c : c >= 0xe000 ? c - 0x800 : c + 0x2000);

/** Compares two strings in UTF-8 byte order, which is code point order. */
function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return fixup(x) - fixup(y);
  }
  return a.length - b.length;
}

/** The longest prefix of `bytes` (UTF-8) of at most `limit` bytes that ends on a character boundary. */
function prefixEnd(bytes: Uint8Array, limit: number): number {
  let end = limit;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // a continuation byte: not a boundary
  return end;
}

/**
 * A lower bound of `value` of at most `limit` UTF-8 bytes: the value itself when it fits,
 * otherwise its longest prefix that ends on a character boundary.
 */
export function lowerBound(value: string, limit = STATISTICS_BYTES): { bytes: Uint8Array; exact: boolean } {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length <= limit) return { bytes, exact: true };
  return { bytes: bytes.subarray(0, prefixEnd(bytes, limit)), exact: false };
}

/**
 * An upper bound of `value` of at most `limit` UTF-8 bytes: the value itself when it fits;
 * otherwise a prefix whose last character is replaced by the next code point (skipping the
 * surrogates), which sorts after every string that starts with the prefix. `undefined` when
 * there is none (every character of the prefix is U+10FFFF): then the chunk gets no max.
 */
export function upperBound(
  value: string,
  limit = STATISTICS_BYTES,
): { bytes: Uint8Array; exact: boolean } | undefined {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length <= limit) return { bytes, exact: true };
  const chars = Array.from(bytes.toString('utf8', 0, prefixEnd(bytes, limit)));
  for (let i = chars.length - 1; i >= 0; i--) {
    const code = chars[i]!.codePointAt(0)!;
    if (code === 0x10ffff) continue;
    const next = String.fromCodePoint(code === 0xd7ff ? 0xe000 : code + 1);
    // The successor may take more bytes than the character it replaces (U+007F → U+0080).
    const rounded = Buffer.from(chars.slice(0, i).join('') + next, 'utf8');
    if (rounded.length <= limit) return { bytes: rounded, exact: false };
  }
  return undefined;
}

/** min/max of string values, or nothing when one is not well-formed UTF-16 (its bytes differ). */
function stringBounds(values: readonly string[]): Statistics {
  let min = values[0];
  let max = values[0];
  if (min === undefined || max === undefined) return {};
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!v.isWellFormed()) return {};
    if (compareUtf8(v, min) < 0) min = v;
    else if (compareUtf8(v, max) > 0) max = v;
  }
  const lower = lowerBound(min);
  const upper = upperBound(max);
  // Both flags are written: the footer writer would otherwise guess them from the cut bytes.
  return {
    min_value: lower.bytes,
    is_min_value_exact: lower.exact,
    ...(upper && { max_value: upper.bytes, is_max_value_exact: upper.exact }),
  };
}

/** min/max of numbers (INT32, INT64 as safe integers, BOOLEAN as 0/1). */
function numberBounds(values: Int32Array | Float64Array | Uint8Array): [number, number] {
  let min = values[0]!;
  let max = min;
  for (let i = 1; i < values.length; i++) {
    const v = values[i]!;
    if (v < min) min = v;
    else if (v > max) max = v;
  }
  return [min, max];
}

/**
 * Chunk statistics: the null count, and min/max of flat columns. Strings get bounds only when
 * dictionary-encoded (bounds of the few distinct values are cheap, and those are the columns
 * a filter prunes on); a PLAIN string column holds near-unique text (URLs, JSON, comments).
 */
export function statistics(leaf: Leaf, dictionary: readonly string[] | null): Statistics | undefined {
  // List columns get none: readers differ on what a null count means for an empty list.
  if (leaf.rep) return undefined;
  const stats: Statistics = { null_count: BigInt(leaf.nulls) };
  const { values } = leaf;
  if (values.values.length === 0) return stats;
  if (values.kind === 'string') return dictionary ? { ...stats, ...stringBounds(dictionary) } : stats;
  const [min, max] = numberBounds(values.values);
  if (values.kind === 'int64') return { ...stats, min_value: BigInt(min), max_value: BigInt(max) };
  if (values.kind === 'boolean') return { ...stats, min_value: min === 1, max_value: max === 1 };
  return { ...stats, min_value: min, max_value: max };
}
