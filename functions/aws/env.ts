/**
 * The Lambda functions' configuration, read from the environment once per container and
 * validated (names set by infra/constructs/functions.ts).
 */
import * as z from 'zod';
import { ConfigError } from '../../shared/errors.js';

const int = (fallback: number) => z.coerce.number().int().positive().default(fallback);

const EnvSchema = z.object({
  DATA_BUCKET: z.string().min(1),
  DATA_PREFIX: z.string().default(''),
  API_BASE_URL: z.url().optional(),
  API_KEY_SECRET_ID: z.string().min(1).optional(),
  SECRET_CACHE_TTL_SECONDS: int(300),
  PLAN_QUEUE_URL: z.string().optional(),
  REPORT_QUEUE_URL: z.string().optional(),
  UNIT_SIZE: int(100),
  REPORT_CONCURRENCY: int(8),
  RATE_CEILING: int(20),
  EVENT_BUS_NAME: z.string().default('default'),
  RUN_DEADLINE_MINUTES: int(360),
  MAX_RECEIVE_COUNT: int(5),
});
export type Env = z.infer<typeof EnvSchema>;

/** Validated environment; throws a ConfigError naming each bad variable. */
export function readEnv(env: NodeJS.ProcessEnv = process.env): Env {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const names = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`bad Lambda environment (${names})`);
  }
  return parsed.data;
}

/** A variable a given function needs; a clear error when the stack did not set it. */
export function required<K extends keyof Env>(env: Env, name: K): NonNullable<Env[K]> {
  const value = env[name];
  if (value === undefined || value === '') throw new ConfigError(`environment variable ${name} is not set`);
  return value as NonNullable<Env[K]>;
}
