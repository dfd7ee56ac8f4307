import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ListQuestionSchema, type Report, ScalarQuestionSchema } from '../../../../shared/api/schemas.js';
import {
  appendEvolvedReportRows,
  SPEC_FIELDS,
  WHOLE_VALUE,
} from '../../../../shared/export/format/evolve-rows.js';
import { appendReportRows, type RowContext } from '../../../../shared/export/format/flatten.js';
import { TableBuffer } from '../../../../shared/export/format/table-buffer.js';
import { type DriftEntry, DriftTally, PATH_CHARS } from '../../../../shared/export/schema-drift.js';
import { REPORT_TABLES, type Row, TABLES, type TableName } from '../../../../shared/export/tables.js';
import { mutate, reportChanges } from '../../../helpers/report-drift.js';
import {
  gallery,
  image,
  listQuestion,
  logicQuestion,
  measuredInput,
  questionTextEntry,
  report,
  reportArb,
  scalarQuestion,
  section,
  textEntry,
  textInput,
} from '../../../helpers/reports.js';

const ctx: RowContext = { runId: 'run-1', exportedAt: new Date('2026-11-22T03:00:00.000Z') };
const IDS = { campaignId: 7, jobId: 42 };

type Rows = Record<TableName, Row[]>;

const emptyRows = () => Object.fromEntries(REPORT_TABLES.map((t) => [t, [] as Row[]])) as unknown as Rows;

/** The rows and drift of one report under evolve; the rows are checked as the encoder will check them. */
function evolve(data: unknown, ids = IDS): { rows: Rows; drift: DriftEntry[] } {
  const rows = emptyRows();
  const drift = new DriftTally();
  drift.startReport(ids.jobId);
  const buffer = new TableBuffer({ dt: '2026-11-22', schema_contract: 'evolve' });
  const sink = {
    add: (table: TableName, row: Row) => {
      rows[table].push({ ...row });
      buffer.add(table, row);
    },
  };
  appendEvolvedReportRows(sink, data as Record<string, unknown>, ids, ctx, drift);
  buffer.check();
  return { rows, drift: drift.entries() };
}

const json = (value: unknown) => JSON.parse(JSON.stringify(value)) as Record<string, unknown>;
const rescued = (row: Row | undefined) =>
  row?._rescued == null ? undefined : (JSON.parse(row._rescued as string) as unknown);
const kinds = (drift: DriftEntry[]) => drift.map((d) => `${d.kind} ${d.path}`);

describe('appendEvolvedReportRows', () => {
  it('gives a report the spec describes the rows of the freeze row builder, _rescued NULL, and no drift', () => {
    fc.assert(
      fc.property(reportArb, (r) => {
        const frozen = emptyRows();
        appendReportRows(
          { add: (t, row) => frozen[t].push(row) },
          r,
          { campaignId: 7, jobId: r.job.id },
          ctx,
        );
        const { rows, drift } = evolve(json(r), { campaignId: 7, jobId: r.job.id });
        for (const table of REPORT_TABLES) {
          expect(rows[table]).toEqual(frozen[table].map((row) => ({ ...row, _rescued: null })));
        }
        expect(drift).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('fills every column of the evolve tables, _rescued last', () => {
    const { rows } = evolve(
      json(
        report({
          job: { id: 42 },
          sections: [
            section({
              questions: [
                scalarQuestion(),
                listQuestion({ logic_questions: [logicQuestion()] }),
                questionTextEntry(),
              ],
              text_entries: [textEntry()],
              inputs: [textInput(), measuredInput()],
              media_galleries: [gallery({ images: [image()] })],
            }),
          ],
        }),
      ),
    );
    for (const table of REPORT_TABLES) {
      expect(rows[table].length, table).toBeGreaterThan(0);
      for (const row of rows[table])
        expect(Object.keys(row)).toEqual(TABLES[table].columns.map((c) => c.name));
    }
  });

  it('stores a value the enumeration does not list as it came, and counts it', () => {
    const r = json(report({ job: { id: 42 }, sections: [section({ questions: [scalarQuestion()] })] }));
    (r.job as Record<string, unknown>).job_status = 3;
    const question = (
      (r.sections as Record<string, unknown>[])[0]!.questions as Record<string, unknown>[]
    )[0]!;
    question.answer_type = 'ranking';
    const { rows, drift } = evolve(r);
    expect(rows.reports[0]).toMatchObject({ job_status: 3, _rescued: null });
    expect(rows.questions[0]).toMatchObject({ answer_type: 'ranking', _rescued: null });
    expect(drift).toEqual([
      { path: 'job.job_status', kind: 'unlisted_value', count: 1, reports: 1, first_job_id: 42, seen: ['3'] },
      {
        path: 'sections[].questions[].answer_type',
        kind: 'unlisted_value',
        count: 1,
        reports: 1,
        first_job_id: 42,
        seen: ['ranking'],
      },
    ]);
  });

  it('converts an integer held in a string, refuses a decimal, and keeps both as they came', () => {
    const r = json(report({ job: { id: 42 }, sections: [section()] }));
    const s = (r.sections as Record<string, unknown>[])[0]!;
    s.max_score = '12';
    (r.job as Record<string, Record<string, unknown>>).location!.id = '12.5';
    const { rows, drift } = evolve(r);
    expect(rows.sections[0]).toMatchObject({ max_score: 12 });
    expect(rescued(rows.sections[0])).toEqual({ max_score: '12' });
    expect(rows.reports[0]).toMatchObject({ location_id: null });
    expect(rescued(rows.reports[0])).toEqual({ job: { location: { id: '12.5' } } });
    expect(kinds(drift)).toEqual(['type_mismatch job.location.id', 'type_mismatch sections[].max_score']);
    expect(drift.map((d) => d.seen)).toEqual([['string'], ['string']]);
  });

  it('writes a number sent for a string as its JSON text, and a null where the spec allows none as NULL', () => {
    const r = json(report({ job: { id: 42 }, sections: [section({ questions: [scalarQuestion()] })] }));
    const s = (r.sections as Record<string, unknown>[])[0]!;
    s.section_title = null;
    s.id = 9;
    const { rows, drift } = evolve(r);
    expect(rows.sections[0]).toMatchObject({ section_title: null, section_id: '9' });
    expect(rows.questions[0]).toMatchObject({ section_id: '9' });
    // The null is in its column as it came: nothing to rescue.
    expect(rescued(rows.sections[0])).toEqual({ id: 9 });
    expect(kinds(drift)).toEqual(['type_mismatch sections[].id', 'type_mismatch sections[].section_title']);
  });

  it('makes a new kind of questions[] item a questions row: the columns it has, the rest rescued', () => {
    const r = json(report({ job: { id: 42 }, sections: [section()] }));
    const s = (r.sections as Record<string, unknown>[])[0]!;
    s.questions = [
      { type: 'rating', question: 'How was it?', stars: 4, max_score: '5', logic_questions: [] },
      'free text',
      null,
    ];
    const { rows, drift } = evolve(r);
    expect(rows.questions).toHaveLength(2);
    expect(rows.questions[0]).toMatchObject({
      question_index: 0,
      question: 'How was it?',
      max_score: '5',
      obtained_score: null,
      response: [],
      response_is_list: false,
    });
    expect(rescued(rows.questions[0])).toEqual({ type: 'rating', stars: 4, logic_questions: [] });
    expect(rows.questions[1]).toMatchObject({ question_index: 1, question: null });
    expect(rescued(rows.questions[1])).toEqual({ [WHOLE_VALUE]: 'free text' });
    expect(drift).toEqual([
      {
        path: 'sections[].questions[]',
        kind: 'new_variant',
        count: 2,
        reports: 1,
        first_job_id: 42,
        seen: ['rating', 'string'],
      },
    ]);
  });

  it('makes a new kind of inputs[] item an inputs row', () => {
    const r = json(report({ job: { id: 42 }, sections: [section()] }));
    (r.sections as Record<string, unknown>[])[0]!.inputs = [
      { input_type: 'slider', description: 'volume', answer: 7, min: 0 },
    ];
    const { rows, drift } = evolve(r);
    expect(rows.inputs[0]).toMatchObject({ input_type: 'slider', description: 'volume', answer: '7' });
    expect(rescued(rows.inputs[0])).toEqual({ answer: 7, min: 0 });
    expect(kinds(drift)).toEqual(['new_variant sections[].inputs[]']);
  });

  it('keeps a new object on the report and a new field on a nested level in the row of their level', () => {
    const r = json(
      report({ job: { id: 42 }, sections: [section({ media_galleries: [gallery({ images: [image()] })] })] }),
    );
    r.scorecard = { grade: 'A', parts: [1, 2] };
    (r.job as Record<string, Record<string, unknown>>).location!.floor = 3;
    const s = (r.sections as Record<string, unknown>[])[0]!;
    s.weight = 0.5;
    const g = (s.media_galleries as Record<string, unknown>[])[0]!;
    g.layout = 'masonry';
    (g.images as Record<string, unknown>[])[0]!.width = 640;
    const { rows, drift } = evolve(r);
    expect(rescued(rows.reports[0])).toEqual({
      scorecard: { grade: 'A', parts: [1, 2] },
      job: { location: { floor: 3 } },
    });
    expect(rescued(rows.sections[0])).toEqual({
      weight: 0.5,
      media_galleries: [{ layout: 'masonry' }],
    });
    expect(rescued(rows.media_images[0])).toEqual({ width: 640 });
    expect(kinds(drift).sort()).toEqual(
      [
        'new_field scorecard',
        'new_field job.location.floor',
        'new_field sections[].weight',
        'new_field sections[].media_galleries[].layout',
        'new_field sections[].media_galleries[].images[].width',
      ].sort(),
    );
  });

  it('lands a report without a job under the ids it was asked for, and counts what is missing', () => {
    const { rows, drift } = evolve({ sections: [] });
    expect(rows.reports).toEqual([
      expect.objectContaining({
        job_id: 42,
        campaign_id: 7,
        job_status: null,
        is_competitor: null,
        _rescued: null,
      }),
    ]);
    expect(kinds(drift)).toEqual(['missing_field job']);
  });

  it('refuses a report that names another job', () => {
    expect(() => evolve(json(report({ job: { id: 43 } })))).toThrow(/report of job 42 names job 43/);
    expect(() => evolve({ job: { id: '43' } })).toThrow(/names job 43/);
  });

  it('rescues array items that do not fit array<string> by their position', () => {
    const r = json(report({ job: { id: 42 }, sections: [section({ questions: [listQuestion()] })] }));
    const q = ((r.sections as Record<string, unknown>[])[0]!.questions as Record<string, unknown>[])[0]!;
    q.response = ['a', 5, { x: 1 }];
    q.photos = [null, true];
    const { rows } = evolve(r);
    expect(rows.questions[0]).toMatchObject({ response: ['a', '5', null], photos: [null, 'true'] });
    expect(rescued(rows.questions[0])).toEqual({
      response: [null, 5, { x: 1 }],
      photos: [null, true],
    });
  });

  it('counts each drift once per report in `reports`, and every occurrence in `count`', () => {
    const r = json(report({ job: { id: 42 }, sections: [section(), section({ id: 's-2' })] }));
    for (const s of r.sections as Record<string, unknown>[]) s.weight = 1;
    const { drift } = evolve(r);
    expect(drift).toEqual([
      { path: 'sections[].weight', kind: 'new_field', count: 2, reports: 1, first_job_id: 42 },
    ]);
  });

  it('is given a text_entry item of questions[] like the freeze builder', () => {
    const r = json(
      report({ job: { id: 42 }, sections: [section({ questions: [questionTextEntry({ answer: 'ok' })] })] }),
    );
    const { rows } = evolve(r);
    expect(rows.text_entries[0]).toMatchObject({ source: 'questions', answer: 'ok', _rescued: null });
  });
});

// ---- Nothing lost: reports changed at random, rebuilt from their rows ------------------------

/** Rebuilds a report's `data` from its rows: columns first, then `_rescued` laid over them. */
function rebuild(rows: Rows): Record<string, unknown> {
  const [r] = rows.reports;
  const data: Record<string, unknown> = {
    job: {
      id: r!.job_id,
      job_status: r!.job_status,
      job_score_percentage: r!.job_score_percentage,
      campaign: { id: r!.report_campaign_id, campaign_name: r!.campaign_name },
      location: {
        id: r!.location_id,
        location_code: r!.location_code,
        location_name: r!.location_name,
        is_competitor: r!.is_competitor,
        competitor_name: r!.competitor_name,
      },
      report: {
        id: r!.report_id,
        report_type: r!.report_type,
        survey_id: r!.survey_id,
        survey_name: r!.survey_name,
      },
    },
    sections: [] as unknown[],
  };
  const sections = data.sections as Record<string, unknown>[];
  // Each section from its columns first; its `_rescued` (galleries' values among them) goes over it once its children are in.
  for (const s of rows.sections) {
    sections[s.section_index as number] = {
      id: s.section_id,
      section_title: s.section_title,
      sort_order: s.sort_order,
      percentage: s.percentage,
      obtained_score: s.obtained_score,
      max_score: s.max_score,
      questions: [],
      text_entries: [],
      inputs: [],
      media_galleries: [],
    } as Record<string, unknown>;
  }
  const at = (row: Row) => sections[row.section_index as number]!;
  const into = (row: Row, key: string) => at(row)[key] as unknown[];
  for (const q of rows.questions.filter((row) => row.logic_index === null)) {
    const item = overlay(
      {
        type: 'question',
        reference_code: q.reference_code,
        question: q.question,
        question_type: q.question_type,
        answer_type: q.answer_type,
        response: q.response_is_list ? q.response : ((q.response as string[])[0] ?? null),
        obtained_score: q.obtained_score,
        max_score: q.max_score,
        comment: q.comment,
        photos: q.photos,
        threads: q.threads_json === null ? null : JSON.parse(q.threads_json as string),
        logic_questions: [],
      },
      rescued(q),
    );
    if (Array.isArray(into(q, 'questions'))) into(q, 'questions')[q.question_index as number] = item;
  }
  for (const q of rows.questions.filter((row) => row.logic_index !== null)) {
    const parent = into(q, 'questions')[q.question_index as number] as Record<string, unknown>;
    (parent.logic_questions as unknown[])[q.logic_index as number] = overlay(
      {
        reference_code: q.reference_code,
        question: q.question,
        question_type: q.question_type,
        answer_type: q.answer_type,
        response: q.response,
        obtained_score: q.obtained_score,
        max_score: q.max_score,
        threads: q.threads_json === null ? null : JSON.parse(q.threads_json as string),
      },
      rescued(q),
    );
  }
  for (const e of rows.text_entries) {
    const item = overlay({ description: e.description, answer: e.answer }, rescued(e));
    if (e.source === 'questions')
      into(e, 'questions')[e.entry_index as number] = { type: 'text_entry', ...(item as object) };
    else into(e, 'text_entries')[e.entry_index as number] = item;
  }
  for (const i of rows.inputs) {
    into(i, 'inputs')[i.input_index as number] = overlay(
      { input_type: i.input_type, description: i.description, answer: i.answer, measurement: i.measurement },
      rescued(i),
    );
  }
  for (const m of rows.media_images) {
    const galleries = into(m, 'media_galleries');
    galleries[m.gallery_index as number] ??= {
      description: m.gallery_description,
      view_type: m.view_type,
      images: [],
    };
    const g = galleries[m.gallery_index as number] as Record<string, unknown>;
    (g.images as unknown[])[m.image_index as number] = overlay(
      { url: m.url, thumb_url: m.thumb_url, caption: m.caption },
      rescued(m),
    );
  }
  for (const s of rows.sections) {
    sections[s.section_index as number] = overlay(sections[s.section_index as number], rescued(s)) as Record<
      string,
      unknown
    >;
  }
  return overlay(data, rescued(r)) as Record<string, unknown>;
}

/**
 * `patch` laid over `base`: objects member by member, an array over an array item by item
 * (null: nothing rescued there); any other value replaces. `$value` stands for the whole item.
 */
function overlay(base: unknown, patch: unknown): unknown {
  if (patch === undefined) return base;
  if (Array.isArray(patch)) {
    if (!Array.isArray(base)) return patch;
    const out = [...base];
    patch.forEach((v, i) => {
      if (v !== null) out[i] = overlay(out[i], v);
    });
    return out;
  }
  if (typeof patch !== 'object' || patch === null) return patch;
  const p = patch as Record<string, unknown>;
  if (WHOLE_VALUE in p) return p[WHOLE_VALUE];
  if (Array.isArray(base)) return patch;
  const out: Record<string, unknown> =
    typeof base === 'object' && base !== null ? { ...(base as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(p)) out[k] = overlay(out[k], v);
  return out;
}

/**
 * A JSON value as the tables can tell it apart: a member that is null, absent or an empty
 * array or object reads the same (a column is NULL, a child table has no rows; the drift says
 * which it was), and so does an array's trailing null item (a null item has no row).
 */
function norm(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = Array.from(value, (v) => norm(v) ?? null);
    while (items.length > 0 && items[items.length - 1] === null) items.pop();
    return items.length === 0 ? undefined : items;
  }
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const n = norm(v);
      if (n !== undefined && n !== null) out[k] = n;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
  return value;
}

/**
 * Paths the tables do not cover: a gallery's own values when it has no image to carry them,
 * `inputs[].answer` (strings as is, arrays and objects as JSON text: a string that is JSON text
 * reads as the value), and the question variant's `type`.
 */
function covered(data: Record<string, unknown>): Record<string, unknown> {
  const copy = json(data);
  for (const s of Array.isArray(copy.sections) ? copy.sections : []) {
    if (typeof s !== 'object' || s === null || Array.isArray(s)) continue;
    const galleries = (s as Record<string, unknown>).media_galleries;
    if (Array.isArray(galleries)) {
      galleries.forEach((g, i) => {
        const images = (g as Record<string, unknown> | null)?.images;
        const carried = Array.isArray(images) && images.some((x) => x !== null);
        if (g !== null && typeof g === 'object' && !Array.isArray(g) && !carried) galleries[i] = null;
      });
    }
    const inputs = (s as Record<string, unknown>).inputs;
    if (Array.isArray(inputs)) {
      for (const input of inputs) {
        if (typeof input !== 'object' || input === null || Array.isArray(input)) continue;
        const item = input as Record<string, unknown>;
        if ('answer' in item && typeof item.answer !== 'string' && item.answer !== null)
          item.answer = JSON.stringify(item.answer);
      }
    }
  }
  return copy;
}

describe('evolve loses nothing', () => {
  it('lands any changed report: every value the tables cover is in its column or in _rescued', () => {
    fc.assert(
      fc.property(reportArb, reportChanges, (r: Report, changes) => {
        const data = json(r);
        mutate(data, changes);
        const { rows } = evolve(data, { campaignId: 7, jobId: r.job.id });
        const back = covered(rebuild(rows));
        // The reports row's job_id is the id asked for, whatever the report holds.
        const job = back.job as Record<string, unknown> | null;
        const named = typeof data.job === 'object' && data.job !== null && 'id' in data.job;
        if (!named && typeof job === 'object' && job !== null) delete job.id;
        expect(norm(back)).toEqual(norm(covered(data)));
      }),
      { numRuns: 400 },
    );
  });

  it('counts drift for every change the spec does not allow, and none for a report it describes', () => {
    fc.assert(
      fc.property(reportArb, fc.string({ minLength: 1, maxLength: 5 }), (r, key) => {
        const data = json(r);
        data[`x_${key}`] = 1;
        expect(evolve(data, { campaignId: 7, jobId: r.job.id }).drift).toEqual([
          { path: `x_${key}`, kind: 'new_field', count: 1, reports: 1, first_job_id: r.job.id },
        ]);
      }),
    );
  });
});

describe('DriftTally', () => {
  it('keeps a path of any length to PATH_CHARS characters', () => {
    const drift = new DriftTally();
    drift.startReport(1);
    drift.add(`x_${'k'.repeat(5000)}`, 'new_field');
    const [entry] = drift.entries();
    expect(entry!.path).toHaveLength(PATH_CHARS);
    expect(entry!.path.endsWith('…')).toBe(true);
  });
});

describe('SPEC_FIELDS', () => {
  const keys = (schema: { shape: Record<string, unknown> }) => Object.keys(schema.shape).sort();
  it('reads one field list for both question variants, which the spec gives the same fields', () => {
    expect(keys(ListQuestionSchema)).toEqual(keys(ScalarQuestionSchema));
    expect([...SPEC_FIELDS.question].sort()).toEqual(keys(ListQuestionSchema));
  });
});
