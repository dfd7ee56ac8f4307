/** Command-line flags of the standalone simulator (main.ts), as simulator options. */
import { parseArgs } from 'node:util';
import type { ReportSize, SimulatorOptions } from './types.js';

const SIZES: readonly ReportSize[] = ['tiny', 'small', 'mixed', 'large'];

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

/** Turns command-line flags into simulator options. */
export function optionsFromArgs(args: string[]): SimulatorOptions {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: 'string' },
      seed: { type: 'string' },
      campaigns: { type: 'string' },
      jobs: { type: 'string' },
      rate: { type: 'string' },
      burst: { type: 'string' },
      size: { type: 'string' },
    },
    strict: true,
  });
  const size = values.size as ReportSize | undefined;
  if (size !== undefined && !SIZES.includes(size))
    throw new Error(`--size must be one of ${SIZES.join(', ')}`);
  const rate = positive('rate', values.rate);
  const burst = positive('burst', values.burst);
  if (burst !== undefined && rate === undefined) throw new Error('--burst needs --rate');
  return {
    port: integer('port', values.port),
    seed: integer('seed', values.seed),
    campaigns: integer('campaigns', values.campaigns),
    jobsPerCampaign: integer('jobs', values.jobs),
    reportSize: size,
    rateLimit:
      rate === undefined ? null : { ratePerSecond: rate, burst: burst ?? Math.max(1, Math.ceil(rate)) },
  };
}
