/**
 * List items of List Campaigns and List Jobs, and the per-job facts a report shares with its
 * list item (status, score, location), all pure functions of the seed and the ids.
 */
import { rngFor, STREAM } from './prng.js';
import { dateAt, isoAt, label, sentence, TRICKY_TEXT } from './text.js';

const CAMPAIGN_NAMES = [
  'Store visit',
  'Mystery shop',
  'Drive-thru audit',
  'Café "Express" check',
  'Retail compliance 店舗監査',
  'Customer experience ✨',
] as const;
const CITIES = ['Amsterdam', 'Berlin', 'São Paulo', 'Zürich', '東京', 'القاهرة', "L'Aquila"] as const;

export interface CampaignFacts {
  name: string;
  open: boolean;
  surveyId: number | null;
  surveyName: string | null;
  reportType: string | null;
}

/** Facts of a campaign that its list item and its jobs' reports share. */
export function campaignFacts(seed: number, campaignId: number): CampaignFacts {
  const rng = rngFor(seed, STREAM.campaign, campaignId);
  return {
    name: `${rng.pick(CAMPAIGN_NAMES)} ${rng.int(2024, 2026)} #${campaignId}`,
    open: rng.chance(0.6),
    surveyId: rng.orNull(0.05, () => rng.int(100, 9_999)),
    surveyName: rng.orNull(0.1, () => `${label(rng)} survey`),
    reportType: rng.orNull(0.1, () => rng.pick(['standard', 'audit', 'mystery_shop'])),
  };
}

/** The List Campaigns item: the seven named attributes plus fields the spec does not name. */
export function campaignItem(seed: number, campaignId: number): Record<string, unknown> {
  const facts = campaignFacts(seed, campaignId);
  const rng = rngFor(seed, STREAM.campaign, campaignId, 1);
  const start = rng.int(0, 300);
  const end = start + rng.int(14, 120);
  return {
    id: campaignId,
    campaign_name: facts.name,
    campaign_status: facts.open ? 'active' : 'completed',
    start_date: dateAt(start),
    end_date: dateAt(end),
    completed_at: facts.open ? null : isoAt(end + rng.next()),
    created_at: isoAt(start - rng.int(1, 30) + rng.next()),
    client_reference: { code: `CR-${rng.hex(6).toUpperCase()}`, region: rng.pick(['EMEA', 'APAC', 'AMER']) },
  };
}

export interface LocationFacts {
  id: number | null;
  location_code: string | null;
  location_name: string | null;
  is_competitor: boolean;
  competitor_name: string | null;
}

/** Where a job took place; fixed for the job's life (touch() does not move it). */
export function locationOf(seed: number, jobId: number): LocationFacts {
  const rng = rngFor(seed, STREAM.location, jobId);
  const isCompetitor = rng.chance(0.1);
  return {
    id: rng.orNull(0.05, () => rng.int(1, 50_000)),
    location_code: rng.orNull(0.15, () => `LOC-${rng.int(1, 9_999)}`),
    location_name: rng.orNull(0.05, () =>
      rng.chance(0.1) ? `${TRICKY_TEXT.quotes} ${rng.pick(CITIES)}` : `${rng.pick(CITIES)} ${label(rng)}`,
    ),
    is_competitor: isCompetitor,
    competitor_name: isCompetitor ? rng.orNull(0.2, () => `Competitor ${label(rng)}`) : null,
  };
}

export interface JobFacts {
  job_status: 1 | 2;
  job_score_percentage: string | null;
  /** Days after the simulated epoch. */
  visitedDay: number;
  updatedDay: number;
}

/** Facts of a job version: touch() bumps the version, which changes score and updated_at. */
export function jobFacts(seed: number, jobId: number, version: number): JobFacts {
  const base = rngFor(seed, STREAM.job, jobId);
  const visitedDay = base.int(0, 400) + base.next();
  const jobStatus: 1 | 2 = base.chance(0.7) ? 2 : 1;
  const rng = rngFor(seed, STREAM.job, jobId, version);
  return {
    job_status: jobStatus,
    job_score_percentage: rng.orNull(0.1, () => (rng.next() * 100).toFixed(2)),
    visitedDay,
    updatedDay: visitedDay + 1 + version + rng.next(),
  };
}

/** The List Jobs item: id, job_status, job_score_percentage, and fields the spec does not name. */
export function jobItem(
  seed: number,
  jobId: number,
  version: number,
  published: boolean,
): Record<string, unknown> {
  const facts = jobFacts(seed, jobId, version);
  const location = locationOf(seed, jobId);
  const rng = rngFor(seed, STREAM.job, jobId, -1);
  return {
    id: jobId,
    job_status: facts.job_status,
    job_score_percentage: facts.job_score_percentage,
    location_name: location.location_name,
    visit_date: dateAt(facts.visitedDay),
    published_at: published ? isoAt(facts.visitedDay + 0.5) : null,
    updated_at: isoAt(facts.updatedDay),
    shopper: {
      id: rng.int(1, 90_000),
      level: rng.pick(['gold', 'silver', null]),
      notes: [sentence(rng, 1, 3)],
    },
  };
}
