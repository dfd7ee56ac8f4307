/**
 * The four variants of a `questions[]` item (spec 2.5): Q1 scalar question, Q2 list question
 * with follow-ups, Q3 null, Q4 text entry. Every nullable field is null now and then.
 */
import type { Rng } from './prng.js';
import { freeText, label, scoreText, sentence } from './text.js';

/** Item mix: Q1, Q2, Q3, Q4 (cumulative thresholds below). */
const Q1_SHARE = 0.45;
const Q2_SHARE = 0.3;
const Q3_SHARE = 0.08;

const QUESTION_TYPES = ['yes_no', 'rating', 'single_select', 'multi_select', 'free_text', 'number'] as const;
const CHOICES = ['single-choice', 'multiple-choice'] as const;
const OPTIONS = ['Yes', 'No', 'N/A', 'Excellent', 'Good', 'Poor', 'Option "A"', '選択肢 B', '0', ''] as const;

/** Knobs of one report that change how often rare values appear. */
export interface TextMix {
  tricky: number;
  long: number;
}

function photos(rng: Rng, jobId: number): Array<string | null> {
  const out: Array<string | null> = [];
  const count = rng.pick([0, 0, 1, 2, 3]);
  for (let i = 0; i < count; i++) {
    out.push(rng.chance(0.15) ? null : `https://media.example.com/jobs/${jobId}/photos/${rng.hex(12)}.jpg`);
  }
  return out;
}

function scores(rng: Rng): { obtained_score: string; max_score: string } {
  const max = rng.pick([0, 1, 2, 5, 10]);
  return { obtained_score: scoreText(rng, rng.int(0, max * 2) / 2), max_score: String(max) };
}

function common(rng: Rng, mix: TextMix) {
  return {
    type: 'question',
    reference_code: rng.orNull(0.1, () => `Q${String(rng.int(1, 999)).padStart(3, '0')}`),
    question: rng.orNull(0.05, () => `${freeText(rng, mix.tricky)}?`),
    question_type: rng.orNull(0.1, () => rng.pick(QUESTION_TYPES)),
  };
}

/** Unknown fields the spec does not name; a client must keep them, not fail on them. */
function extraFields(rng: Rng): Record<string, unknown> {
  return rng.pick([
    { weight: rng.int(1, 3) },
    { hint: sentence(rng), visible_to_client: rng.chance(0.5) },
    { meta: { source: rng.pick(['mobile', 'web']), revision: rng.int(1, 9), tags: ['a', 'b'] } },
  ]);
}

function withExtra<T extends object>(rng: Rng, item: T): T {
  return rng.chance(0.08) ? { ...item, ...extraFields(rng) } : item;
}

/** Q1: scalar or null response, answer_type null / single / multiple, logic_questions empty. */
function scalarQuestion(rng: Rng, jobId: number, mix: TextMix): Record<string, unknown> {
  return withExtra(rng, {
    ...common(rng, mix),
    answer_type: rng.pick([null, ...CHOICES]),
    response: rng.orNull(0.2, () =>
      rng.chance(0.5) ? rng.pick(OPTIONS) : freeText(rng, mix.tricky, mix.long),
    ),
    ...scores(rng),
    comment: rng.orNull(0.6, () => freeText(rng, mix.tricky, mix.long)),
    photos: photos(rng, jobId),
    threads: rng.chance(0.8) ? [] : [sentence(rng), freeText(rng, mix.tricky)],
    logic_questions: [],
  });
}

function logicQuestion(rng: Rng, mix: TextMix): Record<string, unknown> {
  const responses: string[] = [];
  const count = rng.int(0, 2);
  for (let i = 0; i < count; i++) responses.push(rng.pick(OPTIONS));
  return withExtra(rng, {
    reference_code: rng.orNull(0.2, () => `L${String(rng.int(1, 999)).padStart(3, '0')}`),
    question: rng.orNull(0.1, () => `${freeText(rng, mix.tricky)}?`),
    question_type: rng.orNull(0.2, () => rng.pick(QUESTION_TYPES)),
    answer_type: rng.orNull(0.3, () => rng.pick([...CHOICES, 'free-text'])),
    response: responses,
    ...scores(rng),
    threads: rng.chance(0.5) ? freeText(rng, mix.tricky) : [],
  });
}

function threadsObject(rng: Rng, mix: TextMix): Record<string, unknown> {
  return rng.pick([
    () => ({}),
    () => ({ note: freeText(rng, mix.tricky) }),
    () => ({ '1': { author: label(rng), body: freeText(rng, mix.tricky), at: '2024-03-01T10:00:00Z' } }),
    () => ({ replies: [sentence(rng), null], count: 2 }),
  ])();
}

/** Q2: list response (possibly empty), threads object, 0..3 follow-up questions. */
function listQuestion(rng: Rng, jobId: number, mix: TextMix): Record<string, unknown> {
  const response: string[] = [];
  const count = rng.int(0, 3);
  for (let i = 0; i < count; i++)
    response.push(rng.chance(0.8) ? rng.pick(OPTIONS) : freeText(rng, mix.tricky));
  const logic: Array<Record<string, unknown>> = [];
  const logicCount = rng.pick([0, 1, 1, 2, 3]);
  for (let i = 0; i < logicCount; i++) logic.push(logicQuestion(rng, mix));
  return withExtra(rng, {
    ...common(rng, mix),
    answer_type: rng.pick(CHOICES),
    response,
    ...scores(rng),
    comment: rng.orNull(0.6, () => freeText(rng, mix.tricky, mix.long)),
    photos: photos(rng, jobId),
    threads: threadsObject(rng, mix),
    logic_questions: logic,
  });
}

/** Q4: a text entry inside questions[]; `answer` is always a string (maybe empty). */
function textEntryItem(rng: Rng, mix: TextMix): Record<string, unknown> {
  return withExtra(rng, {
    type: 'text_entry',
    description: rng.orNull(0.25, () => label(rng)),
    answer: rng.chance(0.1) ? '' : freeText(rng, mix.tricky, mix.long),
  });
}

/** One `questions[]` item of any variant. */
export function questionItem(rng: Rng, jobId: number, mix: TextMix): Record<string, unknown> | null {
  const roll = rng.next();
  if (roll < Q1_SHARE) return scalarQuestion(rng, jobId, mix);
  if (roll < Q1_SHARE + Q2_SHARE) return listQuestion(rng, jobId, mix);
  if (roll < Q1_SHARE + Q2_SHARE + Q3_SHARE) return null;
  return textEntryItem(rng, mix);
}
