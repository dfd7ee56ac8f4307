/**
 * Builders of API answers for the client tests: a valid report (every question and input
 * variant of spec 2.5), list pages, verify answers.
 */

export function reportData(jobId = 101): Record<string, unknown> {
  return {
    job: {
      id: jobId,
      job_status: 2,
      job_score_percentage: '87.5',
      campaign: { id: 7, campaign_name: 'Spring' },
      location: {
        id: 3,
        location_code: 'L-3',
        location_name: 'Main St',
        is_competitor: false,
        competitor_name: null,
      },
      report: { id: 9, report_type: 'audit', survey_id: 4, survey_name: 'Store audit' },
      extra_field_from_the_future: { kept: true },
    },
    sections: [
      {
        id: 's1',
        section_title: 'Entrance',
        sort_order: '1',
        percentage: '100',
        obtained_score: '10',
        max_score: 10,
        questions: [
          {
            type: 'question',
            reference_code: 'Q1',
            question: 'Clean?',
            question_type: 'radio',
            answer_type: 'single-choice',
            response: 'Yes',
            obtained_score: '5',
            max_score: '5',
            comment: null,
            photos: ['https://x/p.jpg', null],
            threads: [],
            logic_questions: [],
          },
          {
            type: 'question',
            reference_code: 'Q2',
            question: 'Which?',
            question_type: 'checkbox',
            answer_type: 'multiple-choice',
            response: ['A', 'B'],
            obtained_score: '5',
            max_score: '5',
            comment: 'ok',
            photos: [],
            threads: {},
            logic_questions: [
              {
                reference_code: 'Q2.1',
                question: 'Why?',
                question_type: 'text',
                answer_type: null,
                response: ['because'],
                obtained_score: '0',
                max_score: '0',
                threads: [],
              },
            ],
          },
          null,
          { type: 'text_entry', description: 'Note', answer: 'fine' },
        ],
        text_entries: [{ description: 'Summary', answer: null }],
        inputs: [
          null,
          { input_type: 'text', description: 'Name', answer: 'Ann' },
          { input_type: 'number', description: 'Temp', answer: '4', measurement: 'C' },
        ],
        media_galleries: [
          {
            description: 'Shelf',
            view_type: 'grid-view',
            images: [{ url: 'u', thumb_url: 't', caption: null }, null],
          },
          null,
        ],
      },
    ],
  };
}

export function listPage(
  items: unknown[],
  page: number,
  lastPage: number,
  total?: number,
): Record<string, unknown> {
  return {
    data: items,
    meta: {
      current_page: page,
      per_page: 100,
      // By default a total that agrees with last_page, as the API's own meta does.
      total: total ?? (lastPage <= 1 ? items.length : Math.max(items.length, (lastPage - 1) * 100 + 1)),
      last_page: lastPage,
    },
  };
}

export function verifyAnswer(company = 'Acme Retail'): Record<string, unknown> {
  return { data: { verified: true, company: { name: company } } };
}
