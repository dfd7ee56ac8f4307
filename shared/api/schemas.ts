/**
 * zod schemas for every resource of the Integration API (spec section 2), and the types
 * derived from them. Objects are loose: fields the spec does not name are kept, so that the
 * raw JSON Lines stay lossless and a new field from the provider never fails a run.
 */
import * as z from 'zod';

const int = z.number().int();
const str = z.string();
const strOrNull = z.string().nullable();
const intOrNull = int.nullable();

// ---- 2.1 Pagination envelope -----------------------------------------------------------

/** The `meta` object of every list response. */
export const PageMetaSchema = z.looseObject({
  current_page: int,
  per_page: int,
  total: int,
  last_page: int,
});
export type PageMeta = z.infer<typeof PageMetaSchema>;

/** A list response; items are validated one by one with their own schema. */
export const ListEnvelopeSchema = z.looseObject({
  data: z.array(z.unknown()),
  meta: PageMetaSchema,
});
export type ListEnvelope = z.infer<typeof ListEnvelopeSchema>;

// ---- 2.2 / 2.3 List items ----------------------------------------------------------------
// The spec names only the sortable attributes and shows neither their types nor the rest of
// the item. `id` must be an integer (it is a path parameter); everything else is kept as sent.

/** A campaign list item: `id` is required, every other field is kept as received. */
export const CampaignItemSchema = z.looseObject({
  id: int.nonnegative(),
  campaign_name: z.unknown().optional(),
  campaign_status: z.unknown().optional(),
  start_date: z.unknown().optional(),
  end_date: z.unknown().optional(),
  completed_at: z.unknown().optional(),
  created_at: z.unknown().optional(),
});
export type CampaignItem = z.infer<typeof CampaignItemSchema>;

/** A job list item: `id` is required, every other field is kept as received. */
export const JobItemSchema = z.looseObject({
  id: int.nonnegative(),
  job_status: z.unknown().optional(),
  job_score_percentage: z.unknown().optional(),
});
export type JobItem = z.infer<typeof JobItemSchema>;

// ---- 2.4 Verify ------------------------------------------------------------------------

export const VerifyResponseSchema = z.looseObject({
  data: z.looseObject({
    verified: z.boolean(),
    company: z.looseObject({ name: str }),
  }),
});
export type VerifyResponse = z.infer<typeof VerifyResponseSchema>;

// ---- 2.5 Report ------------------------------------------------------------------------

export const ReportJobSchema = z.looseObject({
  id: int,
  job_status: z.union([z.literal(1), z.literal(2)]),
  job_score_percentage: strOrNull,
  campaign: z.looseObject({ id: intOrNull, campaign_name: strOrNull }),
  location: z.looseObject({
    id: intOrNull,
    location_code: strOrNull,
    location_name: strOrNull,
    is_competitor: z.boolean(),
    competitor_name: strOrNull,
  }),
  report: z.looseObject({
    id: intOrNull,
    report_type: strOrNull,
    survey_id: intOrNull,
    survey_name: strOrNull,
  }),
});
export type ReportJob = z.infer<typeof ReportJobSchema>;

const choice = z.enum(['single-choice', 'multiple-choice']);
/** The values the spec lists for a question's `answer_type`. */
export const ANSWER_TYPES: readonly string[] = choice.options;

/** Q1: a question with a scalar (or null) response; `logic_questions` is always empty. */
export const ScalarQuestionSchema = z.looseObject({
  type: z.literal('question'),
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: choice.nullable(),
  response: strOrNull,
  obtained_score: str,
  max_score: str,
  comment: strOrNull,
  photos: z.array(strOrNull),
  threads: z.array(str),
  logic_questions: z.array(z.unknown()).length(0),
});
export type ScalarQuestion = z.infer<typeof ScalarQuestionSchema>;

/** A follow-up question of Q2; `threads` is a string or an empty array. */
export const LogicQuestionSchema = z.looseObject({
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: strOrNull,
  response: z.array(str),
  obtained_score: str,
  max_score: str,
  threads: z.union([str, z.array(z.unknown()).length(0)]),
});
export type LogicQuestion = z.infer<typeof LogicQuestionSchema>;

/** Q2: a question with a list response and follow-up (logic) questions. */
export const ListQuestionSchema = z.looseObject({
  type: z.literal('question'),
  reference_code: strOrNull,
  question: strOrNull,
  question_type: strOrNull,
  answer_type: choice,
  response: z.array(str),
  obtained_score: str,
  max_score: str,
  comment: strOrNull,
  photos: z.array(strOrNull),
  threads: z.record(z.string(), z.unknown()),
  logic_questions: z.array(LogicQuestionSchema),
});
export type ListQuestion = z.infer<typeof ListQuestionSchema>;

/** Q4: a text entry that stands inside `questions[]`. */
export const QuestionTextEntrySchema = z.looseObject({
  type: z.literal('text_entry'),
  description: strOrNull,
  answer: str,
});
export type QuestionTextEntry = z.infer<typeof QuestionTextEntrySchema>;

/** One item of `questions[]`: Q1, Q2, Q3 (null) or Q4. */
export const QuestionItemSchema = z.union([
  ScalarQuestionSchema,
  ListQuestionSchema,
  QuestionTextEntrySchema,
  z.null(),
]);
export type QuestionItem = z.infer<typeof QuestionItemSchema>;

export const TextEntrySchema = z.looseObject({ description: strOrNull, answer: strOrNull });
export type TextEntry = z.infer<typeof TextEntrySchema>;

/** I3: any input; `answer` is null, a string, an object or an array of string|null. */
export const MeasuredInputSchema = z.looseObject({
  input_type: strOrNull,
  description: strOrNull,
  answer: z.union([z.null(), str, z.array(strOrNull), z.record(z.string(), z.unknown())]),
  measurement: strOrNull,
});
export type MeasuredInput = z.infer<typeof MeasuredInputSchema>;

/** I2: a text input (no `measurement`). */
export const TextInputSchema = z.looseObject({
  input_type: z.literal('text'),
  description: strOrNull,
  answer: strOrNull,
});
export type TextInput = z.infer<typeof TextInputSchema>;

/** One item of `inputs[]`: I1 (null), I2 or I3. I3 is tried first: it is the one with `measurement`. */
export const InputItemSchema = z.union([MeasuredInputSchema, TextInputSchema, z.null()]);
export type InputItem = z.infer<typeof InputItemSchema>;

export const ImageSchema = z.looseObject({ url: str, thumb_url: str, caption: strOrNull });
export type Image = z.infer<typeof ImageSchema>;

/** A media gallery; `view_type` is any string (`grid-view` is one known value). */
export const GallerySchema = z.looseObject({
  description: strOrNull,
  view_type: str,
  images: z.array(ImageSchema.nullable()),
});
export type Gallery = z.infer<typeof GallerySchema>;

export const SectionSchema = z.looseObject({
  id: str,
  section_title: str,
  sort_order: str,
  percentage: strOrNull,
  obtained_score: strOrNull,
  max_score: intOrNull,
  questions: z.array(QuestionItemSchema),
  text_entries: z.array(TextEntrySchema),
  inputs: z.array(InputItemSchema),
  media_galleries: z.array(GallerySchema.nullable()),
});
export type Section = z.infer<typeof SectionSchema>;

/** The `data` object of Get Report. */
export const ReportSchema = z.looseObject({
  job: ReportJobSchema,
  sections: z.array(SectionSchema),
});
export type Report = z.infer<typeof ReportSchema>;

export const ReportResponseSchema = z.looseObject({ data: ReportSchema });
export type ReportResponse = z.infer<typeof ReportResponseSchema>;

/**
 * How a run treats a report that differs from the spec (docs/cli.md#reports-that-differ-from-the-spec):
 * `evolve` lands it, every value that fits in its column and the rest in `_rescued`, and reports
 * the drift; `freeze` checks it against these schemas and quarantines it whole when it fails,
 * as every run did before the option.
 */
export const SCHEMA_CONTRACTS = ['evolve', 'freeze'] as const;
export type SchemaContract = (typeof SCHEMA_CONTRACTS)[number];
export const DEFAULT_SCHEMA_CONTRACT: SchemaContract = 'evolve';

// ---- 7 Errors --------------------------------------------------------------------------

/** The error body of every non-2xx answer; 422 adds `errors` (field → messages). */
export const ErrorBodySchema = z.looseObject({
  error_code: str,
  message: str,
  errors: z.record(z.string(), z.array(str)).optional(),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** The error codes of spec section 7. */
export const ERROR_CODES = [
  'MISSING_API_KEY',
  'INVALID_API_KEY',
  'API_KEY_EXPIRED',
  'FORBIDDEN',
  'IP_NOT_ALLOWED',
  'DOMAIN_NOT_ALLOWED',
  'NOT_FOUND',
  'REPORT_NOT_READY',
  'VALIDATION_FAILED',
  'RATE_LIMIT_EXCEEDED',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Why a report is not ready: the four 409 messages of spec section 7. */
export const NOT_READY_REASONS = {
  not_published: 'The report is not available because the job has not been published yet.',
  try_later: 'The report is not available, try again later.',
  survey_missing: 'The report is not available because the survey for this job was not found.',
  no_sections: 'The report is not available because survey sections are not configured for this survey.',
} as const;
export type NotReadyReason = keyof typeof NOT_READY_REASONS | 'unknown';

/** Maps a 409 message to its reason; an unrecognised message is `unknown` (treated as final). */
export function notReadyReason(message: string): NotReadyReason {
  for (const [reason, text] of Object.entries(NOT_READY_REASONS)) {
    if (message.trim() === text) return reason as NotReadyReason;
  }
  return 'unknown';
}

/** Allowed `per_page` values (spec 4.5); the exporter always asks for the largest. */
export const PER_PAGE_VALUES = [10, 20, 50, 100] as const;
export const EXPORT_PER_PAGE = 100;
