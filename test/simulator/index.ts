/**
 * The Integration API simulator: a seeded, deterministic stand-in for the real API (spec
 * sections 2, 4, 5, 7, 8) with faults, rate limiting, latency and a mutable dataset, for the tests, the
 * demo and the benchmarks.
 */
export { ERROR_MESSAGES, NOT_READY_MESSAGES } from './answers.js';
export { ALLOWED_ORIGIN, OTHER_COMPANY_NAME, RESTRICTED_IP } from './auth.js';
export { COMPANY_NAME, DEFAULTS, generateDataset } from './dataset.js';
export { DEFAULT_SLOW_MS } from './faults.js';
export { LATENCY_JITTER } from './latency.js';
export {
  type ConcreteSize,
  concreteSize,
  corruptReport,
  generateReport,
  type ReportInput,
} from './reports.js';
export { startSimulator } from './server.js';
export { LONG_TEXT_MIN, TRICKY_TEXT, type TrickyKind } from './text.js';
export type {
  Dataset,
  FailKind,
  FaultOptions,
  FixedWindowLimit,
  JobState,
  RateLimit,
  RateLimitHeaderStyle,
  ReportSize,
  SimCampaign,
  SimJob,
  Simulator,
  SimulatorKeys,
  SimulatorOptions,
  SimulatorStats,
  TokenBucketLimit,
} from './types.js';
