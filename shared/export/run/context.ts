/**
 * What every step of a run needs, passed in by the edge (CLI or Lambda handler): the core
 * never reads the environment and never builds its own clients.
 */
import { randomBytes } from 'node:crypto';
import type { IntegrationApiClient } from '../../api/client.js';
import type { WindowFacts } from '../../api/window-facts.js';
import type { IcebergCatalog } from '../../iceberg/catalog.js';
import type { Log } from '../../log.js';
import type { Storage } from '../../storage/storage.js';
import type { LockProcess } from '../state/lock.js';
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
  /**
   * The process that takes the output's lock and judges whether another holder is gone: this
   * one by default; the simulation gives each simulated CLI its own pid and machine.
   */
  process?: LockProcess | undefined;
  /**
   * How this run's id is made: `newRunId` by default. The freeze golden test gives the scheme
   * of the release it pins (six random digits), the one seam for that intended change.
   */
  newRunId?: ((startedAt: Date, random?: () => number, after?: string) => string) | undefined;
  /**
   * The process's limiter as it learns the API's fixed windows: a run in one process starts it
   * from what an earlier run kept in the output's state and keeps what it learnt at its end
   * (state/api-windows.ts). Absent: every run learns the windows afresh.
   */
  windows?: LimiterWindows | undefined;
}

/** The limiter's side of the API windows kept between runs (`ExportDeps.windows`). */
export interface LimiterWindows {
  /** The API's base URL as normalized: what the facts are kept under (never a secret). */
  baseUrl: string;
  /** Gives the limiter the facts to start from; called before the first request, or ignored. */
  startFrom(facts: WindowFacts | undefined): void;
  /** What the limiter knows of the windows now (`RateLimiter.windowFacts`). */
  learnt(): WindowFacts | undefined;
}

/** `deps.random`, or `Math.random`. */
export const randomOf = (deps: Pick<ExportDeps, 'random'>): (() => number) => deps.random ?? Math.random;

/** `n` lowercase hex digits from `random`. */
export function randomHex(random: () => number, n: number): string {
  let hex = '';
  for (let i = 0; i < n; i++) hex += Math.floor(random() * 16).toString(16);
  return hex;
}

/** Milliseconds of a second as 3 hex digits (`000`-`3e7`): lowercase hex of one width sorts as its number. */
const MS_DIGITS = 3;
/** Random hex digits after them: unique among starts of one millisecond (1 in 4,096 alike). */
const RANDOM_DIGITS = 3;

/**
 * A run id: `20261122T031500Z-a1b2c3`, the start's second in UTC and six hex digits. Run ids
 * order runs (the views' and `_current` tables' "newest", the supersede rules, the incremental
 * state), compared as strings: the suffix's first three digits are the start's milliseconds,
 * so that runs started in one second order by their start; the last three are random, so that
 * concurrent starts differ. (Ids made before issue 32 have six random digits: the same format.)
 * With `after` (the run that held the output's lock last), the id sorts after it even when
 * this start's clock is behind that run's: its second and milliseconds then are that run's,
 * its random digits greater.
 */
export function newRunId(startedAt: Date, random?: () => number, after?: string): string {
  const stamp = startedAt
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  const ms = startedAt.getUTCMilliseconds().toString(16).padStart(MS_DIGITS, '0');
  const id = `${stamp}-${ms}${random ? randomHex(random, RANDOM_DIGITS) : randomBytes(2).toString('hex').slice(0, RANDOM_DIGITS)}`;
  return after !== undefined && id <= after ? (runIdAfter(after, random ?? Math.random) ?? id) : id;
}

const RUN_ID = /^(\d{8}T\d{6}Z)-([0-9a-f]{6})$/;
const SUFFIX_SPAN = 16 ** (MS_DIGITS + RANDOM_DIGITS);

/** An id that sorts right after `previous` (a run id of either age): its suffix a little greater; undefined for another shape. */
function runIdAfter(previous: string, random: () => number): string | undefined {
  const match = RUN_ID.exec(previous);
  if (!match) return undefined;
  const [, stamp, suffix] = match as unknown as [string, string, string];
  const next = Number.parseInt(suffix, 16) + 1 + Math.floor(random() * 16);
  if (next < SUFFIX_SPAN) return `${stamp}-${next.toString(16).padStart(6, '0')}`;
  // The last suffix of its second: the next second's first.
  const second = Date.parse(
    stamp.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'),
  );
  return newRunId(new Date(second + 1_000), () => 0);
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
