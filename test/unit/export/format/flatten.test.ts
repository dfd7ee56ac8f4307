import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ListQuestion, Report } from '../../../../shared/api/schemas.js';
import { ExporterError } from '../../../../shared/errors.js';
import {
  appendReportRows,
  campaignRow,
  jobRow,
  type RowContext,
} from '../../../../shared/export/format/flatten.js';
import { FROZEN_TABLES, REPORT_TABLES, type Row, type TableName } from '../../../../shared/export/tables.js';
import {
  expectedRowCounts,
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
const run = { run_id: 'run-1', exported_at: ctx.exportedAt };
const key = { job_id: 42, campaign_id: 7, section_index: 0, section_id: 's-1' };

function flatten(r: Report, ids = { campaignId: 7, jobId: r.job.id }): Record<TableName, Row[]> {
  const rows = Object.fromEntries(REPORT_TABLES.map((t) => [t, [] as Row[]])) as unknown as Record<
    TableName,
    Row[]
  >;
  appendReportRows({ add: (table, row) => rows[table].push(row) }, r, ids, ctx);
  return rows;
}

// The row builder of the `freeze` contract fills the frozen tables.
const columnsOf = (table: TableName) => FROZEN_TABLES[table].columns.map((c) => c.name).sort();

describe('campaignRow', () => {
  it('keeps strings as received, writes other values as JSON text and missing ones as NULL', () => {
    const item = {
      id: 3_000_000_001,
      campaign_name: 'Été 😀 "quoted"',
      campaign_status: 2,
      start_date: null,
      end_date: { y: 2026 },
      completed_at: false,
      extra: ['kept in item_json'],
    };
    expect(campaignRow(item, ctx)).toEqual({
      campaign_id: 3_000_000_001,
      campaign_name: 'Été 😀 "quoted"',
      campaign_status: '2',
      start_date: null,
      end_date: '{"y":2026}',
      completed_at: 'false',
      created_at: null,
      item_json: JSON.stringify(item),
      ...run,
    });
  });

  it('has exactly the columns of TABLES.campaigns', () => {
    expect(Object.keys(campaignRow({ id: 1 }, ctx)).sort()).toEqual(columnsOf('campaigns'));
  });
});

describe('jobRow', () => {
  it('keeps an integer job_status and the listing campaign id', () => {
    const item = { id: 5, job_status: 2, job_score_percentage: '50.00', other: 1 };
    expect(jobRow(item, 9, ctx)).toEqual({
      job_id: 5,
      campaign_id: 9,
      job_status: 2,
      job_score_percentage: '50.00',
      item_json: '{"id":5,"job_status":2,"job_score_percentage":"50.00","other":1}',
      ...run,
    });
  });

  it.each([['2'], [2.5], [null], [undefined], [2 ** 31], [true]])(
    'writes NULL for job_status %j',
    (status) => {
      expect(jobRow({ id: 5, job_status: status }, 9, ctx).job_status).toBeNull();
    },
  );

  it('writes a non-string score as JSON text, a missing one as NULL', () => {
    expect(jobRow({ id: 5, job_score_percentage: 87.5 }, 9, ctx).job_score_percentage).toBe('87.5');
    expect(jobRow({ id: 5 }, 9, ctx).job_score_percentage).toBeNull();
    expect(Object.keys(jobRow({ id: 5 }, 9, ctx)).sort()).toEqual(columnsOf('jobs'));
  });
});

describe('appendReportRows', () => {
  it('writes the reports row from data.job, campaign_id from the request path', () => {
    const rows = flatten(report({ job: { campaign: { id: 99, campaign_name: null } } }), {
      campaignId: 7,
      jobId: 42,
    });
    expect(rows.reports).toEqual([
      {
        job_id: 42,
        campaign_id: 7,
        report_campaign_id: 99,
        campaign_name: null,
        job_status: 2,
        job_score_percentage: '87.5',
        location_id: 301,
        location_code: 'LOC-301',
        location_name: 'Main Street',
        is_competitor: false,
        competitor_name: null,
        report_id: 9001,
        report_type: 'standard',
        survey_id: 55,
        survey_name: 'Store check',
        ...run,
      },
    ]);
  });

  it('writes one sections row per section, positions kept', () => {
    const rows = flatten(
      report({ sections: [section(), section({ id: 's-2', max_score: null, percentage: null })] }),
    );
    expect(rows.sections).toEqual([
      {
        ...key,
        section_title: 'Entrance',
        sort_order: '1',
        percentage: '90',
        obtained_score: '9',
        max_score: 10,
        ...run,
      },
      {
        ...key,
        section_index: 1,
        section_id: 's-2',
        section_title: 'Entrance',
        sort_order: '1',
        percentage: null,
        obtained_score: '9',
        max_score: null,
        ...run,
      },
    ]);
  });

  it('writes Q1 scalar and null responses as one-item and empty lists', () => {
    const rows = flatten(
      report({
        sections: [
          section({
            questions: [
              scalarQuestion({ photos: ['https://img/1.jpg', null], threads: ['t1'], comment: 'ok' }),
              scalarQuestion({ reference_code: null, response: null, answer_type: null }),
            ],
          }),
        ],
      }),
    );
    const q1 = {
      ...key,
      question_index: 0,
      logic_index: null,
      reference_code: 'Q1',
      question: 'Was the entrance clean?',
      question_type: 'radio',
      answer_type: 'single-choice',
      response: ['Yes'],
      response_is_list: false,
      obtained_score: '1',
      max_score: '1',
      comment: 'ok',
      photos: ['https://img/1.jpg', null],
      threads_json: '["t1"]',
      ...run,
    };
    expect(rows.questions).toEqual([
      q1,
      {
        ...q1,
        question_index: 1,
        reference_code: null,
        answer_type: null,
        response: [],
        comment: null,
        photos: [],
        threads_json: '[]',
      },
    ]);
  });

  it('writes Q2 and its follow-ups: parent question_index, own logic_index, no comment or photos', () => {
    const q2 = listQuestion({
      logic_questions: [
        logicQuestion({ threads: 'a thread' }),
        logicQuestion({ reference_code: 'Q2.2', response: [], threads: [] }),
      ],
    });
    const rows = flatten(report({ sections: [section({ questions: [null, q2] })] }));
    const logic = {
      ...key,
      question_index: 1,
      logic_index: 0,
      reference_code: 'Q2.1',
      question: 'Which items were missing?',
      question_type: 'checkbox',
      answer_type: 'multiple-choice',
      response: ['Napkins'],
      response_is_list: true,
      obtained_score: '0',
      max_score: '2',
      comment: null,
      photos: null,
      threads_json: '"a thread"',
      ...run,
    };
    expect(rows.questions).toEqual([
      {
        ...key,
        question_index: 1,
        logic_index: null,
        reference_code: 'Q2',
        question: 'Which areas were checked?',
        question_type: 'checkbox',
        answer_type: 'multiple-choice',
        response: ['Counter', 'Tables'],
        response_is_list: true,
        obtained_score: '2',
        max_score: '3',
        comment: 'Most areas fine',
        photos: ['https://img.example/p1.jpg', null],
        threads_json: '{"a":1}',
        ...run,
      },
      logic,
      { ...logic, logic_index: 1, reference_code: 'Q2.2', response: [], threads_json: '[]' },
    ]);
  });

  it.each<[ListQuestion['threads'], string]>([
    [{}, '{}'],
    [{ t: ['a', null], n: 1 }, '{"t":["a",null],"n":1}'],
  ])('writes threads %j as the JSON text %s', (threads, json) => {
    const rows = flatten(report({ sections: [section({ questions: [listQuestion({ threads })] })] }));
    expect(rows.questions[0]?.threads_json).toBe(json);
  });

  it('writes Q4 text entries of questions[] and text_entries[] with their source and position', () => {
    const rows = flatten(
      report({
        sections: [
          section({
            questions: [scalarQuestion(), null, questionTextEntry({ description: null })],
            text_entries: [textEntry(), textEntry({ description: null, answer: null })],
          }),
        ],
      }),
    );
    expect(rows.questions.map((r) => r.question_index)).toEqual([0]);
    expect(rows.text_entries).toEqual([
      { ...key, entry_index: 2, source: 'questions', description: null, answer: 'All good', ...run },
      {
        ...key,
        entry_index: 0,
        source: 'text_entries',
        description: 'Manager on duty',
        answer: 'Alex',
        ...run,
      },
      { ...key, entry_index: 1, source: 'text_entries', description: null, answer: null, ...run },
    ]);
  });

  it('writes inputs: I1 skipped, I2 without measurement, I3 answers as text or JSON text', () => {
    const rows = flatten(
      report({
        sections: [
          section({
            inputs: [
              null,
              textInput(),
              textInput({ answer: null }),
              measuredInput(),
              measuredInput({ answer: null, measurement: null }),
              measuredInput({ answer: { min: 1, max: [2, null] } }),
              measuredInput({ answer: ['a', null, 'ü'] }),
            ],
          }),
        ],
      }),
    );
    const i3 = { input_type: 'number', description: 'Fridge temperature', measurement: '°C' };
    const text = { input_type: 'text', description: 'Receipt number', measurement: null };
    expect(rows.inputs).toEqual([
      { ...key, input_index: 1, ...text, answer: 'R-123', ...run },
      { ...key, input_index: 2, ...text, answer: null, ...run },
      { ...key, input_index: 3, ...i3, answer: '4', ...run },
      { ...key, input_index: 4, ...i3, answer: null, measurement: null, ...run },
      { ...key, input_index: 5, ...i3, answer: '{"min":1,"max":[2,null]}', ...run },
      { ...key, input_index: 6, ...i3, answer: '["a",null,"ü"]', ...run },
    ]);
  });

  it('writes one row per image; null galleries and images give none, positions kept', () => {
    const rows = flatten(
      report({
        sections: [
          section({
            media_galleries: [
              null,
              gallery({ description: null, images: [null, image({ caption: 'Front' })] }),
              gallery({ view_type: 'list-view', images: [] }),
            ],
          }),
        ],
      }),
    );
    expect(rows.media_images).toEqual([
      {
        ...key,
        gallery_index: 1,
        image_index: 1,
        gallery_description: null,
        view_type: 'grid-view',
        url: 'https://img.example/full/1.jpg',
        thumb_url: 'https://img.example/thumb/1.jpg',
        caption: 'Front',
        ...run,
      },
    ]);
  });

  it('refuses a report that names another job than the request path', () => {
    expect(() => flatten(report(), { campaignId: 7, jobId: 43 })).toThrow(ExporterError);
  });

  it('gives every row exactly its table columns and row counts equal non-null items, for any report', () => {
    fc.assert(
      fc.property(reportArb, (r) => {
        const rows = flatten(r);
        const counts = expectedRowCounts(r);
        for (const table of REPORT_TABLES) {
          expect(rows[table]).toHaveLength(counts[table] ?? -1);
          for (const row of rows[table]) {
            expect(Object.keys(row).sort()).toEqual(columnsOf(table));
            // A JSON null is SQL NULL: undefined would be a missing field.
            expect(Object.values(row)).not.toContain(undefined);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
