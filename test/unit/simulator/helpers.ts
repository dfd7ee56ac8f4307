/** Helpers for the simulator's own tests: real HTTP through node's fetch. */
import type { Simulator } from '../../simulator/index.js';

export const V1 = '/integration/v1/client';

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: unknown;
}

export interface GetOptions {
  /** Bearer key; null sends no Authorization header. Default: the valid key. */
  key?: string | null;
  headers?: Record<string, string>;
  method?: string;
  signal?: AbortSignal;
}

/** GET `path` (relative to the base URL) and read the whole body. */
export async function get(sim: Simulator, path: string, options: GetOptions = {}): Promise<Reply> {
  const key = options.key === undefined ? sim.keys.valid : options.key;
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const response = await fetch(`${sim.url}${path}`, {
    method: options.method ?? 'GET',
    headers,
    signal: options.signal,
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined; // not JSON: the caller asserts on `text`
  }
  return { status: response.status, headers: response.headers, text, json };
}

export function reportPath(campaignId: number, jobId: number): string {
  return `${V1}/campaigns/${campaignId}/jobs/${jobId}/report`;
}

export function jobsPath(campaignId: number, query = ''): string {
  return `${V1}/campaigns/${campaignId}/jobs${query}`;
}

/** The first job of the dataset matching `predicate`. */
export function findJob(
  sim: Simulator,
  predicate: (job: Simulator['dataset']['campaigns'][number]['jobs'][number]) => boolean,
) {
  for (const campaign of sim.dataset.campaigns) {
    const job = campaign.jobs.find(predicate);
    if (job) return job;
  }
  throw new Error('no job matches');
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves once the wall clock (Date.now()) reaches `epochMs`. */
export async function untilWallClock(epochMs: number): Promise<void> {
  while (Date.now() < epochMs) await sleep(Math.max(1, epochMs - Date.now()));
}

const RATE_HEADER = /^(retry-after|x-ratelimit-|ratelimit)/;

/** The rate-limit headers of a reply (Retry-After, X-RateLimit-*, RateLimit*), by lowercase name. */
export function rateHeaders(reply: Reply): Record<string, string> {
  return Object.fromEntries([...reply.headers].filter(([name]) => RATE_HEADER.test(name)));
}
