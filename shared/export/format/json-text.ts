/**
 * JSON text of any parsed JSON value, however deep. JSON.parse reads any depth, but
 * JSON.stringify recurses and overflows V8's stack a few thousand levels down: a body kept "as
 * received" (quarantine) must still be writable then. The iterative serialiser is only the
 * fallback; JSON.stringify stays the fast path everywhere else.
 */

/** An array or object being written: its member values, their keys (objects), the next one to write. */
interface Frame {
  readonly values: readonly unknown[];
  readonly keys: readonly string[] | undefined;
  next: number;
}

/** What JSON.stringify leaves out of an object and writes as null in an array. */
const skipped = (value: unknown): boolean =>
  value === undefined || typeof value === 'function' || typeof value === 'symbol';

function open(value: object, out: string[]): Frame {
  if (Array.isArray(value)) {
    out.push('[');
    return { values: value, keys: undefined, next: 0 };
  }
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const [key, member] of Object.entries(value)) {
    if (skipped(member)) continue;
    keys.push(key);
    values.push(member);
  }
  out.push('{');
  return { values, keys, next: 0 };
}

/**
 * The same text as `JSON.stringify(value)` for a value as JSON.parse makes it (plain objects,
 * arrays, strings, numbers, booleans, null), without recursion, so nesting depth is bounded by
 * memory only. `toJSON` methods are not called; a top-level `undefined` gives `null`.
 *
 * @example
 * stringifyIterative(JSON.parse('['.repeat(20_000) + ']'.repeat(20_000))) // no RangeError
 */
export function stringifyIterative(value: unknown): string {
  const out: string[] = [];
  const stack: Frame[] = [];
  let current: unknown = value;
  for (;;) {
    if (current !== null && typeof current === 'object') stack.push(open(current, out));
    // A scalar: JSON.stringify of a scalar does not recurse; undefined in an array is null.
    else out.push(skipped(current) ? 'null' : JSON.stringify(current));
    // Close every container written to its end, then go on with the innermost open one.
    let frame = stack.at(-1);
    while (frame !== undefined && frame.next === frame.values.length) {
      out.push(frame.keys ? '}' : ']');
      stack.pop();
      frame = stack.at(-1);
    }
    if (frame === undefined) return out.join('');
    const i = frame.next++;
    if (i > 0) out.push(',');
    if (frame.keys) out.push(JSON.stringify(frame.keys[i]), ':');
    current = frame.values[i];
  }
}

/**
 * `JSON.stringify(value)`, or {@link stringifyIterative} when that overflows the stack (a value
 * nested thousands of levels deep). Any other error (a BigInt, a cycle) is thrown as is.
 */
export function jsonTextOf(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return stringifyIterative(value);
  }
}
