/**
 * A seeded generator of realistic reports for benchmarks: survey-shaped (question texts repeat
 * across reports, as in production), with answers, comments, photos and galleries that vary.
 */
import type { QuestionItem, Report } from '../../shared/api/schemas.js';
import { questionTextEntry } from './reports.js';

/** mulberry32: a small seeded PRNG, so a benchmark sees the same data every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  'entrance',
  'counter',
  'staff',
  'greeted',
  'clean',
  'shelves',
  'stocked',
  'price',
  'labels',
  'visible',
  'uniform',
  'friendly',
  'queue',
  'minutes',
  'checkout',
  'display',
  'promotion',
  'fridge',
  'temperature',
  'lighting',
  'signage',
  'floor',
  'restroom',
  'parking',
  'window',
  'offer',
  'loyalty',
  'card',
  'receipt',
  'café',
];

interface QuestionTemplate {
  code: string;
  text: string;
  list: boolean;
  options: string[];
  logic: { code: string; text: string }[];
}

interface SurveyTemplate {
  id: number;
  name: string;
  sections: { id: string; title: string; questions: (QuestionTemplate | 'text_entry' | null)[] }[];
}

/**
 * Deterministic generator of realistic reports: a few surveys whose question texts repeat
 * across reports (as in production), answers, comments, photos and galleries that vary.
 *
 * @example
 * const gen = realisticReports(1); const r = gen.report(1001, 7);
 */
export function realisticReports(seed: number): { report(jobId: number, campaignId: number): Report } {
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const int = (min: number, max: number) => min + Math.floor(rand() * (max - min + 1));
  const sentence = (min: number, max: number) => {
    const n = int(min, max);
    const words: string[] = [];
    for (let i = 0; i < n; i++) words.push(pick(WORDS));
    const s = words.join(' ');
    return `${s[0]?.toUpperCase()}${s.slice(1)}`;
  };
  const surveys: SurveyTemplate[] = [];
  for (let s = 0; s < 6; s++) {
    const sections: SurveyTemplate['sections'] = [];
    const sectionCount = int(5, 9);
    for (let k = 0; k < sectionCount; k++) {
      const questions: SurveyTemplate['sections'][number]['questions'] = [];
      const questionCount = int(8, 18);
      for (let q = 0; q < questionCount; q++) {
        const roll = rand();
        if (roll < 0.04) questions.push(null);
        else if (roll < 0.12) questions.push('text_entry');
        else {
          const list = rand() < 0.3;
          const code = `S${s}-${k}-${q}`;
          questions.push({
            code,
            text: `${sentence(6, 16)}?`,
            list,
            options: list ? ['Counter', 'Tables', 'Floor', 'Shelves', 'Windows'] : ['Yes', 'No', 'N/A'],
            logic: list
              ? Array.from({ length: int(0, 3) }, (_, j) => ({
                  code: `${code}.${j}`,
                  text: `${sentence(5, 12)}?`,
                }))
              : [],
          });
        }
      }
      sections.push({ id: `sec-${s}-${k}`, title: sentence(1, 3), questions });
    }
    surveys.push({ id: 100 + s, name: `Survey ${sentence(2, 3)}`, sections });
  }

  const photo = (jobId: number) =>
    `https://cdn.example.com/jobs/${jobId}/photos/${Math.floor(rand() * 1e12).toString(36)}.jpg`;

  function question(t: QuestionTemplate, jobId: number): QuestionItem {
    const photos = Array.from({ length: rand() < 0.8 ? 0 : int(1, 3) }, () =>
      rand() < 0.05 ? null : photo(jobId),
    );
    const comment = rand() < 0.7 ? null : sentence(3, 20);
    if (!t.list) {
      return {
        type: 'question',
        reference_code: t.code,
        question: t.text,
        question_type: 'radio',
        answer_type: 'single-choice',
        response: rand() < 0.05 ? null : pick(t.options),
        obtained_score: String(int(0, 1)),
        max_score: '1',
        comment,
        photos,
        threads: [],
        logic_questions: [],
      };
    }
    return {
      type: 'question',
      reference_code: t.code,
      question: t.text,
      question_type: 'checkbox',
      answer_type: 'multiple-choice',
      response: t.options.filter(() => rand() < 0.4),
      obtained_score: String(int(0, 5)),
      max_score: '5',
      comment,
      photos,
      threads: rand() < 0.9 ? {} : { [`t${int(1, 9)}`]: sentence(2, 8) },
      logic_questions: t.logic.map((l) => ({
        reference_code: l.code,
        question: l.text,
        question_type: 'checkbox',
        answer_type: 'multiple-choice',
        response: ['Napkins', 'Cups', 'Straws'].filter(() => rand() < 0.5),
        obtained_score: String(int(0, 2)),
        max_score: '2',
        threads: rand() < 0.8 ? [] : sentence(2, 6),
      })),
    };
  }

  return {
    report(jobId, campaignId) {
      const survey = pick(surveys);
      const competitor = rand() < 0.1;
      return {
        job: {
          id: jobId,
          job_status: rand() < 0.8 ? 2 : 1,
          job_score_percentage: rand() < 0.05 ? null : (rand() * 100).toFixed(2),
          campaign: { id: campaignId, campaign_name: `Campaign ${campaignId}` },
          location: {
            id: 1000 + (jobId % 500),
            location_code: `LOC-${jobId % 500}`,
            location_name: `${pick(WORDS)} ${pick(WORDS)} store`,
            is_competitor: competitor,
            competitor_name: competitor ? `Rival ${pick(WORDS)}` : null,
          },
          report: { id: jobId * 10, report_type: 'standard', survey_id: survey.id, survey_name: survey.name },
        },
        sections: survey.sections.map((s, k) => ({
          id: s.id,
          section_title: s.title,
          sort_order: String(k + 1),
          percentage: (rand() * 100).toFixed(1),
          obtained_score: String(int(0, 20)),
          max_score: 20,
          questions: s.questions.map((t) =>
            t === null
              ? null
              : t === 'text_entry'
                ? questionTextEntry({ answer: sentence(1, 12) })
                : question(t, jobId),
          ),
          text_entries: Array.from({ length: int(0, 2) }, () => ({
            description: sentence(1, 4),
            answer: rand() < 0.1 ? null : sentence(1, 15),
          })),
          inputs: Array.from({ length: int(0, 3) }, () => {
            const roll = rand();
            if (roll < 0.1) return null;
            if (roll < 0.5)
              return { input_type: 'text' as const, description: sentence(1, 4), answer: sentence(1, 6) };
            return {
              input_type: 'number',
              description: sentence(1, 4),
              answer: roll < 0.9 ? String(int(0, 40)) : { min: int(0, 5), max: int(6, 40) },
              measurement: pick(['°C', 'minutes', 'count', null]),
            };
          }),
          media_galleries: Array.from({ length: int(0, 2) }, () =>
            rand() < 0.1
              ? null
              : {
                  description: rand() < 0.3 ? null : sentence(1, 5),
                  view_type: 'grid-view',
                  images: Array.from({ length: int(1, 5) }, () => {
                    if (rand() < 0.05) return null;
                    const url = photo(jobId);
                    return {
                      url,
                      thumb_url: url.replace('/photos/', '/thumbs/'),
                      caption: rand() < 0.6 ? null : sentence(1, 6),
                    };
                  }),
                },
          ),
        })),
      };
    },
  };
}
