/**
 * The report generator: the `data` object of Get Report (spec 2.5), a pure function of
 * (seed, campaign id, job id, version, size). Reports are generated when asked for, never
 * stored, so a dataset of 20,000 jobs costs only its list items.
 */
import { campaignFacts, jobFacts, locationOf } from './items.js';
import { type Rng, rngFor, STREAM } from './prng.js';
import { questionItem, type TextMix } from './questions.js';
import { inputs, mediaGalleries, textEntries } from './section-parts.js';
import { isoAt, label, scoreText, tricky } from './text.js';
import type { DriftChange, ReportSize } from './types.js';

/** Concrete size of one report; 'mixed' resolves to one of these per job. */
export type ConcreteSize = 'tiny' | 'small' | 'large';

/** Under 'mixed': this share of jobs get large reports, the next share tiny ones, the rest small. */
const MIXED_LARGE_SHARE = 0.01;
const MIXED_TINY_SHARE = 0.15;
/** Large reports: 50 sections x 30 questions (the brief's upper bound for a real survey). */
const LARGE_SECTIONS = 50;
const LARGE_QUESTIONS = 30;
/** Share of reports that carry 10k-char strings; rare because they dominate the bytes. */
const LONG_TEXT_REPORT_SHARE = 0.08;

/** The size of a job's report under the dataset's size option. */
export function concreteSize(seed: number, jobId: number, size: ReportSize): ConcreteSize {
  if (size !== 'mixed') return size;
  const roll = rngFor(seed, STREAM.size, jobId).next();
  if (roll < MIXED_LARGE_SHARE) return 'large';
  if (roll < MIXED_LARGE_SHARE + MIXED_TINY_SHARE) return 'tiny';
  return 'small';
}

export interface ReportInput {
  seed: number;
  campaignId: number;
  jobId: number;
  version: number;
  size: ReportSize;
}

function shape(rng: Rng, size: ConcreteSize): { sections: number; questions: () => number } {
  if (size === 'tiny') return { sections: 1, questions: () => 2 };
  if (size === 'large') return { sections: LARGE_SECTIONS, questions: () => LARGE_QUESTIONS };
  return { sections: rng.int(3, 5), questions: () => rng.int(3, 7) };
}

function reportJob(input: ReportInput, rng: Rng): Record<string, unknown> {
  const { seed, campaignId, jobId, version } = input;
  const facts = jobFacts(seed, jobId, version);
  const campaign = campaignFacts(seed, campaignId);
  const job: Record<string, unknown> = {
    id: jobId,
    job_status: facts.job_status,
    job_score_percentage: facts.job_score_percentage,
    campaign: { id: campaignId, campaign_name: rng.chance(0.03) ? null : campaign.name },
    location: locationOf(seed, jobId),
    report: {
      id: rng.orNull(0.05, () => jobId * 10 + 7),
      // nulls also per report, not only per campaign: a survey can be deleted after a visit
      report_type: rng.chance(0.05) ? null : campaign.reportType,
      survey_id: rng.chance(0.04) ? null : campaign.surveyId,
      survey_name: rng.chance(0.04) ? null : campaign.surveyName,
    },
  };
  if (rng.chance(0.3)) {
    job.visit = {
      started_at: isoAt(facts.visitedDay),
      duration_minutes: rng.int(5, 90),
      shopper_notes: null,
    };
  }
  return job;
}

function section(rng: Rng, index: number, questionCount: number, jobId: number, mix: TextMix) {
  const maxScore = rng.orNull(0.2, () => rng.pick([0, 10, 20, 50, 100]));
  const obtained = maxScore === null ? null : rng.int(0, maxScore * 2) / 2;
  const questions: Array<Record<string, unknown> | null> = [];
  for (let i = 0; i < questionCount; i++) questions.push(questionItem(rng, jobId, mix));
  const item: Record<string, unknown> = {
    id: rng.chance(0.7) ? String(rng.int(1_000, 999_999)) : `sec_${rng.hex(8)}`,
    section_title: rng.chance(0.1) ? tricky(rng) : label(rng),
    sort_order: String((index + 1) * rng.pick([1, 10])),
    percentage: obtained === null || maxScore === 0 ? null : ((obtained / (maxScore || 1)) * 100).toFixed(2),
    obtained_score: obtained === null ? null : scoreText(rng, obtained),
    max_score: maxScore,
    questions,
    text_entries: textEntries(rng, mix),
    inputs: inputs(rng, mix),
    media_galleries: mediaGalleries(rng, jobId),
  };
  if (rng.chance(0.1)) item.weight = rng.pick([0.5, 1, 1.5]);
  if (rng.chance(0.05)) item.settings = { collapsible: true, color: '#ff00aa', i18n: { fr: 'Accueil' } };
  return item;
}

/** The report `data` object of a published job. */
export function generateReport(input: ReportInput): Record<string, unknown> {
  const size = concreteSize(input.seed, input.jobId, input.size);
  const rng = rngFor(input.seed, STREAM.report, input.jobId, input.version);
  const hasLong = rng.chance(LONG_TEXT_REPORT_SHARE);
  const mix: TextMix = {
    tricky: rng.pick([0.05, 0.12, 0.25]),
    // about two long strings per small report that has them, a few dozen in a large one
    long: hasLong ? (size === 'large' ? 0.005 : 0.03) : 0,
  };
  const layout = shape(rng, size);
  const sections: Array<Record<string, unknown>> = [];
  for (let i = 0; i < layout.sections; i++)
    sections.push(section(rng, i, layout.questions(), input.jobId, mix));
  const data: Record<string, unknown> = { job: reportJob(input, rng), sections };
  if (rng.chance(0.15)) data.meta = { api_version: 'v1', generated_at: isoAt(400), cached: false };
  return data;
}

type Json = Record<string, unknown>;

const jobOf = (data: Json): Json => data.job as Json;
const firstSection = (data: Json): Json => (data.sections as Json[])[0] as Json;

/** Ways to break spec 2.5; each one makes ReportResponseSchema fail (every report has a section). */
const CORRUPTIONS: ReadonlyArray<(data: Json) => void> = [
  (data) => {
    delete firstSection(data).id;
  },
  (data) => {
    jobOf(data).job_status = 3;
  },
  (data) => {
    jobOf(data).id = String(jobOf(data).id);
  },
  (data) => {
    (firstSection(data).questions as unknown[]).push({
      type: 'question',
      question: 'Every other field missing',
    });
  },
  (data) => {
    firstSection(data).max_score = '10';
  },
  (data) => {
    delete data.sections;
  },
];

/** The report changes of `DriftChange`: each makes ReportResponseSchema fail, or adds a field it lets through. */
const DRIFTS: Readonly<Record<DriftChange, (data: Json) => void>> = {
  unlisted_value: (data) => {
    jobOf(data).job_status = 3;
  },
  decimal_string: (data) => {
    firstSection(data).max_score = '12.5';
  },
  null_required: (data) => {
    firstSection(data).section_title = null;
  },
  new_variant: (data) => {
    (firstSection(data).questions as unknown[]).push({
      type: 'rating',
      question: 'How was the visit?',
      stars: 4,
    });
  },
  new_field: (data) => {
    data.scorecard = { grade: 'B', weights: [0.5, 0.5] };
    (jobOf(data).location as Json).floor = 2;
  },
};

/** A copy of a valid report with the change `change`. */
export function driftReport(report: unknown, change: DriftChange): unknown {
  const copy = structuredClone(report) as Json;
  DRIFTS[change](copy);
  return copy;
}

/** A copy of a valid report with one deterministic schema violation. */
export function corruptReport(report: unknown, seed: number, jobId: number): unknown {
  const copy = structuredClone(report) as Json;
  rngFor(seed, STREAM.invalid, jobId).pick(CORRUPTIONS)(copy);
  return copy;
}
