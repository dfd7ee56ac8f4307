/**
 * Report and list items → table rows (docs/query.md#tables). Pure functions: no I/O,
 * no clock; the run's identity and time come in through {@link RowContext}. Every row carries
 * exactly the columns of its table in `TABLES` (the unit tests hold the two together).
 */
import type {
  CampaignItem,
  Gallery,
  JobItem,
  LogicQuestion,
  QuestionItem,
  Report,
  Section,
} from '../../api/schemas.js';
import { ExporterError } from '../../errors.js';
import { INT32_MAX, INT32_MIN, type Row, type TableName } from '../tables.js';

/** What every row of one run shares. */
export interface RowContext {
  runId: string;
  /** When the rows are written; one instant for the whole run or batch. */
  exportedAt: Date;
}

/** Receives rows table by table (a columnar buffer, an array per table, a counter in tests). */
export interface RowSink {
  add(table: TableName, row: Row): void;
}

/** The request path's identity of a report. */
export interface ReportIds {
  campaignId: number;
  jobId: number;
}

/**
 * A value kept "as received" in a string column: strings as is, JSON null or a missing field as
 * SQL NULL, anything else as its JSON text.
 */
export function asText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/**
 * The row of a campaign list item (table `campaigns`). `raw` is the item as received: zod's
 * parsed copy puts the schema's keys first, and `item_json` is the whole item as sent.
 */
export function campaignRow(item: CampaignItem, ctx: RowContext, raw: unknown = item): Row {
  return {
    campaign_id: item.id,
    campaign_name: asText(item.campaign_name),
    campaign_status: asText(item.campaign_status),
    start_date: asText(item.start_date),
    end_date: asText(item.end_date),
    completed_at: asText(item.completed_at),
    created_at: asText(item.created_at),
    item_json: JSON.stringify(raw),
    run_id: ctx.runId,
    exported_at: ctx.exportedAt,
  };
}

/** The row of a job list item (table `jobs`); `campaignId` is the listing's path parameter, `raw` as in campaignRow. */
export function jobRow(item: JobItem, campaignId: number, ctx: RowContext, raw: unknown = item): Row {
  const status = item.job_status;
  return {
    job_id: item.id,
    campaign_id: campaignId,
    // The spec does not type list items; only a value that fits the INT32 column is kept.
    job_status:
      Number.isInteger(status) && (status as number) >= INT32_MIN && (status as number) <= INT32_MAX
        ? (status as number)
        : null,
    job_score_percentage: asText(item.job_score_percentage),
    item_json: JSON.stringify(raw),
    run_id: ctx.runId,
    exported_at: ctx.exportedAt,
  };
}

/**
 * Appends every row one report yields to `sink`: one `reports` row, then the rows of its
 * sections, questions (with follow-ups), text entries, inputs and media images.
 *
 * `job_id` in every row is `data.job.id`; it must equal the path's job id, else this throws
 * (a report answered for another job is a provider bug, not data).
 *
 * @example
 * const rows: Row[] = [];
 * appendReportRows({ add: (_t, r) => rows.push(r) }, report, { campaignId: 7, jobId: 42 }, ctx);
 */
export function appendReportRows(sink: RowSink, report: Report, ids: ReportIds, ctx: RowContext): void {
  const { job } = report;
  if (job.id !== ids.jobId) {
    throw new ExporterError(`report of job ${ids.jobId} names job ${job.id}`);
  }
  const { runId, exportedAt } = ctx;
  sink.add('reports', {
    job_id: job.id,
    campaign_id: ids.campaignId,
    report_campaign_id: job.campaign.id,
    campaign_name: job.campaign.campaign_name,
    job_status: job.job_status,
    job_score_percentage: job.job_score_percentage,
    location_id: job.location.id,
    location_code: job.location.location_code,
    location_name: job.location.location_name,
    is_competitor: job.location.is_competitor,
    competitor_name: job.location.competitor_name,
    report_id: job.report.id,
    report_type: job.report.report_type,
    survey_id: job.report.survey_id,
    survey_name: job.report.survey_name,
    run_id: runId,
    exported_at: exportedAt,
  });
  const key: SectionKey = { jobId: job.id, campaignId: ids.campaignId, runId, exportedAt };
  report.sections.forEach((section, sectionIndex) => {
    appendSectionRows(sink, section, sectionIndex, key);
  });
}

interface SectionKey {
  jobId: number;
  campaignId: number;
  runId: string;
  exportedAt: Date;
}

function appendSectionRows(sink: RowSink, section: Section, sectionIndex: number, key: SectionKey): void {
  const { jobId, campaignId, runId, exportedAt } = key;
  const sectionId = section.id;
  sink.add('sections', {
    job_id: jobId,
    campaign_id: campaignId,
    section_index: sectionIndex,
    section_id: sectionId,
    section_title: section.section_title,
    sort_order: section.sort_order,
    percentage: section.percentage,
    obtained_score: section.obtained_score,
    max_score: section.max_score,
    run_id: runId,
    exported_at: exportedAt,
  });
  const at: Place = { jobId, campaignId, sectionIndex, sectionId, runId, exportedAt };
  section.questions.forEach((item, questionIndex) => {
    appendQuestionRows(sink, item, questionIndex, at);
  });
  section.text_entries.forEach((entry, entryIndex) => {
    sink.add('text_entries', textEntryRow(at, entryIndex, 'text_entries', entry.description, entry.answer));
  });
  section.inputs.forEach((input, inputIndex) => {
    if (input === null) return;
    sink.add('inputs', {
      job_id: jobId,
      campaign_id: campaignId,
      section_index: sectionIndex,
      section_id: sectionId,
      input_index: inputIndex,
      input_type: input.input_type,
      description: input.description,
      answer: asText(input.answer),
      measurement: 'measurement' in input ? (input.measurement as string | null) : null,
      run_id: runId,
      exported_at: exportedAt,
    });
  });
  section.media_galleries.forEach((gallery, galleryIndex) => {
    if (gallery !== null) appendImageRows(sink, gallery, galleryIndex, at);
  });
}

/**
 * Where a child row sits: its report, section and run. Rows are written as whole object
 * literals (no spreads): one shape per table keeps flattening and encoding fast.
 */
interface Place {
  jobId: number;
  campaignId: number;
  sectionIndex: number;
  sectionId: string;
  runId: string;
  exportedAt: Date;
}

function textEntryRow(
  at: Place,
  entryIndex: number,
  source: 'text_entries' | 'questions',
  description: string | null,
  answer: string | null,
): Row {
  return {
    job_id: at.jobId,
    campaign_id: at.campaignId,
    section_index: at.sectionIndex,
    section_id: at.sectionId,
    entry_index: entryIndex,
    source,
    description,
    answer,
    run_id: at.runId,
    exported_at: at.exportedAt,
  };
}

function appendQuestionRows(sink: RowSink, item: QuestionItem, index: number, at: Place): void {
  if (item === null) return;
  if (item.type === 'text_entry') {
    sink.add('text_entries', textEntryRow(at, index, 'questions', item.description, item.answer));
    return;
  }
  const { response } = item;
  sink.add('questions', {
    job_id: at.jobId,
    campaign_id: at.campaignId,
    section_index: at.sectionIndex,
    section_id: at.sectionId,
    question_index: index,
    logic_index: null,
    reference_code: item.reference_code,
    question: item.question,
    question_type: item.question_type,
    answer_type: item.answer_type,
    response: Array.isArray(response) ? response : response === null ? [] : [response],
    response_is_list: Array.isArray(response),
    obtained_score: item.obtained_score,
    max_score: item.max_score,
    comment: item.comment,
    photos: item.photos,
    threads_json: jsonText(item.threads),
    run_id: at.runId,
    exported_at: at.exportedAt,
  });
  // Q1's logic_questions is always empty; only Q2 gives follow-up rows.
  (item.logic_questions as readonly LogicQuestion[]).forEach((logic, logicIndex) => {
    sink.add('questions', {
      job_id: at.jobId,
      campaign_id: at.campaignId,
      section_index: at.sectionIndex,
      section_id: at.sectionId,
      question_index: index,
      logic_index: logicIndex,
      reference_code: logic.reference_code,
      question: logic.question,
      question_type: logic.question_type,
      answer_type: logic.answer_type,
      response: logic.response,
      response_is_list: true,
      obtained_score: logic.obtained_score,
      max_score: logic.max_score,
      comment: null,
      photos: null,
      threads_json: jsonText(logic.threads),
      run_id: at.runId,
      exported_at: at.exportedAt,
    });
  });
}

/**
 * JSON text of a value that is never null. The empty `[]` and `{}` most questions carry share
 * one string each instead of a new one per row (less garbage on big batches).
 */
function jsonText(value: unknown): string {
  if (Array.isArray(value) && value.length === 0) return '[]';
  if (
    typeof value === 'object' &&
    value !== null &&
    Object.getPrototypeOf(value) === Object.prototype &&
    Object.keys(value).length === 0
  ) {
    return '{}';
  }
  return JSON.stringify(value);
}

/** I2/I3 answers: strings as is, null as NULL, objects and arrays as JSON text. */
function appendImageRows(sink: RowSink, gallery: Gallery, galleryIndex: number, at: Place): void {
  gallery.images.forEach((image, imageIndex) => {
    if (image === null) return;
    sink.add('media_images', {
      job_id: at.jobId,
      campaign_id: at.campaignId,
      section_index: at.sectionIndex,
      section_id: at.sectionId,
      gallery_index: galleryIndex,
      image_index: imageIndex,
      gallery_description: gallery.description,
      view_type: gallery.view_type,
      url: image.url,
      thumb_url: image.thumb_url,
      caption: image.caption,
      run_id: at.runId,
      exported_at: at.exportedAt,
    });
  });
}
