import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NOT_READY_REASONS } from '../../../shared/api/schemas.js';
import { reportData } from '../../unit/api/fixtures.js';
import { harness } from './harness.js';
import { errorReply, type Reply } from './server.js';

const notReady = (message: string) => errorReply(409, 'REPORT_NOT_READY', message);

describe('IntegrationApiClient.getReport', () => {
  it('returns ok with the parsed report and the raw data exactly as sent, unknown fields included', async () => {
    const data = reportData(2);
    const { client } = await harness(() => ({ body: { data, meta_from_the_future: 1 } }));

    const outcome = await client.getReport(1, 2);

    expect(outcome.kind).toBe('ok');
    if (outcome.kind !== 'ok') return;
    expect(outcome.raw).toStrictEqual(data);
    expect(outcome.report.job.id).toBe(2);
    expect(outcome.report.sections[0]?.questions).toHaveLength(4);
  });

  it('returns invalid with the issues and the raw body for a 200 that breaks the schema', async () => {
    const data = reportData(2);
    const question = (data.sections as { questions: Record<string, unknown>[] }[])[0]?.questions[0];
    if (question) question.response = 42;
    const body = JSON.stringify({ data });
    const { client, server } = await harness(() => ({ body }));

    const outcome = await client.getReport(1, 2);

    expect(outcome.kind).toBe('invalid');
    if (outcome.kind !== 'invalid') return;
    expect(outcome.body).toBe(body);
    expect(outcome.issues).toContainEqual(
      expect.objectContaining({ path: 'data.sections[0].questions[0].response', code: 'invalid_type' }),
    );
    expect(server.requests).toHaveLength(1);
  });

  it('returns under evolve any report whose data is an object unchecked, as sent, and the others invalid', async () => {
    const data = reportData(2);
    const question = (data.sections as { questions: Record<string, unknown>[] }[])[0]?.questions[0];
    if (question) question.response = 42;
    const bodies: unknown[] = [{ data }, { data: [] }, { data: null }, { report: data }, [data]];
    let next = 0;
    const { client } = await harness(() => ({ body: JSON.stringify(bodies[next++]) }));

    const landed = await client.getReport(1, 2, 'evolve');
    expect(landed).toEqual({ kind: 'unchecked', raw: data });
    for (const got of ['an array', 'null', 'no data', 'no data']) {
      const outcome = await client.getReport(1, 2, 'evolve');
      expect(outcome).toMatchObject({
        kind: 'invalid',
        issues: [{ path: 'data', code: 'invalid_type', message: `expected an object, got ${got}` }],
      });
    }
  });

  it('returns not_found for a 404', async () => {
    const { client } = await harness(() => errorReply(404, 'NOT_FOUND', 'Resource not found.'));

    await expect(client.getReport(1, 2)).resolves.toEqual({
      kind: 'not_found',
      message: 'Resource not found.',
    });
  });

  for (const reason of ['not_published', 'survey_missing', 'no_sections'] as const) {
    it(`returns not_ready ${reason} for its 409 message, without retrying`, async () => {
      const { client, server } = await harness(() => notReady(NOT_READY_REASONS[reason]));

      const outcome = await client.getReport(1, 2);

      expect(outcome).toEqual({ kind: 'not_ready', reason, message: NOT_READY_REASONS[reason] });
      expect(server.requests).toHaveLength(1);
    });
  }

  it('returns not_ready unknown for a 409 message it does not know, without retrying', async () => {
    const { client, server } = await harness(() => notReady('Something new.'));

    await expect(client.getReport(1, 2)).resolves.toMatchObject({ kind: 'not_ready', reason: 'unknown' });
    expect(server.requests).toHaveLength(1);
  });

  it('retries a 409 "try again later" with backoff and returns the report when it comes', async () => {
    const tryLater = notReady(NOT_READY_REASONS.try_later);
    const { client, server, clock } = await harness(
      (req): Reply => (req.nth <= 2 ? tryLater : { body: { data: reportData(2) } }),
      // Mid-range jitter: Math.random could draw a backoff under 1 ms, which is no sleep at all.
      { random: () => 0.5 },
    );

    const outcome = await client.getReport(1, 2);

    expect(outcome.kind).toBe('ok');
    expect(server.requests).toHaveLength(3);
    expect(clock.sleeps).toHaveLength(2);
  });

  it('returns not_ready try_later once the retries ran out', async () => {
    const { client, server } = await harness(() => notReady(NOT_READY_REASONS.try_later), {
      retry: { maxAttempts: 4 },
    });

    const outcome = await client.getReport(1, 2);

    expect(outcome).toEqual({ kind: 'not_ready', reason: 'try_later', message: NOT_READY_REASONS.try_later });
    expect(server.requests).toHaveLength(4);
  });

  it('never throws for random JSON shaped like a report: ok (raw as sent) or invalid (body as sent)', async () => {
    let body = '';
    const { client } = await harness(() => ({ body, headers: { 'content-type': 'application/json' } }));

    await fc.assert(
      fc.asyncProperty(reportLike(), async (value) => {
        body = JSON.stringify(value);
        const outcome = await client.getReport(1, 2);
        if (outcome.kind === 'ok') {
          expect(outcome.raw).toStrictEqual(JSON.parse(body).data);
        } else {
          expect(outcome.kind).toBe('invalid');
          if (outcome.kind === 'invalid') {
            expect(outcome.body).toBe(body);
            expect(outcome.issues.length).toBeGreaterThan(0);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});

// ---- report-shaped arbitrary: every field valid most of the time, otherwise any JSON or missing --

const anyJson = fc.jsonValue({ maxDepth: 2 });
function field<T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 150, arbitrary: valid },
    { weight: 1, arbitrary: anyJson },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}
const str = fc.string({ maxLength: 8 });
const strOrNull = fc.option(str);
const intOrNull = fc.option(fc.integer());
const few = <T>(item: fc.Arbitrary<T>) => fc.array(item, { maxLength: 3 });

const scalarQuestion = fc.record({
  type: field(fc.constant('question')),
  reference_code: field(strOrNull),
  question: field(strOrNull),
  question_type: field(strOrNull),
  answer_type: field(fc.constantFrom('single-choice', 'multiple-choice', null)),
  response: field(strOrNull),
  obtained_score: field(str),
  max_score: field(str),
  comment: field(strOrNull),
  photos: field(few(strOrNull)),
  threads: field(few(str)),
  logic_questions: field(fc.constant([])),
});
const logicQuestion = fc.record({
  reference_code: field(strOrNull),
  question: field(strOrNull),
  question_type: field(strOrNull),
  answer_type: field(strOrNull),
  response: field(few(str)),
  obtained_score: field(str),
  max_score: field(str),
  threads: field(fc.oneof(str, fc.constant([]))),
});
const listQuestion = fc.record({
  type: field(fc.constant('question')),
  reference_code: field(strOrNull),
  question: field(strOrNull),
  question_type: field(strOrNull),
  answer_type: field(fc.constantFrom('single-choice', 'multiple-choice')),
  response: field(few(str)),
  obtained_score: field(str),
  max_score: field(str),
  comment: field(strOrNull),
  photos: field(few(strOrNull)),
  threads: field(fc.dictionary(str, anyJson, { maxKeys: 2 })),
  logic_questions: field(few(logicQuestion)),
});
const textEntryQuestion = fc.record({
  type: field(fc.constant('text_entry')),
  description: field(strOrNull),
  answer: field(str),
});
const input = fc.oneof(
  fc.constant(null),
  fc.record({
    input_type: field(fc.constant('text')),
    description: field(strOrNull),
    answer: field(strOrNull),
  }),
  fc.record({
    input_type: field(strOrNull),
    description: field(strOrNull),
    answer: field(
      fc.oneof(fc.constant(null), str, few(strOrNull), fc.dictionary(str, anyJson, { maxKeys: 2 })),
    ),
    measurement: field(strOrNull),
  }),
);
const image = fc.option(fc.record({ url: field(str), thumb_url: field(str), caption: field(strOrNull) }));
const gallery = fc.option(
  fc.record({ description: field(strOrNull), view_type: field(str), images: field(few(image)) }),
);
const section = fc.record({
  id: field(str),
  section_title: field(str),
  sort_order: field(str),
  percentage: field(strOrNull),
  obtained_score: field(strOrNull),
  max_score: field(intOrNull),
  questions: field(few(fc.oneof(scalarQuestion, listQuestion, textEntryQuestion, fc.constant(null)))),
  text_entries: field(few(fc.record({ description: field(strOrNull), answer: field(strOrNull) }))),
  inputs: field(few(input)),
  media_galleries: field(few(gallery)),
});
const job = fc.record({
  id: field(fc.integer()),
  job_status: field(fc.constantFrom(1, 2)),
  job_score_percentage: field(strOrNull),
  campaign: field(fc.record({ id: field(intOrNull), campaign_name: field(strOrNull) })),
  location: field(
    fc.record({
      id: field(intOrNull),
      location_code: field(strOrNull),
      location_name: field(strOrNull),
      is_competitor: field(fc.boolean()),
      competitor_name: field(strOrNull),
    }),
  ),
  report: field(
    fc.record({
      id: field(intOrNull),
      report_type: field(strOrNull),
      survey_id: field(intOrNull),
      survey_name: field(strOrNull),
    }),
  ),
});

function reportLike(): fc.Arbitrary<unknown> {
  return fc.oneof(
    {
      weight: 20,
      arbitrary: fc.record({ data: field(fc.record({ job: field(job), sections: field(few(section)) })) }),
    },
    { weight: 1, arbitrary: anyJson },
  );
}
