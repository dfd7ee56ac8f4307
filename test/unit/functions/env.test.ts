/** The Lambda environment: defaults and bounds of the run settings from shared/run-defaults.ts. */
import { describe, expect, it } from 'vitest';
import { EnvSchema, readEnv } from '../../../functions/aws/env.js';
import { ConfigError } from '../../../shared/errors.js';
import { RUN_DEFAULTS, type RunDefault } from '../../../shared/run-defaults.js';

const BASE = { DATA_BUCKET: 'bucket' };
const WITH_ENV = Object.values(RUN_DEFAULTS as Readonly<Record<string, RunDefault>>).filter(
  (entry) => entry.env !== undefined,
);

describe('readEnv', () => {
  it('knows every variable a run default names', () => {
    expect(WITH_ENV.map((entry) => entry.env).sort()).toEqual(
      [
        'MAX_BODY_MIB',
        'MAX_RECEIVE_COUNT',
        'RATE_CEILING',
        'REPORT_CONCURRENCY',
        'RUN_DEADLINE_MINUTES',
        'SECRET_CACHE_TTL_SECONDS',
        'UNIT_SIZE',
      ].sort(),
    );
    for (const entry of WITH_ENV) expect(Object.keys(EnvSchema.shape)).toContain(entry.env);
  });

  it('defaults each to its run default', () => {
    const env = readEnv(BASE) as unknown as Record<string, unknown>;
    for (const entry of WITH_ENV) expect(env[entry.env!], entry.env).toBe(entry.value);
    expect(readEnv(BASE)).toMatchObject({
      UNIT_SIZE: RUN_DEFAULTS.unitSize.value,
      REPORT_CONCURRENCY: RUN_DEFAULTS.concurrency.value,
      RATE_CEILING: RUN_DEFAULTS.lambdaRateCeiling.value,
    });
  });

  it.each(WITH_ENV.map((entry) => [entry.env!, entry] as const))('bounds %s by its range', (name, entry) => {
    const read = (value: number) =>
      (readEnv({ ...BASE, [name]: String(value) }) as unknown as Record<string, unknown>)[name];
    expect(read(entry.min)).toBe(entry.min);
    expect(read(entry.max)).toBe(entry.max);
    for (const outside of [entry.min - 1, entry.max + 1]) {
      expect(() => read(outside)).toThrow(ConfigError);
      expect(() => read(outside)).toThrow(
        `${name}: expected a whole number from ${entry.min} to ${entry.max}`,
      );
    }
  });
});

describe('SCHEMA_CONTRACT', () => {
  it('is evolve unless set, takes freeze, and names itself for anything else', () => {
    expect(readEnv(BASE).SCHEMA_CONTRACT).toBe('evolve');
    expect(readEnv({ ...BASE, SCHEMA_CONTRACT: 'freeze' }).SCHEMA_CONTRACT).toBe('freeze');
    expect(() => readEnv({ ...BASE, SCHEMA_CONTRACT: 'strict' })).toThrow(/SCHEMA_CONTRACT: /);
  });
});
