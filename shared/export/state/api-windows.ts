/**
 * What the runs learnt of the API's fixed windows (`state/api-windows.json`): the limiter of the
 * next run starts from it instead of scanning the API's first turns again (shared/api/window-facts.ts).
 * A hint, never a promise: a missing, unreadable or invalid record only means the run learns,
 * and an answer that disagrees makes the limiter learn afresh, which the run's end records.
 * The record names the API it was learnt from (its base URL, which never holds credentials:
 * `normalizeBaseUrl`), so that an output pointed at another API does not start from its facts.
 */
import * as z from 'zod';
import { type WindowFacts, WindowFactsSchema } from '../../api/window-facts.js';
import { describeError } from '../../errors.js';
import { STATE_KEYS } from '../../layout.js';
import type { Log } from '../../log.js';
import type { Storage } from '../../storage/storage.js';
import { encodeRecord } from './records.js';

export const ApiWindowsRecordSchema = z.object({
  /** The API the facts were learnt from: its base URL as normalized (`normalizeBaseUrl`). */
  base_url: z.string(),
  facts: WindowFactsSchema,
  /** When they were written. */
  learnt_at: z.string(),
});
export type ApiWindowsRecord = z.infer<typeof ApiWindowsRecordSchema>;

/**
 * Facts whose offsets differ by less than this are the same: the learner places a turn to a
 * few milliseconds at best (window-turn.ts), and a finer change is not worth a write.
 */
const OFFSET_SLACK_MS = 1;

/** Whether two facts tell a limiter the same thing. */
export function sameWindowFacts(a: WindowFacts | undefined, b: WindowFacts | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.limit === b.limit &&
    a.turn === b.turn &&
    a.source === b.source &&
    Math.abs(a.offsetMs - b.offsetMs) < OFFSET_SLACK_MS
  );
}

/**
 * The facts stored for the API at `baseUrl`; undefined, with a line at info, when there are none
 * for it or the record cannot be read (the run learns; the next write replaces the record).
 */
export async function readWindowFacts(
  storage: Storage,
  baseUrl: string,
  log: Log,
): Promise<WindowFacts | undefined> {
  const key = STATE_KEYS.apiWindows;
  let body: Uint8Array | undefined;
  try {
    body = (await storage.get(key))?.body;
  } catch (error) {
    log.info('the API windows learnt before could not be read: this run learns them', {
      key,
      error: describeError(error),
    });
    return undefined;
  }
  if (body === undefined) {
    log.debug('no API windows learnt before: this run learns them', { key });
    return undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    json = undefined;
  }
  const parsed = ApiWindowsRecordSchema.safeParse(json);
  if (!parsed.success) {
    log.info('the API windows learnt before are not a valid record: this run learns them', {
      key,
      ...(json !== undefined && { error: z.prettifyError(parsed.error) }),
    });
    return undefined;
  }
  if (parsed.data.base_url !== baseUrl) {
    log.info('the API windows learnt before are of another API: this run learns them', {
      key,
      learnt_from: parsed.data.base_url,
    });
    return undefined;
  }
  log.debug('the limiter starts from the API windows learnt before', { key, ...parsed.data.facts });
  return parsed.data.facts;
}

/** Writes `facts` as learnt from the API at `baseUrl`, replacing what the record held. */
export async function writeWindowFacts(
  storage: Storage,
  baseUrl: string,
  facts: WindowFacts,
  now: Date,
): Promise<void> {
  const record: ApiWindowsRecord = { base_url: baseUrl, facts, learnt_at: now.toISOString() };
  await storage.put(STATE_KEYS.apiWindows, encodeRecord(record), { contentType: 'application/json' });
}

export interface WindowFactsKeeperOptions {
  storage: Storage;
  /** The API's base URL as normalized (`normalizeBaseUrl`): the record's key, never a secret. */
  baseUrl: string;
  log: Log;
  now: () => Date;
}

/**
 * One process's (or container's) view of the record: read once, written only when the limiter's
 * facts differ from what was read or last written, so that runs that learn nothing new cost one
 * read and no write.
 */
export class WindowFactsKeeper {
  private reading: Promise<WindowFacts | undefined> | undefined;
  private known: WindowFacts | undefined;

  constructor(private readonly options: WindowFactsKeeperOptions) {}

  /** The stored facts, read at the first call. */
  read(): Promise<WindowFacts | undefined> {
    this.reading ??= readWindowFacts(this.options.storage, this.options.baseUrl, this.options.log).then(
      (facts) => {
        this.known ??= facts;
        return facts;
      },
    );
    return this.reading;
  }

  /** The facts the record holds as far as this process knows: what it read, or last wrote. */
  get facts(): WindowFacts | undefined {
    return this.known;
  }

  /**
   * Writes `facts` (a limiter's `windowFacts()`) when they differ from what is known to be
   * stored; none (the limiter saw no window) leaves the record as it is. A write that fails is
   * logged and not thrown: the facts are a hint, and the next run learns. True when written.
   */
  async keep(facts: WindowFacts | undefined): Promise<boolean> {
    if (facts === undefined) return false;
    await this.read();
    if (sameWindowFacts(facts, this.known)) return false;
    const { storage, baseUrl, log, now } = this.options;
    try {
      await writeWindowFacts(storage, baseUrl, facts, now());
    } catch (error) {
      log.warn('the API windows learnt could not be kept for the next run', {
        key: STATE_KEYS.apiWindows,
        error: describeError(error),
      });
      return false;
    }
    this.known = facts;
    log.info('the API windows learnt are kept for the next run', { key: STATE_KEYS.apiWindows, ...facts });
    return true;
  }
}
