/**
 * The four endpoints of spec section 4, as pure functions from a request (already
 * authenticated) and the dataset to an answer.
 */
import { type Answer, errorAnswer, jsonAnswer, notReadyAnswer } from './answers.js';
import type { Principal } from './auth.js';
import { OTHER_COMPANY_NAME } from './auth.js';
import { pageAnswer, parsePaging } from './pagination.js';
import type { Dataset, SimCampaign } from './types.js';

export type Endpoint = 'verify' | 'campaigns' | 'jobs' | 'report';

export interface Route {
  endpoint: Endpoint;
  /** Raw path segments; may be non-numeric (then the resource is not found). */
  campaignId?: string;
  jobId?: string;
}

const PREFIX = '/integration/v1/client';
const VERIFY = `${PREFIX}/verify`;
const CAMPAIGNS = `${PREFIX}/campaigns`;
const JOBS = new RegExp(`^${PREFIX}/campaigns/([^/]+)/jobs$`);
const REPORT = new RegExp(`^${PREFIX}/campaigns/([^/]+)/jobs/([^/]+)/report$`);

/** Which endpoint a path is, or undefined for a path the API does not have. */
export function matchRoute(pathname: string): Route | undefined {
  if (pathname === VERIFY) return { endpoint: 'verify' };
  if (pathname === CAMPAIGNS) return { endpoint: 'campaigns' };
  const jobs = JOBS.exec(pathname);
  if (jobs) return { endpoint: 'jobs', campaignId: jobs[1] };
  const report = REPORT.exec(pathname);
  if (report) return { endpoint: 'report', campaignId: report[1], jobId: report[2] };
  return undefined;
}

/** A path id as an integer, or undefined when it is not a plain positive integer. */
export function pathId(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,15}$/.test(raw)) return undefined;
  return Number(raw);
}

export interface RouteRequest {
  route: Route;
  query: URLSearchParams;
  principal: Principal;
}

/** Answers a GET; the caller has done auth, rate limiting and fault injection. */
export function answerRoute(request: RouteRequest, dataset: Dataset): Answer {
  const { route, principal } = request;
  switch (route.endpoint) {
    case 'verify':
      return jsonAnswer(200, {
        data: {
          verified: true,
          company: { name: principal.company === 'main' ? dataset.company : OTHER_COMPANY_NAME },
        },
      });
    case 'campaigns': {
      const paging = parsePaging(request.query);
      if (paging.answer) return paging.answer;
      const campaigns = principal.company === 'main' ? dataset.campaigns : [];
      return pageAnswer(
        campaigns.map((c) => c.item),
        paging.page,
        paging.perPage,
      );
    }
    case 'jobs': {
      const found = campaignFor(route, principal, dataset);
      if ('answer' in found) return found.answer;
      const paging = parsePaging(request.query);
      if (paging.answer) return paging.answer;
      return pageAnswer(
        found.campaign.jobs.map((j) => j.item),
        paging.page,
        paging.perPage,
      );
    }
    case 'report':
      return reportAnswer(route, principal, dataset);
  }
}

/** The campaign of the path: 404 when unknown, 403 when it belongs to another company. */
function campaignFor(
  route: Route,
  principal: Principal,
  dataset: Dataset,
): { campaign: SimCampaign } | { answer: Answer } {
  const id = pathId(route.campaignId);
  const campaign = id === undefined ? undefined : dataset.campaign(id);
  if (!campaign) return { answer: errorAnswer('NOT_FOUND') };
  if (principal.company !== 'main') return { answer: errorAnswer('FORBIDDEN') };
  return { campaign };
}

function reportAnswer(route: Route, principal: Principal, dataset: Dataset): Answer {
  const found = campaignFor(route, principal, dataset);
  if ('answer' in found) return found.answer;
  const jobId = pathId(route.jobId);
  const job = jobId === undefined ? undefined : dataset.job(jobId);
  if (!job || job.campaignId !== found.campaign.id) return errorAnswer('NOT_FOUND');
  if (job.forbidden) return errorAnswer('FORBIDDEN');
  if (job.tryLaterAttempts > 0) {
    job.tryLaterAttempts -= 1;
    return notReadyAnswer('try_later');
  }
  if (job.state !== 'published') return notReadyAnswer(job.state);
  const data = job.invalid
    ? dataset.invalidReportOf(job.id)
    : job.drift
      ? dataset.driftedReportOf(job.id)
      : dataset.reportOf(job.id);
  return jsonAnswer(200, { data });
}
