import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A larger young generation: the lifecycle simulation (test/sim) allocates many short-lived
    // buffers (Parquet, Avro, S3 bodies); scavenges were a sixth of its time.
    execArgv: ['--max-semi-space-size=32'],
  },
});
