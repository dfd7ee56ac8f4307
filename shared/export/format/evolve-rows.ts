/**
 * Report → table rows under the `evolve` schema contract (docs/cli.md#reports-that-differ-from-the-spec): a
 * report lands whatever it holds, as long as `data` is an object. The row builder reads the
 * report as the spec describes it (`shared/api/schemas.ts`), and where the report differs:
 *
 * - a value that fits its column is written, whatever the spec says of it: a value the spec's
 *   enumeration (`job_status`, `answer_type`) does not list is data (`unlisted_value`);
 * - a value of another JSON type goes into its column only when the conversion loses nothing
 *   (the rules below), NULL otherwise, and is kept as it came in the row's `_rescued`
 *   (`type_mismatch`); a `null` where the spec allows none is NULL, and counted, not rescued;
 * - a field the spec does not name goes into `_rescued` of its level's row (`new_field`), the
 *   whole subtree under it as one value;
 * - an item of `questions[]` or `inputs[]` that is none of the spec's variants becomes a row of
 *   that table with the columns it has, and the rest in `_rescued` (`new_variant`);
 * - a field the spec gives every object of its kind that is absent is NULL (`missing_field`).
 *
 * Conversions: a string column takes a number or a boolean as its JSON text; an integer column
 * takes a string holding an integer (`"42"`, no sign but `-`, no decimals, no exponent) in the
 * column's range; nothing else converts (a decimal is never an integer, a string is never a
 * boolean). An array<string> column takes each item so: numbers and booleans as their JSON
 * text, objects and arrays NULL (and rescued at their position). A JSON text column
 * (`threads_json`, `inputs.answer`) takes any value.
 *
 * `_rescued` is a JSON object whose members sit at their path relative to the row's object:
 * `{"job": {"location": {"floor": 3}}}` in a `reports` row, `{"points": "7.5"}` in a
 * `questions` row. An item of an array that has a column is kept at its position in an array
 * whose other positions are null (`{"photos": [null, null, 7]}`: `$.photos[2]`); an array in
 * `_rescued` otherwise is the value as it came. An item that is not an object is kept whole as
 * `{"$value": …}`. A gallery has no row of its own: what does not fit in a gallery sits in its
 * section's row, at `media_galleries[<position>]`.
 *
 * Pure, like `flatten.ts`: no I/O, no clock. Drift is counted into a {@link DriftTally}.
 */
import {
  ANSWER_TYPES as ANSWER_TYPE_VALUES,
  GallerySchema,
  ImageSchema,
  LogicQuestionSchema,
  MeasuredInputSchema,
  QuestionTextEntrySchema,
  ReportJobSchema,
  ReportSchema,
  ScalarQuestionSchema,
  SectionSchema,
  TextEntrySchema,
  TextInputSchema,
} from '../../api/schemas.js';
import { ExporterError } from '../../errors.js';
import type { DriftKind, DriftTally } from '../schema-drift.js';
import { jsonTypeOf } from '../schema-drift.js';
import { INT32_MAX, INT32_MIN, RESCUED_COLUMN, type Row } from '../tables.js';
import type { ReportIds, RowContext, RowSink } from './flatten.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The key that holds an item that is not an object, kept whole. */
export const WHOLE_VALUE = '$value';

const fieldsOf = (schema: { shape: Record<string, unknown> }): ReadonlySet<string> =>
  new Set(Object.keys(schema.shape));

/** The spec's enumerations, as `shared/api/schemas.ts` lists them. */
const JOB_STATUSES = new Set<unknown>(ReportJobSchema.shape.job_status.options.map((o) => o.value));
const ANSWER_TYPES = new Set<unknown>(ANSWER_TYPE_VALUES);

/** The fields the spec names at each level (its zod schemas'); any other is `new_field`. */
export const SPEC_FIELDS = {
  data: fieldsOf(ReportSchema),
  job: fieldsOf(ReportJobSchema),
  campaign: fieldsOf(ReportJobSchema.shape.campaign),
  location: fieldsOf(ReportJobSchema.shape.location),
  report: fieldsOf(ReportJobSchema.shape.report),
  section: fieldsOf(SectionSchema),
  // Q1 and Q2 name the same fields.
  question: fieldsOf(ScalarQuestionSchema),
  logic: fieldsOf(LogicQuestionSchema),
  questionTextEntry: fieldsOf(QuestionTextEntrySchema),
  textEntry: fieldsOf(TextEntrySchema),
  measuredInput: fieldsOf(MeasuredInputSchema),
  textInput: fieldsOf(TextInputSchema),
  gallery: fieldsOf(GallerySchema),
  image: fieldsOf(ImageSchema),
} as const;

/** The fields of a question item that have a column: a new kind of item keeps only these out of `_rescued`. */
const QUESTION_COLUMNS = new Set(
  [...SPEC_FIELDS.question].filter((f) => f !== 'type' && f !== 'logic_questions'),
);

/**
 * One object of the report being read: where its drift is counted (`path`, relative to
 * `data`) and where its rescued values go (`rescued`, the row's, under `at`).
 */
interface Level {
  readonly value: Json;
  readonly path: string;
  readonly row: RescueTarget;
  readonly at: readonly Step[];
}

/** A step of a path inside a row's object: a member's name, or a position in an array. */
type Step = string | number;

/** The row's object itself (no step): shared, since paths are only ever extended by copy. */
const ROW_TOP: readonly Step[] = Object.freeze([]);

/** The `_rescued` object of one row, made when its first value comes. */
class RescueTarget {
  value: Json | null = null;

  /** Puts `value` at `at` + `key`; a numeric step makes an array, its other positions null. */
  put(at: readonly Step[], key: Step, value: unknown): void {
    this.value ??= {};
    let node: Json | unknown[] = this.value;
    for (let i = 0; i < at.length; i++) {
      const step = at[i]!;
      const kind = typeof (i + 1 < at.length ? at[i + 1] : key) === 'number' ? 'array' : 'object';
      let next = (node as Record<Step, unknown>)[step];
      if (kind === 'array' ? !Array.isArray(next) : !isObject(next)) {
        next = kind === 'array' ? [] : {};
        (node as Record<Step, unknown>)[step] = next;
      }
      node = next as Json | unknown[];
    }
    (node as Record<Step, unknown>)[key] = value;
  }

  /** The `_rescued` cell (the holes of a sparse array are written as null). */
  cell(): string | null {
    return this.value === null ? null : JSON.stringify(this.value);
  }
}

const INTEGER_TEXT = /^-?(0|[1-9][0-9]*)$/;

/**
 * Appends every row one report yields to `sink`, under `evolve`, and counts its drift into
 * `drift` (after `drift.startReport`). Rows are keyed by the ids the exporter asked for.
 * Throws only when `data.job.id` names another job than the one asked for.
 *
 * @example
 * drift.startReport(42);
 * appendEvolvedReportRows(buffer, raw, { campaignId: 7, jobId: 42 }, ctx, drift);
 */
export function appendEvolvedReportRows(
  sink: RowSink,
  data: Json,
  ids: ReportIds,
  ctx: RowContext,
  drift: DriftTally,
): void {
  new ReportRows(sink, ids, ctx, drift).append(data);
}

/**
 * The job id a report names, when it names one that can be compared with the path's: an integer
 * or a string holding one. Undefined when `data.job.id` is absent or of another kind.
 */
export function namedJobId(data: unknown): number | undefined {
  if (!isObject(data) || !isObject(data.job)) return undefined;
  const id = data.job.id;
  if (typeof id === 'number' && Number.isSafeInteger(id)) return id;
  if (typeof id === 'string' && INTEGER_TEXT.test(id)) {
    const n = Number(id);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

type Kind = 'string' | 'int' | 'bigint' | 'boolean';

class ReportRows {
  readonly #sink: RowSink;
  readonly #ids: ReportIds;
  readonly #ctx: RowContext;
  readonly #drift: DriftTally;

  constructor(sink: RowSink, ids: ReportIds, ctx: RowContext, drift: DriftTally) {
    this.#sink = sink;
    this.#ids = ids;
    this.#ctx = ctx;
    this.#drift = drift;
  }

  append(data: Json): void {
    const named = namedJobId(data);
    if (named !== undefined && named !== this.#ids.jobId) {
      throw new ExporterError(`report of job ${this.#ids.jobId} names job ${named}`);
    }
    const row = new RescueTarget();
    const top: Level = { value: data, path: '', row, at: ROW_TOP };
    this.#unknown(top, SPEC_FIELDS.data);
    const job = this.#object(top, 'job', true);
    const campaign = job && this.#object(job, 'campaign', true);
    const location = job && this.#object(job, 'location', true);
    const report = job && this.#object(job, 'report', true);
    if (job) {
      this.#unknown(job, SPEC_FIELDS.job);
      // The row's key is the path's job id; `id` is only checked (and rescued when not an integer).
      this.#value(job, 'id', 'bigint', false);
    }
    const jobStatus = job ? this.#value(job, 'job_status', 'int', false) : null;
    if (job && jobStatus !== null && !JOB_STATUSES.has(jobStatus)) {
      this.#count(job, 'job_status', 'unlisted_value', String(jobStatus));
    }
    const { runId, exportedAt } = this.#ctx;
    const { jobId, campaignId } = this.#ids;
    if (campaign) this.#unknown(campaign, SPEC_FIELDS.campaign);
    if (location) this.#unknown(location, SPEC_FIELDS.location);
    if (report) this.#unknown(report, SPEC_FIELDS.report);
    const reportsRow: Row = {
      job_id: jobId,
      campaign_id: campaignId,
      report_campaign_id: campaign ? this.#value(campaign, 'id', 'bigint', true) : null,
      campaign_name: campaign ? this.#value(campaign, 'campaign_name', 'string', true) : null,
      job_status: jobStatus,
      job_score_percentage: job ? this.#value(job, 'job_score_percentage', 'string', true) : null,
      location_id: location ? this.#value(location, 'id', 'bigint', true) : null,
      location_code: location ? this.#value(location, 'location_code', 'string', true) : null,
      location_name: location ? this.#value(location, 'location_name', 'string', true) : null,
      is_competitor: location ? this.#value(location, 'is_competitor', 'boolean', false) : null,
      competitor_name: location ? this.#value(location, 'competitor_name', 'string', true) : null,
      report_id: report ? this.#value(report, 'id', 'bigint', true) : null,
      report_type: report ? this.#value(report, 'report_type', 'string', true) : null,
      survey_id: report ? this.#value(report, 'survey_id', 'bigint', true) : null,
      survey_name: report ? this.#value(report, 'survey_name', 'string', true) : null,
      run_id: runId,
      exported_at: exportedAt,
      [RESCUED_COLUMN]: null,
    };
    const sections = this.#array(top, 'sections');
    // The reports row's `_rescued` is complete once its own levels are read.
    reportsRow[RESCUED_COLUMN] = row.cell();
    this.#sink.add('reports', reportsRow);
    for (let i = 0; i < (sections?.length ?? 0); i++) this.#section(sections![i], i);
  }

  #section(item: unknown, sectionIndex: number): void {
    const path = 'sections[]';
    if (item === null) {
      this.#drift.add(path, 'type_mismatch', 'null');
      return;
    }
    if (!isObject(item)) {
      this.#sink.add(
        'sections',
        this.#sectionRow(sectionIndex, null, null, this.#whole(item, path, 'type_mismatch')),
      );
      return;
    }
    const row = new RescueTarget();
    const level: Level = { value: item, path, row, at: ROW_TOP };
    this.#unknown(level, SPEC_FIELDS.section);
    const sectionId = this.#value(level, 'id', 'string', false) as string | null;
    const at: Place = {
      jobId: this.#ids.jobId,
      campaignId: this.#ids.campaignId,
      sectionIndex,
      sectionId,
      path,
    };
    const questions = this.#array(level, 'questions');
    const textEntries = this.#array(level, 'text_entries');
    const inputs = this.#array(level, 'inputs');
    const galleries = this.#array(level, 'media_galleries');
    // Galleries' values that do not fit land in this row: read them before it is written.
    const images: ImageRows[] = [];
    for (let i = 0; i < (galleries?.length ?? 0); i++) {
      const rows = this.#gallery(level, galleries![i], i, at);
      if (rows) images.push(rows);
    }
    this.#sink.add('sections', this.#sectionRow(sectionIndex, sectionId, level, row));
    for (let i = 0; i < (questions?.length ?? 0); i++) this.#question(questions![i], i, at);
    for (let i = 0; i < (textEntries?.length ?? 0); i++) this.#textEntry(textEntries![i], i, at);
    for (let i = 0; i < (inputs?.length ?? 0); i++) this.#input(inputs![i], i, at);
    for (const rows of images) this.#images(rows, at);
  }

  #sectionRow(sectionIndex: number, sectionId: string | null, level: Level | null, row: RescueTarget): Row {
    const cells: Row = {
      job_id: this.#ids.jobId,
      campaign_id: this.#ids.campaignId,
      section_index: sectionIndex,
      section_id: sectionId,
      section_title: level ? this.#value(level, 'section_title', 'string', false) : null,
      sort_order: level ? this.#value(level, 'sort_order', 'string', false) : null,
      percentage: level ? this.#value(level, 'percentage', 'string', true) : null,
      obtained_score: level ? this.#value(level, 'obtained_score', 'string', true) : null,
      max_score: level ? this.#value(level, 'max_score', 'bigint', true) : null,
      run_id: this.#ctx.runId,
      exported_at: this.#ctx.exportedAt,
      [RESCUED_COLUMN]: null,
    };
    cells[RESCUED_COLUMN] = row.cell();
    return cells;
  }

  #question(item: unknown, questionIndex: number, at: Place): void {
    if (item === null) return; // Q3
    const path = `${at.path}.questions[]`;
    if (!isObject(item)) {
      const whole = this.#whole(item, path, 'new_variant');
      this.#sink.add('questions', this.#questionRow(at, questionIndex, null, null, whole, null));
      return;
    }
    const row = new RescueTarget();
    const level: Level = { value: item, path, row, at: ROW_TOP };
    if (item.type === 'text_entry') {
      this.#unknown(level, SPEC_FIELDS.questionTextEntry);
      this.#sink.add('text_entries', this.#textEntryRow(at, questionIndex, 'questions', level, false));
      return;
    }
    const known = item.type === 'question';
    if (known) {
      this.#unknown(level, SPEC_FIELDS.question);
    } else {
      // A new kind of item: the columns it has, and everything else (its `type` too) rescued.
      this.#drift.add(path, 'new_variant', typeof item.type === 'string' ? item.type : jsonTypeOf(item.type));
      // `type` is always there for such a row, null when the item had none: it tells the row apart.
      row.put(ROW_TOP, 'type', item.type ?? null);
      for (const key in item) if (!QUESTION_COLUMNS.has(key)) row.put(ROW_TOP, key, item[key]);
    }
    const logic = known ? this.#array(level, 'logic_questions') : undefined;
    this.#sink.add('questions', this.#questionRow(at, questionIndex, null, level, row, known));
    for (let i = 0; i < (logic?.length ?? 0); i++) this.#logicQuestion(logic![i], i, questionIndex, at);
  }

  /** A follow-up question (`logic_questions[]`) of the question at `questionIndex`. */
  #logicQuestion(follow: unknown, logicIndex: number, questionIndex: number, at: Place): void {
    const logicPath = `${at.path}.questions[].logic_questions[]`;
    if (follow === null) {
      this.#drift.add(logicPath, 'type_mismatch', 'null');
      return;
    }
    if (!isObject(follow)) {
      const whole = this.#whole(follow, logicPath, 'type_mismatch');
      this.#sink.add('questions', this.#questionRow(at, questionIndex, logicIndex, null, whole, null));
      return;
    }
    const logicRow = new RescueTarget();
    const logicLevel: Level = { value: follow, path: logicPath, row: logicRow, at: ROW_TOP };
    this.#unknown(logicLevel, SPEC_FIELDS.logic);
    this.#sink.add('questions', this.#questionRow(at, questionIndex, logicIndex, logicLevel, logicRow, true));
  }

  /**
   * A `questions` row: a top-level question (`logicIndex` null) or a follow-up. `checked`:
   * true for a spec variant (its fields are checked), false for a new variant (only the
   * columns it has), null when there is no object at all.
   */
  #questionRow(
    at: Place,
    questionIndex: number,
    logicIndex: number | null,
    level: Level | null,
    row: RescueTarget,
    checked: boolean | null,
  ): Row {
    const follow = logicIndex !== null;
    const response = level && this.#present(level, checked, 'response') ? level.value.response : undefined;
    const listed = Array.isArray(response);
    let responseCell: (string | null)[] = [];
    if (level && this.#present(level, checked, 'response')) {
      if (listed) responseCell = this.#strings(level, 'response', response);
      else responseCell = this.#scalarResponse(level, follow, checked === false);
    }
    const answerType = this.#cell(level, checked, 'answer_type', 'string', follow || !listed);
    if (!follow && checked === true && answerType !== null && !ANSWER_TYPES.has(answerType)) {
      this.#count(level!, 'answer_type', 'unlisted_value', answerType as string);
    }
    let photos: (string | null)[] | null = null;
    if (!follow && level && this.#present(level, checked, 'photos')) {
      const raw = level.value.photos;
      if (Array.isArray(raw)) photos = this.#strings(level, 'photos', raw);
      else this.#mismatch(level, 'photos', raw, true);
    }
    let threads: string | null = null;
    if (level && this.#present(level, checked, 'threads')) {
      if ('threads' in level.value) threads = jsonText(level.value.threads);
      else this.#count(level, 'threads', 'missing_field');
    }
    const cells: Row = {
      job_id: at.jobId,
      campaign_id: at.campaignId,
      section_index: at.sectionIndex,
      section_id: at.sectionId,
      question_index: questionIndex,
      logic_index: logicIndex,
      reference_code: this.#cell(level, checked, 'reference_code', 'string', true),
      question: this.#cell(level, checked, 'question', 'string', true),
      question_type: this.#cell(level, checked, 'question_type', 'string', true),
      answer_type: answerType,
      response: responseCell,
      response_is_list: follow || listed,
      obtained_score: this.#cell(level, checked, 'obtained_score', 'string', false),
      max_score: this.#cell(level, checked, 'max_score', 'string', false),
      comment: follow ? null : this.#cell(level, checked, 'comment', 'string', true),
      photos,
      threads_json: threads,
      run_id: this.#ctx.runId,
      exported_at: this.#ctx.exportedAt,
      [RESCUED_COLUMN]: null,
    };
    cells[RESCUED_COLUMN] = row.cell();
    return cells;
  }

  /** Whether a question row reads `key`: every field of a spec variant, those a new variant has. */
  #present(level: Level | null, checked: boolean | null, key: string): level is Level {
    return level !== null && (checked === true || key in level.value);
  }

  /** A question row's scalar cell (see {@link #present}); a new variant's fields are all nullable. */
  #cell(
    level: Level | null,
    checked: boolean | null,
    key: string,
    kind: Kind,
    nullable: boolean,
  ): string | number | boolean | null {
    return this.#present(level, checked, key)
      ? this.#value(level, key, kind, nullable || checked === false)
      : null;
  }

  /** A response that is not a list: a string (Q1), null (no answer), or something else. */
  #scalarResponse(level: Level, follow: boolean, loose: boolean): (string | null)[] {
    const raw = level.value.response;
    if (raw === undefined) {
      if (!loose) this.#count(level, 'response', 'missing_field');
      return [];
    }
    if (raw === null) {
      if (follow) this.#count(level, 'response', 'type_mismatch', 'null');
      return [];
    }
    if (typeof raw === 'string' && !follow) return [raw];
    if (!loose) this.#count(level, 'response', 'type_mismatch', jsonTypeOf(raw));
    level.row.put(level.at, 'response', raw);
    return typeof raw === 'number' || typeof raw === 'boolean' || typeof raw === 'string'
      ? [String(raw)]
      : [];
  }

  #textEntry(item: unknown, entryIndex: number, at: Place): void {
    const path = `${at.path}.text_entries[]`;
    if (item === null) {
      this.#drift.add(path, 'type_mismatch', 'null');
      return;
    }
    if (!isObject(item)) {
      const whole = this.#whole(item, path, 'type_mismatch');
      this.#sink.add('text_entries', this.#textEntryRow(at, entryIndex, 'text_entries', null, false, whole));
      return;
    }
    const row = new RescueTarget();
    const level: Level = { value: item, path, row, at: ROW_TOP };
    this.#unknown(level, SPEC_FIELDS.textEntry);
    this.#sink.add('text_entries', this.#textEntryRow(at, entryIndex, 'text_entries', level, true));
  }

  /** A text entry of `text_entries[]` (answer nullable) or a text_entry item of `questions[]` (answer required). */
  #textEntryRow(
    at: Place,
    entryIndex: number,
    source: 'text_entries' | 'questions',
    level: Level | null,
    answerNullable: boolean,
    row: RescueTarget | undefined = level?.row,
  ): Row {
    const cells: Row = {
      job_id: at.jobId,
      campaign_id: at.campaignId,
      section_index: at.sectionIndex,
      section_id: at.sectionId,
      entry_index: entryIndex,
      source,
      description: level ? this.#value(level, 'description', 'string', true) : null,
      answer: level ? this.#value(level, 'answer', 'string', answerNullable) : null,
      run_id: this.#ctx.runId,
      exported_at: this.#ctx.exportedAt,
      [RESCUED_COLUMN]: null,
    };
    cells[RESCUED_COLUMN] = row?.cell() ?? null;
    return cells;
  }

  #input(item: unknown, inputIndex: number, at: Place): void {
    if (item === null) return; // I1
    const path = `${at.path}.inputs[]`;
    let row = new RescueTarget();
    let level: Level | null = null;
    let measured = false;
    let known = false;
    if (!isObject(item)) {
      row = this.#whole(item, path, 'new_variant');
    } else {
      level = { value: item, path, row, at: ROW_TOP };
      measured = 'measurement' in item;
      known = measured || item.input_type === 'text';
      if (known) {
        this.#unknown(level, measured ? SPEC_FIELDS.measuredInput : SPEC_FIELDS.textInput);
      } else {
        const seen = typeof item.input_type === 'string' ? item.input_type : jsonTypeOf(item.input_type);
        this.#drift.add(path, 'new_variant', seen);
        for (const key in item) if (!SPEC_FIELDS.measuredInput.has(key)) row.put(ROW_TOP, key, item[key]);
      }
    }
    let answer: string | null = null;
    if (level && this.#has(level, known, 'answer')) {
      if (!('answer' in level.value)) this.#count(level, 'answer', 'missing_field');
      else answer = this.#inputAnswer(level, measured, known);
    }
    this.#sink.add('inputs', {
      job_id: at.jobId,
      campaign_id: at.campaignId,
      section_index: at.sectionIndex,
      section_id: at.sectionId,
      input_index: inputIndex,
      input_type: this.#inputCell(level, known, 'input_type', true),
      description: this.#inputCell(level, known, 'description', true),
      answer,
      measurement:
        measured || (!known && this.#has(level, known, 'measurement'))
          ? this.#inputCell(level, known, 'measurement', true)
          : null,
      run_id: this.#ctx.runId,
      exported_at: this.#ctx.exportedAt,
      [RESCUED_COLUMN]: row.cell(),
    });
  }

  /** Whether an input row reads `key`: every field of a spec variant, those a new variant has. */
  #has(level: Level | null, known: boolean, key: string): level is Level {
    return level !== null && (known || key in level.value);
  }

  /** An input row's string cell (see {@link #has}); a new variant's fields are all nullable. */
  #inputCell(
    level: Level | null,
    known: boolean,
    key: string,
    nullable: boolean,
  ): string | number | boolean | null {
    return this.#has(level, known, key) ? this.#value(level, key, 'string', nullable || !known) : null;
  }

  /** `inputs.answer`: strings as is, objects and arrays as JSON text; a value the variant does not allow is rescued too. */
  #inputAnswer(level: Level, measured: boolean, known: boolean): string | null {
    const raw = level.value.answer;
    if (raw === null) return null;
    if (typeof raw === 'string') return raw;
    const allowed = measured && typeof raw === 'object';
    if (!allowed) {
      if (known) this.#count(level, 'answer', 'type_mismatch', jsonTypeOf(raw));
      level.row.put(level.at, 'answer', raw);
    }
    return jsonText(raw);
  }

  /** Reads a gallery: its values that do not fit go in the section row; returns its images to write. */
  #gallery(section: Level, item: unknown, galleryIndex: number, at: Place): ImageRows | undefined {
    if (item === null) return undefined;
    const path = `${at.path}.media_galleries[]`;
    const where = [...section.at, 'media_galleries', galleryIndex];
    if (!isObject(item)) {
      this.#drift.add(path, 'type_mismatch', jsonTypeOf(item));
      section.row.put(where, WHOLE_VALUE, item);
      return undefined;
    }
    const level: Level = { value: item, path, row: section.row, at: where };
    this.#unknown(level, SPEC_FIELDS.gallery);
    const description = this.#value(level, 'description', 'string', true);
    const viewType = this.#value(level, 'view_type', 'string', false);
    const images = this.#array(level, 'images');
    return { galleryIndex, description, viewType, images: images ?? [], path: `${path}.images[]` };
  }

  #images(gallery: ImageRows, at: Place): void {
    for (let imageIndex = 0; imageIndex < gallery.images.length; imageIndex++) {
      const item = gallery.images[imageIndex];
      if (item === null) continue;
      let row = new RescueTarget();
      let level: Level | null = null;
      if (!isObject(item)) {
        row = this.#whole(item, gallery.path, 'type_mismatch');
      } else {
        level = { value: item, path: gallery.path, row, at: ROW_TOP };
        this.#unknown(level, SPEC_FIELDS.image);
      }
      this.#sink.add('media_images', {
        job_id: at.jobId,
        campaign_id: at.campaignId,
        section_index: at.sectionIndex,
        section_id: at.sectionId,
        gallery_index: gallery.galleryIndex,
        image_index: imageIndex,
        gallery_description: gallery.description,
        view_type: gallery.viewType,
        url: level ? this.#value(level, 'url', 'string', false) : null,
        thumb_url: level ? this.#value(level, 'thumb_url', 'string', false) : null,
        caption: level ? this.#value(level, 'caption', 'string', true) : null,
        run_id: this.#ctx.runId,
        exported_at: this.#ctx.exportedAt,
        [RESCUED_COLUMN]: row.cell(),
      });
    }
  }

  // ---- one level's fields ----------------------------------------------------------------

  /** An item that is neither an object nor null: counted at `path`, kept whole in a row of its own (`$value`). */
  #whole(item: unknown, path: string, kind: DriftKind): RescueTarget {
    this.#drift.add(path, kind, jsonTypeOf(item));
    const row = new RescueTarget();
    row.put(ROW_TOP, WHOLE_VALUE, item);
    return row;
  }

  /** Every field of `level` the spec does not name: rescued whole, counted once. */
  #unknown(level: Level, known: ReadonlySet<string>): void {
    for (const key in level.value) {
      if (known.has(key)) continue;
      this.#count(level, key, 'new_field');
      level.row.put(level.at, key, level.value[key]);
    }
  }

  /** A nested object the spec gives its parent (`job`, `job.location`…); undefined when it is not one. */
  #object(parent: Level, key: string, required: boolean): Level | undefined {
    const value = parent.value[key];
    if (isObject(value)) {
      return { value, path: join(parent.path, key), row: parent.row, at: [...parent.at, key] };
    }
    this.#mismatch(parent, key, value, required);
    return undefined;
  }

  /** An array field; undefined (NULL, counted, rescued unless absent or null) when it is not an array. */
  #array(level: Level, key: string): unknown[] | undefined {
    const value = level.value[key];
    if (Array.isArray(value)) return value;
    this.#mismatch(level, key, value, true);
    return undefined;
  }

  /**
   * Counts a container (an object or array the spec gives its parent) that is absent, null or
   * of another type, and rescues what is not absent: a null too, since no column holds it.
   */
  #mismatch(level: Level, key: string, value: unknown, required: boolean): void {
    if (value === undefined) {
      if (required) this.#count(level, key, 'missing_field');
      return;
    }
    this.#count(level, key, 'type_mismatch', jsonTypeOf(value));
    level.row.put(level.at, key, value);
  }

  /**
   * A scalar cell of `kind` from `level.value[key]`, by the rules of the module comment.
   * `nullable`: the spec allows null here (a null elsewhere is counted).
   */
  #value(level: Level, key: string, kind: Kind, nullable: boolean): string | number | boolean | null {
    const value = level.value[key];
    switch (typeof value) {
      case 'string':
        if (kind === 'string') return value;
        if (kind !== 'boolean' && INTEGER_TEXT.test(value)) {
          const n = Number(value);
          if (fitsInteger(n, kind)) {
            this.#rescue(level, key, value);
            return n;
          }
        }
        break;
      case 'number':
        if (kind === 'string') {
          this.#rescue(level, key, value);
          return JSON.stringify(value);
        }
        if (kind !== 'boolean' && fitsInteger(value, kind)) return value;
        break;
      case 'boolean':
        if (kind === 'boolean') return value;
        if (kind === 'string') {
          this.#rescue(level, key, value);
          return String(value);
        }
        break;
      case 'undefined':
        this.#count(level, key, 'missing_field');
        return null;
      default:
        if (value === null) {
          if (!nullable) this.#count(level, key, 'type_mismatch', 'null');
          return null;
        }
    }
    this.#rescue(level, key, value);
    return null;
  }

  /** Keeps a value that did not go into its column as it came, and counts the mismatch. */
  #rescue(level: Level, key: string, value: unknown): void {
    this.#count(level, key, 'type_mismatch', jsonTypeOf(value));
    level.row.put(level.at, key, value);
  }

  /** An array<string> cell: items converted as the module comment says; the others rescued by position. */
  #strings(level: Level, key: string, items: readonly unknown[]): (string | null)[] {
    const out: (string | null)[] = new Array(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (typeof item === 'string') {
        out[i] = item;
        continue;
      }
      if (item === null && key === 'photos') {
        out[i] = null;
        continue;
      }
      this.#drift.add(`${join(level.path, key)}[]`, 'type_mismatch', jsonTypeOf(item));
      out[i] = typeof item === 'number' || typeof item === 'boolean' ? String(item) : null;
      if (item !== null) level.row.put([...level.at, key], i, item);
    }
    return out;
  }

  #count(level: Level, key: string, kind: DriftKind, seen?: string): void {
    this.#drift.add(join(level.path, key), kind, seen);
  }
}

/** A report's section as its child rows see it. */
interface Place {
  jobId: number;
  campaignId: number;
  sectionIndex: number;
  sectionId: string | null;
  /** The section's drift path (`sections[]`). */
  path: string;
}

/** A gallery read, its images still to write. */
interface ImageRows {
  galleryIndex: number;
  description: string | number | boolean | null;
  viewType: string | number | boolean | null;
  images: readonly unknown[];
  path: string;
}

const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

function fitsInteger(n: number, kind: Kind): boolean {
  if (!Number.isSafeInteger(n)) return false;
  return kind === 'bigint' || (n >= INT32_MIN && n <= INT32_MAX);
}

/** JSON text of a value (`[]` and `{}` shared, as `flatten.ts` does). */
function jsonText(value: unknown): string {
  if (Array.isArray(value) && value.length === 0) return '[]';
  if (isObject(value) && Object.keys(value).length === 0) return '{}';
  return JSON.stringify(value);
}
