/**
 * The Integration API client (spec sections 2, 4, 5, 7): bearer auth, pagination, error
 * classification, retries with backoff, and adaptive rate limiting shared by the process.
 */
import type { z } from 'zod';
import { ConfigError, InterruptedError, ListingError, TransientApiError } from '../errors.js';
import { bodyLimitBytes, RUN_DEFAULTS } from '../run-defaults.js';
import { API_PATH_PREFIX, normalizeBaseUrl } from './base-url.js';
import { type Clock, systemClock } from './clock.js';
import { accessDenied, authFailure, isKeyRestriction, redactor, verifyNotFound } from './failures.js';
import { type Classified, classify, type HttpResult, httpGet } from './http.js';
import { depthIssue } from './json-depth.js';
import { AdaptiveRateLimiter, type RateLimiter, RateLimitWaitError, type Release } from './limiter.js';
import { issuesOf, type ListedItem, type ReportOutcome } from './outcome.js';
import { type ItemSchema, type ListedPage, type ListingStart, listPages, paginate } from './pagination.js';
import { parseRateLimitHeaders } from './rate-limit-headers.js';
import {
  decideRetry,
  parseRetryAfter,
  policyForFailure,
  type RetryPolicy,
  resolveRetryPolicy,
} from './retry.js';
import {
  type CampaignItem,
  CampaignItemSchema,
  EXPORT_PER_PAGE,
  type JobItem,
  JobItemSchema,
  type ListEnvelope,
  ListEnvelopeSchema,
  PER_PAGE_VALUES,
  ReportResponseSchema,
  type SchemaContract,
  VerifyResponseSchema,
} from './schemas.js';
import { commonStep, done, redactAnswer, refusalFields, type Step, tooLarge } from './steps.js';
import { unreachableHint } from './unreachable.js';

export { AdaptiveRateLimiter, type RateLimiter } from './limiter.js';

/** The smallest page the API serves (4.5): a count needs only `meta.total`. */
const COUNT_PER_PAGE = PER_PAGE_VALUES[0];

export type { ListedItem, ReportOutcome, ValidationIssue } from './outcome.js';
export type { ListedPage, ListingCursor, ListingMemory, ListingStart } from './pagination.js';
export type { RetryPolicy } from './retry.js';

export interface ClientOptions {
  /** The {base_url}; paths are /integration/v1/client/... */
  baseUrl: string;
  apiKey: string;
  /** Called at most once per 401 to re-read the key (rotation); if it returns a different key the request is retried once. */
  refreshApiKey?: () => Promise<string>;
  /** Where the key comes from, named in the hints of auth errors (default "the configured API key"). */
  keySource?: string;
  /** Where the base URL comes from, named in the hint of an API that cannot be reached (default "the API base URL"). */
  baseUrlSource?: string;
  /** Shared by every request of the process; default: a new AdaptiveRateLimiter(). */
  limiter?: RateLimiter;
  retry?: Partial<RetryPolicy>;
  /** Per-request deadline (default 30_000). */
  requestTimeoutMs?: number;
  /** The largest answer body read, in bytes (default RUN_DEFAULTS.maxBodyMiB); a longer one is abandoned. */
  maxBodyBytes?: number;
  /** Log hook, called after every request; never contains the key. */
  onEvent?: (e: RequestEvent) => void;
  /** Time source for backoff sleeps; tests pass a fake one. */
  clock?: Clock;
  /** Randomness of the backoff jitter (default Math.random). */
  random?: () => number;
  /**
   * Ends the client's work (Ctrl-C): requests in flight are closed, a backoff or a wait for the
   * limiter is cut short, and every call then throws InterruptedError.
   */
  signal?: AbortSignal;
}

/** One request sent, for logs. */
export interface RequestEvent {
  method: 'GET';
  /** Path and query, e.g. `/integration/v1/client/campaigns?page=2&per_page=100`. */
  path: string;
  /** HTTP status (also of an answer abandoned for its size), or 'error' when no (complete) answer came. */
  status: number | 'error';
  /** 1 for the first request of a call. */
  attempt: number;
  durationMs: number;
  /** Set when the call will be retried after this many ms. */
  retryInMs?: number;
  /** Why the request failed or is retried: timeout, reset, HTTP 503, ... */
  detail?: string;
}

/** Requests sent by a client: every one, retries included. byStatus keys: "200", "429", ..., "error". */
export interface RequestStats {
  total: number;
  /** Requests that were retries of an earlier one. */
  retried: number;
  byStatus: Record<string, number>;
}

/** How long one request may take, its answer read whole, unless `requestTimeoutMs` says otherwise. */
export const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_KEY_SOURCE = 'the configured API key';

type Interpret<T> = (answer: Classified) => Step<T>;

/**
 * Reads the Integration API. Every request goes through the rate limiter; transient failures
 * are retried within the policy; the key never appears in an error, an event or a log line.
 *
 * @example
 * const client = new IntegrationApiClient({ baseUrl, apiKey, limiter });
 * const { companyName } = await client.verify();
 * for await (const campaign of client.campaigns()) if (campaign.kind === 'item') ...
 */
export class IntegrationApiClient {
  private apiKey: string;
  private readonly base: string;
  private readonly limiter: RateLimiter;
  private readonly policy: RetryPolicy;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly keySource: string;
  private readonly redact: (text: string) => string;
  private readonly counters: RequestStats = { total: 0, retried: 0, byStatus: {} };
  private refreshing: Promise<string> | undefined;

  constructor(private readonly options: ClientOptions) {
    this.base = normalizeBaseUrl(options.baseUrl);
    this.apiKey = options.apiKey;
    this.limiter = options.limiter ?? new AdaptiveRateLimiter();
    this.policy = resolveRetryPolicy(options.retry);
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxBodyBytes = options.maxBodyBytes ?? bodyLimitBytes(RUN_DEFAULTS.maxBodyMiB.value);
    if (!Number.isSafeInteger(this.maxBodyBytes) || this.maxBodyBytes < 1)
      throw new ConfigError(`maxBodyBytes must be a positive whole number, got ${options.maxBodyBytes}`);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.keySource = options.keySource ?? DEFAULT_KEY_SOURCE;
    this.redact = redactor(() => this.apiKey);
  }

  /** Verify (4.1): confirms the key is active; returns the name of the company it belongs to. */
  async verify(): Promise<{ companyName: string }> {
    const path = `${API_PATH_PREFIX}/verify`;
    return this.call(path, (answer) => {
      if (answer.kind === 'refused' && answer.status === 404) {
        const source = this.options.baseUrlSource ?? 'the API base URL';
        return {
          kind: 'throw',
          error: verifyNotFound(this.base + path, this.base, refusalFields(answer), source),
        };
      }
      if (answer.kind !== 'json') return commonStep(answer, path);
      const parsed = VerifyResponseSchema.safeParse(answer.value);
      if (!parsed.success)
        return { kind: 'retry', detail: `invalid verify answer: ${summary(parsed.error)}` };
      if (!parsed.data.data.verified) {
        const fields = { status: answer.status, errorCode: undefined, apiMessage: undefined };
        return { kind: 'throw', error: authFailure(path, fields, this.keySource) };
      }
      return done({ companyName: parsed.data.data.company.name });
    });
  }

  /** List Campaigns (4.2): every page, per_page=100; an item listed again on a later page comes as a repeat. */
  campaigns(): AsyncIterable<ListedItem<CampaignItem>> {
    return this.list(`${API_PATH_PREFIX}/campaigns`, CampaignItemSchema);
  }

  /**
   * List Campaigns (4.2) page by page, from page 1 or from where a saved listing stopped
   * (`start`), so that start-run's listing can be checkpointed and resumed.
   */
  async *campaignPages(start?: ListingStart): AsyncIterable<ListedPage<CampaignItem>> {
    const path = `${API_PATH_PREFIX}/campaigns`;
    yield* listPages(path, (page) => this.page(path, page, EXPORT_PER_PAGE), CampaignItemSchema, start);
  }

  /** List Jobs (4.3) of a campaign, every page; a campaign gone (404) throws ApiError with status 404. */
  async *jobs(campaignId: number): AsyncIterable<ListedItem<JobItem>> {
    // A generator, so that a bad id fails where the items are read, like every other error.
    yield* this.list(`${API_PATH_PREFIX}/campaigns/${pathId('campaignId', campaignId)}/jobs`, JobItemSchema);
  }

  /**
   * List Jobs (4.3) of a campaign page by page, from page 1 or from where a saved listing
   * stopped (`start`: its cursor and memory), so that a listing can be checkpointed and resumed.
   */
  async *jobPages(campaignId: number, start?: ListingStart): AsyncIterable<ListedPage<JobItem>> {
    const path = `${API_PATH_PREFIX}/campaigns/${pathId('campaignId', campaignId)}/jobs`;
    yield* listPages(path, (page) => this.page(path, page, EXPORT_PER_PAGE), JobItemSchema, start);
  }

  /**
   * Get Report (4.4). Every answer about this one report is an outcome; only what stops a run
   * throws: AuthError (401), AccessDeniedError (403 IP/domain), RequestValidationError (422).
   * `contract` says what a 200 is checked against (see `ReportOutcome`).
   */
  async getReport(
    campaignId: number,
    jobId: number,
    contract: SchemaContract = 'freeze',
  ): Promise<ReportOutcome> {
    const path = `${API_PATH_PREFIX}/campaigns/${pathId('campaignId', campaignId)}/jobs/${pathId('jobId', jobId)}/report`;
    return this.call<ReportOutcome>(path, (answer) => {
      switch (answer.kind) {
        case 'json': {
          // JSON.parse reads any depth; writing the report (raw line, JSON text columns) would overflow.
          const tooDeep = depthIssue(answer.value);
          if (tooDeep) return done({ kind: 'invalid', issues: [tooDeep], body: answer.body });
          if (contract === 'evolve') {
            const data = isJsonObject(answer.value) ? answer.value.data : undefined;
            if (isJsonObject(data)) return done({ kind: 'unchecked', raw: data });
            const issue = {
              path: 'data',
              code: 'invalid_type',
              message: `expected an object, got ${data === undefined ? 'no data' : Array.isArray(data) ? 'an array' : data === null ? 'null' : typeof data}`,
            };
            return done({ kind: 'invalid', issues: [issue], body: answer.body });
          }
          const parsed = ReportResponseSchema.safeParse(answer.value);
          if (!parsed.success)
            return done({ kind: 'invalid', issues: issuesOf(parsed.error), body: answer.body });
          // The parsed copy drops nothing (loose objects), but `raw` is the untouched JSON.parse output.
          const raw = (answer.value as { data: unknown }).data;
          return done({ kind: 'ok', report: parsed.data.data, raw });
        }
        case 'not_ready': {
          const outcome: ReportOutcome = {
            kind: 'not_ready',
            reason: answer.reason,
            message: answer.message,
          };
          if (answer.reason !== 'try_later') return done(outcome);
          return { kind: 'retry', detail: 'HTTP 409 try again later', giveUp: () => outcome };
        }
        case 'refused':
          if (answer.status === 404)
            return done({ kind: 'not_found', message: answer.apiMessage ?? 'HTTP 404' });
          if (answer.status === 403 && !isKeyRestriction(answer.errorCode)) {
            return done({
              kind: 'failed',
              error: accessDenied(path, refusalFields(answer)),
              retryable: false,
            });
          }
          return commonStep(answer, path);
        case 'too_large':
          return done({ kind: 'failed', error: tooLarge(answer, path), retryable: false });
        default: {
          const step = commonStep<ReportOutcome>(answer, path);
          if (step.kind !== 'retry') return step;
          return { ...step, giveUp: (error) => ({ kind: 'failed', error, retryable: true }) };
        }
      }
    });
  }

  /** A copy of the request counters. */
  stats(): RequestStats {
    return { ...this.counters, byStatus: { ...this.counters.byStatus } };
  }

  /**
   * How many jobs a campaign has, from the `meta.total` of its first List Jobs page at the
   * smallest `per_page` (4.3, 4.5): one small request, for estimating a run's size without
   * listing its jobs. A campaign gone (404) throws ApiError with status 404.
   */
  async jobCount(campaignId: number): Promise<number> {
    const basePath = `${API_PATH_PREFIX}/campaigns/${pathId('campaignId', campaignId)}/jobs`;
    const { meta } = await this.page(basePath, 1, COUNT_PER_PAGE);
    return meta.total;
  }

  private list<T extends { id: number }>(
    basePath: string,
    schema: ItemSchema<T>,
  ): AsyncIterable<ListedItem<T>> {
    return paginate(basePath, (page) => this.page(basePath, page, EXPORT_PER_PAGE), schema);
  }

  /** One page of a list endpoint, its envelope validated. */
  private page(basePath: string, page: number, perPage: number): Promise<ListEnvelope> {
    const path = `${basePath}?page=${page}&per_page=${perPage}`;
    return this.call<ListEnvelope>(path, (answer) => {
      // A page too large to read ends the listing, as a page that cannot be believed does.
      if (answer.kind === 'too_large') return { kind: 'throw', error: tooLarge(answer, path, ListingError) };
      if (answer.kind !== 'json') return commonStep(answer, path);
      const parsed = ListEnvelopeSchema.safeParse(answer.value);
      // A cut or garbled page: worth another try, like a truncated body.
      if (!parsed.success) return { kind: 'retry', detail: `invalid list page: ${summary(parsed.error)}` };
      return done(parsed.data);
    });
  }

  /**
   * Sends GET `path` until `interpret` is done with an answer: through the limiter, within the
   * retry policy, re-reading the key once on a 401. Counts and reports every request.
   */
  private async call<T>(path: string, interpret: Interpret<T>): Promise<T> {
    const url = new URL(this.base + path);
    const startedAt = this.clock.now();
    let refreshed = false;
    for (let attempt = 1; ; attempt += 1) {
      this.throwIfInterrupted();
      const sentKey = this.apiKey;
      const { answer, durationMs } = await this.send(url, sentKey, attempt);
      this.throwIfInterrupted();
      const step = interpret(answer);
      const status = answer.status;
      const event: RequestEvent = { method: 'GET', path, status, attempt, durationMs };
      // An answer abandoned for its size carries a plain 200: the log line says why it failed.
      if (answer.kind === 'too_large') event.detail = answer.detail;

      if (step.kind === 'done' || step.kind === 'throw') {
        this.emit(event);
        if (step.kind === 'throw') throw step.error;
        return step.value;
      }
      if (step.kind === 'unauthorized') {
        const renewal = refreshed ? { key: undefined } : await this.newKey(sentKey);
        refreshed = true;
        if (renewal.key === undefined) {
          this.emit(event);
          throw authFailure(path, step.fields, this.keySource, renewal.cause);
        }
        this.emit({ ...event, retryInMs: 0, detail: 'API key re-read' });
        continue;
      }
      const decision = decideRetry(
        { attempts: attempt, elapsedMs: this.clock.now() - startedAt, retryAfterMs: step.retryAfterMs },
        policyForFailure(this.policy, step.cause),
        this.random,
      );
      if (!decision.retry) {
        this.emit({ ...event, detail: step.detail });
        const error = new TransientApiError(`GET ${path} failed: ${step.detail}; ${decision.why}`, {
          status: typeof status === 'number' ? status : undefined,
          path,
          retryAfterMs: step.retryAfterMs,
          cause: step.cause,
          // No answer at all: what to check (the URL, DNS, the port, the network).
          ...(status === 'error' && {
            hint: unreachableHint(
              this.base,
              this.options.baseUrlSource ?? 'the API base URL',
              step.cause,
              step.detail,
            ),
          }),
        });
        if (step.giveUp) return step.giveUp(error);
        throw error;
      }
      this.emit({ ...event, retryInMs: decision.delayMs, detail: step.detail });
      if (decision.delayMs > 0)
        await this.interruptible(this.clock.sleep(decision.delayMs, this.options.signal));
    }
  }

  /**
   * One request through the limiter, counted. When the limiter holds every request back for
   * longer than this caller waits for a Retry-After, nothing is sent: the answer is a 429 the
   * API already gave, with the wait.
   */
  private async send(
    url: URL,
    key: string,
    attempt: number,
  ): Promise<{ answer: Classified; durationMs: number }> {
    let release: Release;
    try {
      const acquiring = this.limiter.acquire(this.policy.maxRetryAfterMs);
      // Interrupted while waiting: the slot, when it comes, is given back unused.
      release = await this.interruptible(acquiring, (late) => late());
    } catch (error) {
      if (!(error instanceof RateLimitWaitError)) throw error;
      const detail = `not sent: ${error.message}`;
      return {
        answer: { kind: 'throttled', status: 429, retryAfterMs: error.waitMs, detail },
        durationMs: 0,
      };
    }
    const sentAt = this.clock.now();
    let answer: Classified;
    try {
      const limits = { timeoutMs: this.timeoutMs, maxBodyBytes: this.maxBodyBytes };
      const result = await httpGet(url, this.headers(key), limits, this.options.signal);
      answer = classify(result, (value) => parseRetryAfter(value, this.clock.wallNow()));
      this.teachLimiter(result, answer, release.sentAt);
    } finally {
      release();
    }
    const label = String(answer.status);
    this.counters.total += 1;
    if (attempt > 1) this.counters.retried += 1;
    this.counters.byStatus[label] = (this.counters.byStatus[label] ?? 0) + 1;
    return { answer: redactAnswer(answer, this.redact), durationMs: Math.round(this.clock.now() - sentAt) };
  }

  private teachLimiter(result: HttpResult, answer: Classified, sentAt: number): void {
    const info =
      result.kind === 'failure' ? undefined : parseRateLimitHeaders(result.headers, this.clock.wallNow());
    if (answer.kind === 'throttled') this.limiter.onThrottle(answer.retryAfterMs, info, sentAt);
    // Only answers the API gave as itself teach the limiter that the rate is fine: a fast
    // 5xx outage must not speed it up.
    else if (answer.status !== 'error' && answer.status < 500) this.limiter.onSuccess(info, sentAt);
  }

  /** The key to retry a 401 with; none when there is no refresh, it gave the same key, or it failed (`cause`). */
  private async newKey(sentKey: string): Promise<{ key: string | undefined; cause?: unknown }> {
    // Another call already rotated the key since this request was sent.
    if (this.apiKey !== sentKey) return { key: this.apiKey };
    const refresh = this.options.refreshApiKey;
    if (refresh === undefined) return { key: undefined };
    // Concurrent 401s share one re-read.
    this.refreshing ??= refresh().finally(() => {
      this.refreshing = undefined;
    });
    let key: string;
    try {
      key = await this.refreshing;
    } catch (cause) {
      // The 401 stays the error to report; the failed re-read is its cause.
      return { key: undefined, cause };
    }
    if (typeof key !== 'string' || key === '' || key === sentKey) return { key: undefined };
    this.apiKey = key;
    return { key };
  }

  private headers(key: string): Record<string, string> {
    return {
      Accept: 'application/json',
      'Content-Type': 'application/json',
      Authorization: `Bearer ${key}`,
    };
  }

  private throwIfInterrupted(): void {
    if (this.options.signal?.aborted) throw interrupted(this.options.signal);
  }

  /**
   * `work`, or InterruptedError as soon as the signal fires; `settleLate` gets what `work`
   * resolves to after that (a limiter slot to give back).
   */
  private interruptible<T>(work: Promise<T>, settleLate?: (value: T) => void): Promise<T> {
    const signal = this.options.signal;
    if (!signal) return work;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        reject(interrupted(signal));
        if (settleLate) work.then(settleLate, () => undefined);
      };
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      work.then(
        (value) => {
          // Already rejected when the signal came first: onAbort hands `value` to settleLate.
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  private emit(event: RequestEvent): void {
    this.options.onEvent?.(event);
  }
}

/** The error of a call cut short by `signal`: its reason when it is one already. */
function interrupted(signal: AbortSignal): InterruptedError {
  return signal.reason instanceof InterruptedError
    ? signal.reason
    : new InterruptedError('the run was interrupted', { cause: signal.reason });
}

/** Path parameters are integers (spec 4.3, 4.4). */
function pathId(name: string, value: number): string {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new ConfigError(`${name} must be a non-negative integer, got ${value}`);
  return String(value);
}

function summary(error: z.ZodError): string {
  return issuesOf(error)
    .slice(0, 3)
    .map((issue) => `${issue.path || '(root)'}: ${issue.message}`)
    .join('; ');
}

/** A JSON object (not an array, not null), as JSON.parse makes it. */
const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
