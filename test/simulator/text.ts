/**
 * Text for generated resources: plain sentences most of the time, and now and then the strings
 * that break naive encoders (emoji, CJK, RTL, quotes, backslashes, newlines, control characters,
 * number-like text, markup) or a very long string.
 */
import type { Rng } from './prng.js';

const WORDS = [
  'store',
  'clean',
  'staff',
  'greeting',
  'shelf',
  'display',
  'checkout',
  'price',
  'queue',
  'friendly',
  'product',
  'uniform',
  'entrance',
  'parking',
  'restroom',
  'signage',
  'offer',
  'promotion',
  'fitting',
  'room',
] as const;

/** Strings that exercise encoding; each one is a named variant the tests can look for. */
export const TRICKY_TEXT = {
  emoji: 'Great service 👍🏽🎉 would return ✅ 👩‍👩‍👧',
  cjk: '店内は清潔でしたか？ 店员的服务很好 매장이 깨끗했습니다',
  rtl: 'هل كان الموظف ودوداً؟ שלום, האם השירות היה טוב?',
  quotes: 'He said "hello" and \'goodbye\' — «quoted» „again“',
  backslash: 'C:\\reports\\2024\\visit.txt and a literal \\n that is not a newline',
  newline: 'first line\nsecond line\r\nthird line\tafter a tab',
  control: 'bell\u0007 form feed\f nul\u0000 end',
  number_like: '0012',
  null_like: 'null',
  markup: '<b>bold</b> &amp; <script>alert("x")</script> {"json": true}',
  combining: 'Cafe\u0301 naïve façade Ærøskøbing',
} as const;

export type TrickyKind = keyof typeof TRICKY_TEXT;
const TRICKY_KINDS = Object.keys(TRICKY_TEXT) as TrickyKind[];

/** Length of the long strings: the spec sets no limit, 10k chars is well past any column default. */
export const LONG_TEXT_MIN = 10_000;

/** A capitalised sentence of `min`..`max` words. */
export function sentence(rng: Rng, min = 3, max = 9): string {
  const count = rng.int(min, max);
  const words: string[] = [];
  for (let i = 0; i < count; i++) words.push(rng.pick(WORDS));
  const first = words[0] ?? 'text';
  words[0] = first.charAt(0).toUpperCase() + first.slice(1);
  return words.join(' ');
}

/** A short label (titles, names). */
export function label(rng: Rng): string {
  return sentence(rng, 1, 4);
}

/** One of the tricky strings. */
export function tricky(rng: Rng): string {
  return TRICKY_TEXT[rng.pick(TRICKY_KINDS)];
}

/** A string of at least LONG_TEXT_MIN characters mixing plain and tricky text. */
export function longText(rng: Rng): string {
  const target = LONG_TEXT_MIN + rng.int(0, 2_000);
  const parts: string[] = [];
  let length = 0;
  while (length < target) {
    const part = rng.chance(0.2) ? tricky(rng) : sentence(rng, 8, 20);
    parts.push(part);
    length += part.length + 1;
  }
  return parts.join(' ');
}

/** Free text for answers and comments: usually a sentence, sometimes tricky, rarely long. */
export function freeText(rng: Rng, trickyShare = 0.12, longShare = 0): string {
  const roll = rng.next();
  if (roll < longShare) return longText(rng);
  if (roll < longShare + trickyShare) return tricky(rng);
  return sentence(rng);
}

const DAY_MS = 86_400_000;
/** 2024-01-01T00:00:00Z: the start of the simulated calendar. */
export const EPOCH_MS = Date.UTC(2024, 0, 1);

/** ISO timestamp `days` (fractional allowed) after the epoch, second precision, like most APIs send. */
export function isoAt(days: number): string {
  return new Date(EPOCH_MS + Math.round((days * DAY_MS) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** YYYY-MM-DD `days` after the epoch. */
export function dateAt(days: number): string {
  return new Date(EPOCH_MS + Math.floor(days) * DAY_MS).toISOString().slice(0, 10);
}

/** A score as the API sends it: a decimal string with 0 to 2 fraction digits. */
export function scoreText(rng: Rng, value: number): string {
  return value.toFixed(rng.pick([0, 1, 2]));
}
