/**
 * An independent census of the spec 2.5 variants a report contains, written from the spec (not
 * from the generator), so the coverage test can count what the generator really produced.
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every variant the generator must exercise. */
export const VARIANTS = [
  'data_extra_field',
  'job_status_1',
  'job_status_2',
  'job_score_null',
  'job_extra_field',
  'campaign_name_null',
  'location_id_null',
  'location_code_null',
  'location_name_null',
  'is_competitor',
  'report_id_null',
  'survey_id_null',
  'survey_name_null',
  'report_type_null',
  'section_id_numeric',
  'section_id_other',
  'section_max_score_null',
  'section_percentage_null',
  'section_extra_field',
  'q1',
  'q1_response_string',
  'q1_response_null',
  'q1_answer_type_null',
  'q1_answer_type_single',
  'q1_answer_type_multiple',
  'q1_threads_nonempty',
  'q2',
  'q2_response_empty',
  'q2_threads_empty_object',
  'q2_threads_nonempty',
  'q2_logic_threads_string',
  'q2_logic_threads_empty_array',
  'q2_logic_answer_type_null',
  'q3_null',
  'q4_text_entry',
  'q4_description_null',
  'question_reference_code_null',
  'question_extra_field',
  'photo_null',
  'text_entry',
  'text_entry_answer_null',
  'text_entry_description_null',
  'i1_null',
  'i2_text',
  'i2_answer_null',
  'i3_answer_null',
  'i3_answer_string',
  'i3_answer_object',
  'i3_answer_array',
  'i3_answer_array_null_item',
  'i3_input_type_null',
  'i3_measurement_null',
  'input_extra_field',
  'gallery_null',
  'gallery_images_empty',
  'view_type_grid',
  'view_type_other',
  'gallery_description_null',
  'image_null',
  'image_object',
  'caption_null',
  'image_extra_field',
  'text_emoji',
  'text_cjk',
  'text_rtl',
  'text_double_quote',
  'text_backslash',
  'text_newline',
  'text_control_char',
  'text_long_10k',
] as const;
export type Variant = (typeof VARIANTS)[number];

const keysBeyond = (o: Obj, known: string[]) => Object.keys(o).some((k) => !known.includes(k));

const Q_KEYS = [
  'type',
  'reference_code',
  'question',
  'question_type',
  'answer_type',
  'response',
  'obtained_score',
];
const QUESTION_KEYS = [...Q_KEYS, 'max_score', 'comment', 'photos', 'threads', 'logic_questions'];
const SECTION_KEYS = ['id', 'section_title', 'sort_order', 'percentage', 'obtained_score', 'max_score'];
const SECTION_ALL = [...SECTION_KEYS, 'questions', 'text_entries', 'inputs', 'media_galleries'];
const JOB_KEYS = ['id', 'job_status', 'job_score_percentage', 'campaign', 'location', 'report'];

function strings(value: unknown, out: string[]): void {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (isObj(value)) for (const v of Object.values(value)) strings(v, out);
}

function question(q: unknown, hit: (v: Variant) => void): void {
  if (q === null) {
    hit('q3_null');
    return;
  }
  if (!isObj(q)) return;
  if (q.type === 'text_entry') {
    hit('q4_text_entry');
    if (q.description === null) hit('q4_description_null');
    return;
  }
  if (q.reference_code === null) hit('question_reference_code_null');
  if (keysBeyond(q, QUESTION_KEYS)) hit('question_extra_field');
  if ((q.photos as unknown[]).includes(null)) hit('photo_null');
  if (Array.isArray(q.response)) {
    hit('q2');
    if (q.response.length === 0) hit('q2_response_empty');
    hit(Object.keys(q.threads as Obj).length === 0 ? 'q2_threads_empty_object' : 'q2_threads_nonempty');
    for (const logic of q.logic_questions as Obj[]) {
      hit(typeof logic.threads === 'string' ? 'q2_logic_threads_string' : 'q2_logic_threads_empty_array');
      if (logic.answer_type === null) hit('q2_logic_answer_type_null');
    }
    return;
  }
  hit('q1');
  hit(q.response === null ? 'q1_response_null' : 'q1_response_string');
  if (q.answer_type === null) hit('q1_answer_type_null');
  if (q.answer_type === 'single-choice') hit('q1_answer_type_single');
  if (q.answer_type === 'multiple-choice') hit('q1_answer_type_multiple');
  if ((q.threads as unknown[]).length > 0) hit('q1_threads_nonempty');
}

function input(i: unknown, hit: (v: Variant) => void): void {
  if (i === null) {
    hit('i1_null');
    return;
  }
  if (!isObj(i)) return;
  if (!('measurement' in i)) {
    hit('i2_text');
    if (i.answer === null) hit('i2_answer_null');
    return;
  }
  if (keysBeyond(i, ['input_type', 'description', 'answer', 'measurement'])) hit('input_extra_field');
  if (i.input_type === null) hit('i3_input_type_null');
  if (i.measurement === null) hit('i3_measurement_null');
  if (i.answer === null) hit('i3_answer_null');
  else if (typeof i.answer === 'string') hit('i3_answer_string');
  else if (Array.isArray(i.answer)) {
    hit('i3_answer_array');
    if (i.answer.includes(null)) hit('i3_answer_array_null_item');
  } else hit('i3_answer_object');
}

function gallery(g: unknown, hit: (v: Variant) => void): void {
  if (g === null) {
    hit('gallery_null');
    return;
  }
  if (!isObj(g)) return;
  hit(g.view_type === 'grid-view' ? 'view_type_grid' : 'view_type_other');
  if (g.description === null) hit('gallery_description_null');
  const images = g.images as unknown[];
  if (images.length === 0) hit('gallery_images_empty');
  for (const image of images) {
    if (image === null) hit('image_null');
    else if (isObj(image)) {
      hit('image_object');
      if (image.caption === null) hit('caption_null');
      if (keysBeyond(image, ['url', 'thumb_url', 'caption'])) hit('image_extra_field');
    }
  }
}

function textChecks(data: unknown, hit: (v: Variant) => void): void {
  const all: string[] = [];
  strings(data, all);
  for (const s of all) {
    if (/\p{Extended_Pictographic}/u.test(s)) hit('text_emoji');
    if (/[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]/.test(s)) hit('text_cjk');
    if (/[\u0590-\u08ff]/.test(s)) hit('text_rtl');
    if (s.includes('"')) hit('text_double_quote');
    if (s.includes('\\')) hit('text_backslash');
    if (s.includes('\n')) hit('text_newline');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point
    if (/[\u0000-\u0008]/.test(s)) hit('text_control_char');
    if (s.length >= 10_000) hit('text_long_10k');
  }
}

/** Adds the variants found in one report `data` object to `counts`. */
export function countVariants(data: unknown, counts: Map<Variant, number>): void {
  const hit = (v: Variant) => counts.set(v, (counts.get(v) ?? 0) + 1);
  if (!isObj(data) || !isObj(data.job)) return;
  const job = data.job;
  if (keysBeyond(data, ['job', 'sections'])) hit('data_extra_field');
  hit(job.job_status === 1 ? 'job_status_1' : 'job_status_2');
  if (job.job_score_percentage === null) hit('job_score_null');
  if (keysBeyond(job, JOB_KEYS)) hit('job_extra_field');
  const { campaign, location, report } = job as Record<string, Obj>;
  if (campaign?.campaign_name === null) hit('campaign_name_null');
  if (location?.id === null) hit('location_id_null');
  if (location?.location_code === null) hit('location_code_null');
  if (location?.location_name === null) hit('location_name_null');
  if (location?.is_competitor === true) hit('is_competitor');
  if (report?.id === null) hit('report_id_null');
  if (report?.survey_id === null) hit('survey_id_null');
  if (report?.survey_name === null) hit('survey_name_null');
  if (report?.report_type === null) hit('report_type_null');
  for (const section of data.sections as Obj[]) {
    hit(/^\d+$/.test(String(section.id)) ? 'section_id_numeric' : 'section_id_other');
    if (section.max_score === null) hit('section_max_score_null');
    if (section.percentage === null) hit('section_percentage_null');
    if (keysBeyond(section, SECTION_ALL)) hit('section_extra_field');
    for (const q of section.questions as unknown[]) question(q, hit);
    for (const t of section.text_entries as Obj[]) {
      hit('text_entry');
      if (t.answer === null) hit('text_entry_answer_null');
      if (t.description === null) hit('text_entry_description_null');
    }
    for (const i of section.inputs as unknown[]) input(i, hit);
    for (const g of section.media_galleries as unknown[]) gallery(g, hit);
  }
  textChecks(data, hit);
}
