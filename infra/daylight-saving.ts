/**
 * Where a schedule's wall-clock time meets a daylight-saving transition. EventBridge Scheduler
 * reads a cron in its time zone: in the hour a transition skips the schedule does not fire,
 * and in the hour it repeats it may fire twice. The transitions come from Intl (the runtime's
 * time zone data), no dependency.
 */

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;
/** How far ahead to look: the zone's rules rarely change, the next few years show them. */
export const DST_LOOKAHEAD_YEARS = 5;

/** One change of a zone's UTC offset, and the wall-clock minutes it skips or repeats. */
export interface OffsetTransition {
  /** The UTC instant of the change. */
  readonly at: Date;
  readonly kind: 'skipped' | 'repeated';
  /** Local date of the transition, YYYY-MM-DD. */
  readonly localDate: string;
  /** Wall-clock minutes of the day (0..1439) that do not exist (skipped) or occur twice (repeated). */
  readonly minutes: readonly number[];
}

/** A wall-clock time a cron fires at, on a transition that skips or repeats it. */
export interface DstHit {
  readonly transition: OffsetTransition;
  /** HH:MM, local. */
  readonly time: string;
}

const formats = new Map<string, Intl.DateTimeFormat>();
/** A formatter per zone: building one costs far more than formatting with it. */
const formatFor = (timeZone: string): Intl.DateTimeFormat => {
  let format = formats.get(timeZone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
    });
    formats.set(timeZone, format);
  }
  return format;
};

/** The zone's offset from UTC at `instant`, in minutes (east positive). */
export function offsetMinutes(timeZone: string, instant: number): number {
  const parts = formatFor(timeZone).formatToParts(new Date(instant));
  const get = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'));
  return Math.round((local - Math.floor(instant / MINUTE_MS) * MINUTE_MS) / MINUTE_MS);
}

/** The offset changes of `timeZone` from `from` over `years` years (none for UTC or a zone without DST). */
export function offsetTransitions(
  timeZone: string,
  from: Date,
  years: number = DST_LOOKAHEAD_YEARS,
): OffsetTransition[] {
  const out: OffsetTransition[] = [];
  const end = from.getTime() + years * 365.25 * DAY_MS;
  let t = Math.floor(from.getTime() / MINUTE_MS) * MINUTE_MS;
  let before = offsetMinutes(timeZone, t);
  // Transitions are months apart: a daily step finds each, a binary search its minute.
  for (; t < end; t += DAY_MS) {
    const next = offsetMinutes(timeZone, t + DAY_MS);
    if (next === before) continue;
    let lo = t;
    let hi = t + DAY_MS;
    while (hi - lo > MINUTE_MS) {
      const mid = lo + Math.floor((hi - lo) / 2 / MINUTE_MS) * MINUTE_MS;
      if (offsetMinutes(timeZone, mid) === before) lo = mid;
      else hi = mid;
    }
    out.push(transitionAt(hi, before, next));
    before = next;
  }
  return out;
}

function transitionAt(at: number, before: number, after: number): OffsetTransition {
  // Skipped: the wall clock jumps from at+before to at+after. Repeated: it falls back from
  // at+before to at+after and runs through those minutes again.
  const kind = after > before ? 'skipped' : 'repeated';
  const first = at + Math.min(before, after) * MINUTE_MS;
  const count = Math.abs(after - before);
  const minutes = Array.from({ length: count }, (_, i) => {
    const wall = new Date(first + i * MINUTE_MS);
    return wall.getUTCHours() * 60 + wall.getUTCMinutes();
  });
  return {
    at: new Date(at),
    kind,
    localDate: new Date(first).toISOString().slice(0, 10),
    minutes,
  };
}

/**
 * The values a cron field (Scheduler syntax: `*`, `n`, `a-b`, `a,b`, `x/step`) matches in
 * `min..max`; undefined for what this does not read (names, `L`, `W`, `#`): no warning then.
 */
export function cronFieldValues(field: string, min: number, max: number): Set<number> | undefined {
  const values = new Set<number>();
  for (const part of field.split(',')) {
    const m = /^(\*|\d+)(?:-(\d+))?(?:\/(\d+))?$/.exec(part);
    if (m === null) return undefined;
    const [, start, rangeEnd, step] = m;
    const from = start === '*' ? min : Number(start);
    const to = start === '*' ? max : rangeEnd !== undefined ? Number(rangeEnd) : step ? max : from;
    const by = step === undefined ? 1 : Number(step);
    if (by < 1 || from < min || to > max) return undefined;
    for (let v = from; v <= to; v += by) values.add(v);
  }
  return values;
}

/**
 * The wall-clock times of a six-field cron that fall in a skipped or repeated hour of
 * `timeZone` over the next years. Only minutes and hours are read: the transitions fall on
 * dates the day fields could also match, so a cron at such a time is flagged whatever its days.
 */
export function daylightSavingHits(
  cron: string,
  timeZone: string,
  from: Date,
  years: number = DST_LOOKAHEAD_YEARS,
): DstHit[] {
  const [minuteField, hourField] = cron.trim().split(/\s+/);
  if (minuteField === undefined || hourField === undefined) return [];
  const minutes = cronFieldValues(minuteField, 0, 59);
  const hours = cronFieldValues(hourField, 0, 23);
  if (minutes === undefined || hours === undefined) return [];
  const hits: DstHit[] = [];
  for (const transition of offsetTransitions(timeZone, from, years)) {
    for (const m of transition.minutes) {
      if (!hours.has(Math.floor(m / 60)) || !minutes.has(m % 60)) continue;
      const time = `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
      hits.push({ transition, time });
    }
  }
  return hits;
}
