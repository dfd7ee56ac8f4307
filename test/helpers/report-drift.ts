/**
 * Reports changed at random as a growing API would change them: a key of any object set to a
 * value of any JSON type, a field added at any depth, a field removed, a new `type` or
 * `input_type` (a new variant), an unlisted enumeration value. `job.id` is left alone (another
 * id there makes the report another job's).
 */
import fc from 'fast-check';

/** Where a mutation may land: every object and array of the report, with its path. */
function containers(value: unknown, path: (string | number)[] = [], out: (string | number)[][] = []) {
  if (typeof value !== 'object' || value === null) return out;
  out.push(path);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) containers(value[i], [...path, i], out);
  } else for (const [k, v] of Object.entries(value)) containers(v, [...path, k], out);
  return out;
}

const anyJson = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.oneof(fc.string({ maxLength: 3 }), fc.integer()), {
    maxKeys: 2,
  }),
  fc.array(fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constant(null)), { maxLength: 3 }),
);

/** One change: at the n-th container, a key (of its own or a new one) gets a value, or goes. */
const mutation = fc.record({
  at: fc.nat(),
  pick: fc.nat(),
  kind: fc.constantFrom('set', 'add', 'remove', 'variant', 'enum'),
  key: fc.string({ minLength: 1, maxLength: 5 }),
  value: anyJson,
});

export type Mutation = { at: number; pick: number; kind: string; key: string; value: unknown };

export function mutate(data: Record<string, unknown>, changes: readonly Mutation[]): void {
  for (const change of changes) {
    const all = containers(data);
    const path = all[change.at % all.length]!;
    const target = path.reduce<unknown>(
      (node, k) => (node as Record<string | number, unknown>)[k],
      data,
    ) as Record<string, unknown>;
    const keys = Object.keys(target);
    const own = keys[change.pick % Math.max(keys.length, 1)];
    // job.id names the report's job: another integer there makes it another job's report (refused, tested above).
    const isJobId = (k: string | undefined) => path.length === 1 && path[0] === 'job' && k === 'id';
    switch (change.kind) {
      case 'set':
        if (own !== undefined && !isJobId(own)) target[own] = change.value;
        break;
      case 'add':
        if (!Array.isArray(target)) target[`x_${change.key}`] = change.value;
        break;
      case 'remove':
        if (own !== undefined && !Array.isArray(target) && !isJobId(own)) delete target[own];
        break;
      case 'variant':
        if ('type' in target) target.type = change.key;
        else if ('input_type' in target && !('measurement' in target)) target.input_type = change.key;
        break;
      case 'enum':
        if ('answer_type' in target) target.answer_type = change.key;
        else if ('job_status' in target) target.job_status = change.pick;
        break;
    }
  }
}

/** One to six changes of one report. */
export const reportChanges = fc.array(mutation, { minLength: 1, maxLength: 6 });
