/**
 * What every step of a run needs, passed in by the edge (CLI or Lambda handler): the core
 * never reads the environment and never builds its own clients.
 */
import { randomBytes } from 'node:crypto';
import type { IntegrationApiClient } from '../../api/client.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import type { Log } from '../../log.js';
import type { Storage } from '../../storage/storage.js';
import { addRequestCounts, emptyRequestCounts, type RequestCounts } from '../state/records.js';

/** The part of the API client the steps use. */
export type ApiClient = Pick<
  IntegrationApiClient,
  'verify' | 'campaigns' | 'campaignPages' | 'jobPages' | 'jobCount' | 'getReport' | 'stats'
>;

export interface ExportDeps {
  /**
   * A client for one step. Clients of one process share a rate limiter; each counts its own
   * requests, so a step's record holds exactly the requests it sent.
   */
  api(): ApiClient;
  storage: Storage;
  log: Log;
  now(): Date;
  /**
   * Uniform in [0, 1): run ids, record names, backoff jitter. Default `Math.random`; the
   * lifecycle simulation passes a seeded one so that a seed replays exactly.
   */
  random?: (() => number) | undefined;
  /** Waits (lock polls, backoff, lock renewal). Default a timer; the simulation's is virtual. */
  sleep?: ((ms: number) => Promise<void>) | undefined;
  /**
   * Where Iceberg runs commit their tables: Glue in AWS; default the file catalog on
   * `storage` (`iceberg/<table>/metadata/vN.metadata.json`).
   */
  catalog?: IcebergCatalog | undefined;
}

/** `deps.random`, or `Math.random`. */
export const randomOf = (deps: Pick<ExportDeps, 'random'>): (() => number) => deps.random ?? Math.random;

/** `n` lowercase hex digits from `random`. */
export function randomHex(random: () => number, n: number): string {
  let hex = '';
  for (let i = 0; i < n; i++) hex += Math.floor(random() * 16).toString(16);
  return hex;
}

/** A run id: sortable by start time, unique across concurrent starts (`20261122T031500Z-a1b2c3`). */
export function newRunId(startedAt: Date, random?: () => number): string {
  const stamp = startedAt
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `${stamp}-${random ? randomHex(random, 6) : randomBytes(3).toString('hex')}`;
}

/** A client's request counters in the manifest's shape. */
export function requestCounts(api: ApiClient): RequestCounts {
  const { total, retried, byStatus } = api.stats();
  return { total, retried, by_status: { ...byStatus } };
}

/**
 * The same dependencies, counting every request their clients send: a step that throws leaves
 * no record, and its requests would otherwise be missing from the manifest.
 */
export function countingRequests(deps: ExportDeps): { deps: ExportDeps; requests(): RequestCounts } {
  const clients: ApiClient[] = [];
  return {
    deps: {
      ...deps,
      api: () => {
        const client = deps.api();
        clients.push(client);
        return client;
      },
    },
    requests: () => clients.map(requestCounts).reduce(addRequestCounts, emptyRequestCounts()),
  };
}
