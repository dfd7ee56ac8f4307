/**
 * What an answer's headers say about the API's rate limit. The spec publishes no thresholds
 * (section 8), but APIs that have a limit usually say where a client stands, in one of three
 * shapes, all read here:
 * - `X-RateLimit-Limit` / `-Remaining` / `-Reset` (Laravel's `throttle`, GitHub and many more).
 *   `Reset` is Unix epoch seconds (GitHub; Laravel on a 429), or delta seconds when small.
 * - The IETF draft's structured fields (draft-ietf-httpapi-ratelimit-headers-08 onwards):
 *   `RateLimit: "policy";r=50;t=30` and `RateLimit-Policy: "policy";q=100;w=60`.
 * - Its earlier forms: `RateLimit: limit=100, remaining=50, reset=30` (draft 07) and the
 *   separate `RateLimit-Limit` / `-Remaining` / `-Reset` fields (drafts 00-06), reset in seconds.
 */

/** Where the client stands in the API's current window, as one answer said. */
export interface RateLimitInfo {
  /** Requests a window allows. */
  limit?: number;
  /** Requests left in the window once this one was counted. */
  remaining?: number;
  /** Milliseconds from the answer until the window resets (0 when the reset is past). */
  resetInMs?: number;
}

type Headers = Record<string, string | string[] | undefined>;

/** From here, an `X-RateLimit-Reset` is a Unix time in seconds rather than a delay (2001-09-09)... */
const EPOCH_SECONDS_FROM = 1e9;
/** ...and from here, in milliseconds. */
const EPOCH_MILLISECONDS_FROM = 1e12;

/**
 * Reads the rate-limit fields of an answer's headers (names in lower case, as node:http gives
 * them); `undefined` when none is there or none makes sense. `wallNowMs` turns an epoch reset
 * into a delay. A field that is not a non-negative number is ignored, not guessed.
 */
export function parseRateLimitHeaders(headers: Headers, wallNowMs: number): RateLimitInfo | undefined {
  const info = structured(headers) ?? draft07(headers) ?? separate(headers, wallNowMs);
  return info && Object.keys(info).length > 0 ? info : undefined;
}

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A non-negative number at the start of the text ("100", "100;w=60", "7.5"), else undefined. */
function leadingNumber(text: string | undefined): number | undefined {
  const match = text === undefined ? null : /^\s*(\d+(?:\.\d+)?)/.exec(text);
  return match ? Number(match[1]) : undefined;
}

function seconds(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.round(value * 1000);
}

/** Drops the keys whose value is undefined (exactOptionalPropertyTypes). */
function defined(info: { [K in keyof RateLimitInfo]: number | undefined }): RateLimitInfo {
  return Object.fromEntries(Object.entries(info).filter(([, v]) => v !== undefined));
}

/** `"name";k=v;k=v, "name2";...`: the parameters of each list member, by member name. */
function structuredList(text: string): Map<string, Record<string, number>> {
  const members = new Map<string, Record<string, number>>();
  for (const member of text.split(',')) {
    const [name, ...params] = member.split(';').map((part) => part.trim());
    if (name === undefined || !/^"[^"]*"$|^[a-z*][\w.*-]*$/i.test(name)) continue;
    const values: Record<string, number> = {};
    for (const param of params) {
      const [key, value] = param.split('=', 2).map((part) => part.trim());
      const number = leadingNumber(value);
      if (key !== undefined && number !== undefined) values[key] = number;
    }
    members.set(name.replace(/"/g, ''), values);
  }
  return members;
}

/** Draft 08+: the member of `RateLimit` with the fewest requests left binds. */
function structured(headers: Headers): RateLimitInfo | undefined {
  const text = header(headers, 'ratelimit');
  if (text === undefined || !/;\s*r\s*=/.test(text)) return undefined;
  let binding: [string, Record<string, number>] | undefined;
  for (const [name, values] of structuredList(text)) {
    if (values.r === undefined) continue;
    if (binding === undefined || values.r < (binding[1].r ?? Number.POSITIVE_INFINITY))
      binding = [name, values];
  }
  if (binding === undefined) return undefined;
  const [name, values] = binding;
  const policy = structuredList(header(headers, 'ratelimit-policy') ?? '').get(name);
  return defined({ limit: policy?.q, remaining: values.r, resetInMs: seconds(values.t) });
}

/** Draft 07: `RateLimit: limit=100, remaining=50, reset=30`. */
function draft07(headers: Headers): RateLimitInfo | undefined {
  const text = header(headers, 'ratelimit');
  if (text === undefined || !/remaining\s*=/.test(text)) return undefined;
  const field = (key: string) =>
    leadingNumber(new RegExp(`(?:^|[,;\\s])${key}\\s*=\\s*([^,;]*)`).exec(text)?.[1]);
  return defined({
    limit: field('limit'),
    remaining: field('remaining'),
    resetInMs: seconds(field('reset')),
  });
}

/** `X-RateLimit-*`, else the early drafts' `RateLimit-*` (reset always in seconds there). */
function separate(headers: Headers, wallNowMs: number): RateLimitInfo | undefined {
  for (const prefix of ['x-ratelimit-', 'ratelimit-']) {
    const remaining = leadingNumber(header(headers, `${prefix}remaining`));
    const limit = leadingNumber(header(headers, `${prefix}limit`));
    const reset = leadingNumber(header(headers, `${prefix}reset`));
    if (remaining === undefined && limit === undefined && reset === undefined) continue;
    return defined({ limit, remaining, resetInMs: resetDelay(reset, prefix === 'x-ratelimit-', wallNowMs) });
  }
  return undefined;
}

function resetDelay(reset: number | undefined, mayBeEpoch: boolean, wallNowMs: number): number | undefined {
  if (reset === undefined || !mayBeEpoch || reset < EPOCH_SECONDS_FROM) return seconds(reset);
  const atMs = reset >= EPOCH_MILLISECONDS_FROM ? reset : reset * 1000;
  return Math.max(0, Math.round(atMs - wallNowMs));
}
