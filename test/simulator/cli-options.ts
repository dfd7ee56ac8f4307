/** Command-line flags of the standalone simulator (main.ts), as simulator options. */
import { parseArgs } from 'node:util';
import { WINDOW_TURNS } from './fixed-window.js';
import type { RateLimit, RateLimitHeaderStyle, ReportSize, SimulatorOptions, WindowTurn } from './types.js';

const SIZES: readonly ReportSize[] = ['tiny', 'small', 'mixed', 'large'];
const HEADER_STYLES: readonly RateLimitHeaderStyle[] = ['none', 'laravel', 'github', 'ietf'];

function integer(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new Error(`--${name} must be an integer, got "${raw}"`);
  return value;
}

function positive(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!(value > 0)) throw new Error(`--${name} must be a positive number, got "${raw}"`);
  return value;
}

function nonNegative(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!(value >= 0 && value < Infinity)) throw new Error(`--${name} must be a number >= 0, got "${raw}"`);
  return value;
}

/** `--window <requests>/<seconds>` (e.g. 500/10), `--headers <style>` and `--turn` as a fixed window. */
function windowLimit(raw: string, style: string | undefined, turn: string | undefined): RateLimit {
  const match = /^(\d+)\/(\d+(?:\.\d+)?)$/.exec(raw);
  const requests = Number(match?.[1]);
  const seconds = Number(match?.[2]);
  if (!(requests >= 1 && seconds > 0))
    throw new Error(`--window must be <requests>/<seconds> with both positive, got "${raw}"`);
  const headers = style as RateLimitHeaderStyle | undefined;
  if (headers !== undefined && !HEADER_STYLES.includes(headers))
    throw new Error(`--headers must be one of ${HEADER_STYLES.join(', ')}`);
  if (turn !== undefined && headers !== 'laravel') throw new Error('--turn needs --headers laravel');
  if (turn !== undefined && !WINDOW_TURNS.includes(turn as WindowTurn))
    throw new Error(`--turn must be one of ${WINDOW_TURNS.join(', ')}`);
  const window = { windowRequests: requests, windowMs: Math.round(seconds * 1000), headers };
  return turn === undefined ? window : { ...window, turn: turn as WindowTurn };
}

/** The rate limit of `--rate`/`--burst` or `--window`/`--headers`, or null. */
function rateLimit(values: Record<string, string | undefined>): RateLimit | null {
  const rate = positive('rate', values.rate);
  const burst = positive('burst', values.burst);
  if (burst !== undefined && rate === undefined) throw new Error('--burst needs --rate');
  if (values.headers !== undefined && values.window === undefined)
    throw new Error('--headers needs --window');
  if (values.window !== undefined) {
    if (rate !== undefined) throw new Error('--window and --rate exclude each other');
    return windowLimit(values.window, values.headers, values.turn);
  }
  return rate === undefined ? null : { ratePerSecond: rate, burst: burst ?? Math.max(1, Math.ceil(rate)) };
}

/** The flags, each with a value (`simulator --help` names each with its default: command.ts). */
export const FLAGS = {
  port: { type: 'string' },
  seed: { type: 'string' },
  campaigns: { type: 'string' },
  jobs: { type: 'string' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  window: { type: 'string' },
  headers: { type: 'string' },
  turn: { type: 'string' },
  latency: { type: 'string' },
  size: { type: 'string' },
} as const;

/** Turns command-line flags into simulator options. */
export function optionsFromArgs(args: string[]): SimulatorOptions {
  const { values } = parseArgs({
    args,
    options: FLAGS,
    strict: true,
  });
  const size = values.size as ReportSize | undefined;
  if (size !== undefined && !SIZES.includes(size))
    throw new Error(`--size must be one of ${SIZES.join(', ')}`);
  return {
    port: integer('port', values.port),
    seed: integer('seed', values.seed),
    campaigns: integer('campaigns', values.campaigns),
    jobsPerCampaign: integer('jobs', values.jobs),
    reportSize: size,
    rateLimit: rateLimit(values),
    latencyMs: nonNegative('latency', values.latency),
  };
}
