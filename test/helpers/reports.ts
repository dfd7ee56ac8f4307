/**
 * Fixture builders for reports (every variant of spec 2.5), row counts a report must yield,
 * and a fast-check arbitrary of valid reports. Realistic bulk data: realistic-reports.ts.
 */
import fc from 'fast-check';
import type {
  Gallery,
  Image,
  ListQuestion,
  LogicQuestion,
  MeasuredInput,
  QuestionItem,
  QuestionTextEntry,
  Report,
  ReportJob,
  ScalarQuestion,
  Section,
  TextEntry,
  TextInput,
} from '../../shared/api/schemas.js';

// ---- Builders: a valid value of each variant, overridable field by field ----------------

export function reportJob(overrides: Partial<ReportJob> = {}): ReportJob {
  return {
    id: 42,
    job_status: 2,
    job_score_percentage: '87.5',
    campaign: { id: 7, campaign_name: 'Spring audit' },
    location: {
      id: 301,
      location_code: 'LOC-301',
      location_name: 'Main Street',
      is_competitor: false,
      competitor_name: null,
    },
    report: { id: 9001, report_type: 'standard', survey_id: 55, survey_name: 'Store check' },
    ...overrides,
  };
}

/** Q1: a scalar (or null) response. */
export function scalarQuestion(overrides: Partial<ScalarQuestion> = {}): ScalarQuestion {
  return {
    type: 'question',
    reference_code: 'Q1',
    question: 'Was the entrance clean?',
    question_type: 'radio',
    answer_type: 'single-choice',
    response: 'Yes',
    obtained_score: '1',
    max_score: '1',
    comment: null,
    photos: [],
    threads: [],
    logic_questions: [],
    ...overrides,
  };
}

/** A follow-up question of Q2. */
export function logicQuestion(overrides: Partial<LogicQuestion> = {}): LogicQuestion {
  return {
    reference_code: 'Q2.1',
    question: 'Which items were missing?',
    question_type: 'checkbox',
    answer_type: 'multiple-choice',
    response: ['Napkins'],
    obtained_score: '0',
    max_score: '2',
    threads: [],
    ...overrides,
  };
}

/** Q2: a list response with follow-up questions. */
export function listQuestion(overrides: Partial<ListQuestion> = {}): ListQuestion {
  return {
    type: 'question',
    reference_code: 'Q2',
    question: 'Which areas were checked?',
    question_type: 'checkbox',
    answer_type: 'multiple-choice',
    response: ['Counter', 'Tables'],
    obtained_score: '2',
    max_score: '3',
    comment: 'Most areas fine',
    photos: ['https://img.example/p1.jpg', null],
    threads: { a: 1 },
    logic_questions: [logicQuestion()],
    ...overrides,
  };
}

/** Q4: a text entry inside questions[]. */
export function questionTextEntry(overrides: Partial<QuestionTextEntry> = {}): QuestionTextEntry {
  return { type: 'text_entry', description: 'Notes', answer: 'All good', ...overrides };
}

export function textEntry(overrides: Partial<TextEntry> = {}): TextEntry {
  return { description: 'Manager on duty', answer: 'Alex', ...overrides };
}

/** I2: a text input (no measurement). */
export function textInput(overrides: Partial<TextInput> = {}): TextInput {
  return { input_type: 'text', description: 'Receipt number', answer: 'R-123', ...overrides };
}

/** I3: an input with a measurement. */
export function measuredInput(overrides: Partial<MeasuredInput> = {}): MeasuredInput {
  return {
    input_type: 'number',
    description: 'Fridge temperature',
    answer: '4',
    measurement: '°C',
    ...overrides,
  };
}

export function image(overrides: Partial<Image> = {}): Image {
  return {
    url: 'https://img.example/full/1.jpg',
    thumb_url: 'https://img.example/thumb/1.jpg',
    caption: null,
    ...overrides,
  };
}

export function gallery(overrides: Partial<Gallery> = {}): Gallery {
  return { description: 'Shelves', view_type: 'grid-view', images: [image()], ...overrides };
}

export function section(overrides: Partial<Section> = {}): Section {
  return {
    id: 's-1',
    section_title: 'Entrance',
    sort_order: '1',
    percentage: '90',
    obtained_score: '9',
    max_score: 10,
    questions: [],
    text_entries: [],
    inputs: [],
    media_galleries: [],
    ...overrides,
  };
}

export function report(overrides: { job?: Partial<ReportJob>; sections?: Section[] } = {}): Report {
  return { job: reportJob(overrides.job), sections: overrides.sections ?? [section()] };
}

// ---- Counting: what the flattener must produce ----------------------------------------

/** Row counts a report must yield, counted from the report itself (non-null items only). */
export function expectedRowCounts(r: Report): Record<string, number> {
  const counts = { reports: 1, sections: 0, questions: 0, text_entries: 0, inputs: 0, media_images: 0 };
  for (const s of r.sections) {
    counts.sections++;
    for (const q of s.questions) {
      if (q === null) continue;
      if (q.type === 'text_entry') counts.text_entries++;
      else counts.questions += 1 + q.logic_questions.length;
    }
    counts.text_entries += s.text_entries.length;
    counts.inputs += s.inputs.filter((i) => i !== null).length;
    for (const g of s.media_galleries)
      if (g !== null) counts.media_images += g.images.filter((i) => i).length;
  }
  return counts;
}

// ---- fast-check: any valid report -------------------------------------------------------

const str = fc.string({ unit: 'grapheme', maxLength: 12 });
const strOrNull = fc.option(str, { nil: null });
const intOrNull = fc.option(fc.integer(), { nil: null });
const id = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });
const choice = fc.constantFrom('single-choice' as const, 'multiple-choice' as const);
const smallArray = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { maxLength: 4 });

const scalarQuestionArb: fc.Arbitrary<ScalarQuestion> = fc.record({
  type: fc.constant('question' as const),
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: fc.option(choice, { nil: null }),
  response: strOrNull,
  obtained_score: str,
  max_score: str,
  comment: strOrNull,
  photos: smallArray(strOrNull),
  threads: smallArray(str),
  logic_questions: fc.constant([]),
});

const logicQuestionArb: fc.Arbitrary<LogicQuestion> = fc.record({
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: strOrNull,
  response: smallArray(str),
  obtained_score: str,
  max_score: str,
  threads: fc.oneof(str, fc.constant<unknown[]>([])),
});

const listQuestionArb: fc.Arbitrary<ListQuestion> = fc.record({
  type: fc.constant('question' as const),
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: choice,
  response: smallArray(str),
  obtained_score: str,
  max_score: str,
  comment: strOrNull,
  photos: smallArray(strOrNull),
  threads: fc.dictionary(str, fc.jsonValue({ maxDepth: 1 })),
  logic_questions: smallArray(logicQuestionArb),
});

const questionItemArb: fc.Arbitrary<QuestionItem> = fc.oneof(
  scalarQuestionArb,
  listQuestionArb,
  fc.record({ type: fc.constant('text_entry' as const), description: strOrNull, answer: str }),
  fc.constant(null),
);

const inputArb = fc.oneof(
  fc.constant(null),
  fc.record({ input_type: fc.constant('text' as const), description: strOrNull, answer: strOrNull }),
  fc.record({
    input_type: strOrNull,
    description: strOrNull,
    answer: fc.oneof(
      fc.constant(null),
      str,
      smallArray(strOrNull),
      fc.dictionary(str, fc.jsonValue({ maxDepth: 1 })),
    ),
    measurement: strOrNull,
  }),
);

const galleryArb = fc.option(
  fc.record({
    description: strOrNull,
    view_type: str,
    images: smallArray(fc.option(fc.record({ url: str, thumb_url: str, caption: strOrNull }), { nil: null })),
  }),
  { nil: null },
);

const sectionArb: fc.Arbitrary<Section> = fc.record({
  id: str,
  section_title: str,
  sort_order: str,
  percentage: strOrNull,
  obtained_score: strOrNull,
  max_score: intOrNull,
  questions: smallArray(questionItemArb),
  text_entries: smallArray(fc.record({ description: strOrNull, answer: strOrNull })),
  inputs: smallArray(inputArb),
  media_galleries: smallArray(galleryArb),
});

/** Any report the schema accepts (loose extra fields aside). */
export const reportArb: fc.Arbitrary<Report> = fc.record({
  job: fc.record({
    id,
    job_status: fc.constantFrom(1 as const, 2 as const),
    job_score_percentage: strOrNull,
    campaign: fc.record({ id: fc.option(id, { nil: null }), campaign_name: strOrNull }),
    location: fc.record({
      id: intOrNull,
      location_code: strOrNull,
      location_name: strOrNull,
      is_competitor: fc.boolean(),
      competitor_name: strOrNull,
    }),
    report: fc.record({
      id: intOrNull,
      report_type: strOrNull,
      survey_id: intOrNull,
      survey_name: strOrNull,
    }),
  }),
  sections: smallArray(sectionArb),
});
