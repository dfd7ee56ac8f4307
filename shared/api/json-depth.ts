/**
 * How deep a parsed JSON value nests. JSON.parse reads any depth, but JSON.stringify recurses
 * (V8 overflows its stack a few thousand levels down) and so do the readers of the lake:
 * Athena's JSON functions and SerDe (Jackson) refuse more than 1,000 levels. A value nested
 * deeper than {@link MAX_JSON_DEPTH} is invalid data, not something to write.
 */
import type { ValidationIssue } from './outcome.js';

/** Levels of arrays and objects accepted, well inside what JSON.stringify and Jackson take. */
export const MAX_JSON_DEPTH = 512;

/** The nesting depth of `value`, up to `limit + 1` (it stops looking there); a scalar is 0. Iterative. */
export function jsonDepth(value: unknown, limit: number = MAX_JSON_DEPTH): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== 'object') continue;
    const level = depth + 1;
    if (level > deepest) deepest = level;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (child !== null && typeof child === 'object') stack.push([child, level]);
    }
  }
  return deepest;
}

/** The issue code of a value nested too deep. */
export const TOO_DEEP = 'too_deep';

/** The issue of a value nested deeper than `limit`, at `path`; undefined when it is not. */
export function depthIssue(
  value: unknown,
  path = '',
  limit: number = MAX_JSON_DEPTH,
): ValidationIssue | undefined {
  if (jsonDepth(value, limit) <= limit) return undefined;
  return { path, code: TOO_DEEP, message: `nested more than ${limit} levels deep` };
}
